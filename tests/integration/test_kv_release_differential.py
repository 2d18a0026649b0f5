"""THE DIFFERENTIAL TEST, per vLLM release: our KV arithmetic for a seat that runs release R
against R's own planning code.

tests/differential/run_release_differential.py reads each modelled release's sources out of
its wheel on PyPI once (range requests, kept in .build/cache/vllm-src), imports its
v1/kv_cache_interface.py and v1/core/kv_cache_utils.py whole under stand-ins for torch and the
rest of vLLM, runs its max-length check (_get_and_verify_max_len, after its RoPE patching), and
compares bytes per block, blocks, tokens, exact concurrency and the boot verdict with its error
text, case by case. A sample of cases per release here; `make kv-releases`
runs the full sweep (1,000 cases per release). 0.33 itself is test_kv_differential.py's.
Without the sources the test fails in CI (``CI`` set) and skips elsewhere, saying why.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from support.need import need

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import (
    LATEST,
    MODELLED,
    parse_version,
)

pytestmark = [pytest.mark.network, pytest.mark.slow]

RUNNER = REPO_ROOT / "tests" / "differential" / "run_release_differential.py"
sys.path.insert(0, str(RUNNER.parent))
from vllm_release_planning import SourceUnavailable, pinned_budget_branch, release_sources  # noqa: E402
CASES = 240
RELEASES = [source for source in MODELLED.values() if source != LATEST]


def run(tmp_path, release, *extra):
    report = tmp_path / ("%s.json" % release)
    proc = subprocess.run([sys.executable, str(RUNNER), "--release", release, "--cases", str(CASES), "--report",
                           str(report), *extra], cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800,
                          check=False)
    if proc.returncode == 2:
        need(False, "vllm %s source unavailable: %s" % (release, json.loads(report.read_text())["source_error"]))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(report.read_text())


@pytest.mark.parametrize("release", RELEASES)
def test_zero_mismatches_against_the_releases_own_planning_code(tmp_path, release):
    report = run(tmp_path, release)
    counts = ("vllm %s (%s): %d of %d cases compared, %d boot failures (%d at the max length), %d refused alike, "
              "%d auto-fits, by family %s") % (
        release, report["source"], report["compared"], report["cases"], report["boot_failures"],
        report["length_refusals"], report["refused_alike"], report["auto_fits"], report["families"])
    print(counts)
    shown = json.dumps(report["mismatches"][:3], indent=1, default=str)
    assert report["mismatches"] == [], "%s\n%d mismatches, first ones:\n%s" % (counts, len(report["mismatches"]), shown)
    assert report["rejected"] == [], report["rejected"][:3]
    # the rest are refused alike (before 0.15 most MLA caches and every bfloat16 one, before 0.14 auto-fit,
    # in 0.10 fp8 caches its FlashAttention cannot read)
    assert report["compared"] + report["refused_alike"] == CASES and report["compared"] >= CASES // 4, counts
    assert {"dense", "gemma2", "gemma3", "gpt_oss", "mla", "llama4", "gdn"} <= set(report["families"]), counts
    assert 0 < report["boot_failures"] < report["compared"], counts
    assert 0 < report["length_refusals"] < report["boot_failures"], counts
    # auto-fit came in 0.14: before, both sides refuse it
    if parse_version(release) < (0, 14, 0):
        assert report["auto_fits"] == 0 < report["refused_alike"], counts
    else:
        assert report["auto_fits"] > 0, counts


def test_the_comparison_catches_an_off_by_one(tmp_path):
    perturbed = run(tmp_path, "0.26.0", "--perturb", "num_blocks")
    # every boot has blocks to compare, and so has a boot refused after its blocks are counted (the
    # CUDA graph check on Mamba blocks); one refused before has none
    assert perturbed["compared"] - perturbed["boot_failures"] < len(perturbed["mismatches"]) < perturbed["compared"]
    assert {mismatch["field"] for mismatch in perturbed["mismatches"]} == {"num_blocks"}


@pytest.mark.parametrize("release", list(MODELLED.values()))
def test_no_modelled_release_profiles_or_validates_a_pinned_budget(release):
    """A release that profiled and validated ``kv_cache_memory_bytes`` instead of skipping the
    memory profile would change the seat's pre-gate and footprint. Every modelled one runs the compile-only profile, logs that it skipped
    memory profiling and returns the pinned bytes unchecked."""
    try:
        root = release_sources(release)
    except SourceUnavailable as exc:
        need(False, str(exc))
    branch = pinned_budget_branch(root)
    assert "skipped memory profiling" in branch and "profile_run(" in branch, branch
    assert "raise" not in branch and "free_memory <" not in branch and "free_memory >" not in branch, branch
    assert branch.rstrip().splitlines()[-1].lstrip().startswith("return") and "kv_cache_memory_bytes" in \
        "\n".join(branch.rstrip().splitlines()[-6:]), branch


# the releases where a backend rule changes (the releases between them select alike;
# `make kv-releases` runs the grid on every modelled release)
GRID_RELEASES = ("0.10.2", "0.11.2", "0.12.0", "0.15.1", "0.18.1", "0.19.1", "0.20.2", "0.22.1", "0.27.1", "0.28.0", "0.29.0",
                 "0.30.0", "0.31.0", "0.33.0")


@pytest.mark.parametrize("release", GRID_RELEASES)
def test_the_attention_backend_is_the_one_the_releases_own_selection_picks(tmp_path, release):
    report = tmp_path / "grid.json"
    proc = subprocess.run([sys.executable, str(RUNNER), "--release", release, "--backend-grid", "--report", str(report)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 1: mismatches, shown below
    grid = json.loads(report.read_text())
    assert grid["points"] == (2160 if release == "0.10.2" else 2700)  # 0.10's CLI offers no bfloat16 cache
    assert grid["mismatches"] == [], json.dumps(grid["mismatches"][:5], indent=1)


def test_the_backend_grid_catches_a_rule_a_release_out(tmp_path):
    """0.22's selection with 0.21's rules: FlashInfer's 512-wide heads and FA3's refusal of an
    fp8_e5m2 cache came in 0.22."""
    script = ("import run_release_differential as rd, json; p, m = rd.backend_grid(rd.load('0.22.1'), '0.21.0'); "
              "print(json.dumps([p, m]))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=RUNNER.parent, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    points, mismatches = json.loads(proc.stdout.splitlines()[-1])
    assert 0 < len(mismatches) < points
    assert (512, "FLASHINFER") in {(m["model"][1], m["vllm"]) for m in mismatches}
    assert all(m["model"][1] == 512 or (m["kv_cache_dtype"] == "fp8_e5m2" and m["gpu"] in ("h100", "h200"))
               for m in mismatches), mismatches
