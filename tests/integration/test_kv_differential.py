"""THE DIFFERENTIAL TEST: our KV sizing against vLLM 0.33.0's own planning code.

tests/differential/run_differential.py reads only the planning sources out of the vllm 0.33.0
wheel on PyPI (range requests, kept in .build/cache/vllm-src), stands in for torch,
and runs vLLM's own functions - per-layer specs, block-size phases, grouping, bytes per block,
num_blocks, the admission check, auto-fit, the capacity line, the Mamba max_num_seqs check - on
600 generated configurations across the model families, TP 1-8, bf16/fp16/fp8 KV and budgets
from 0.25 to 80 GiB, and compares every figure with ours. Without the sources the test fails in
CI (``CI`` set) and skips elsewhere, saying why.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from support.need import need

pytestmark = pytest.mark.network

RUNNER = REPO_ROOT / "tests" / "differential" / "run_differential.py"
CASES = 600


def run_differential(tmp_path, *extra):
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(RUNNER), "--cases", str(CASES), "--report",
                           str(report), *extra], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=1800, check=False)
    if proc.returncode == 2:
        reason = json.loads(report.read_text())["source_error"]
        need(False, "vllm 0.33.0 sources unavailable: %s" % reason)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return run_differential(tmp_path_factory.mktemp("differential"))


def test_zero_mismatches_against_vllms_own_planning_code(report):
    shown = json.dumps(report["mismatches"][:5], indent=1)
    assert report["mismatches"] == [], "%d mismatches, first ones:\n%s" % (
        len(report["mismatches"]), shown)
    assert report["rejected"] == []
    assert report["compared"] >= 500


def test_the_cases_cover_families_parallelism_dtypes_and_both_verdicts(report):
    assert set(report["families"]) == {"dense", "mistral_sliding", "gemma2", "gemma3", "gemma4",
                                       "gemma3n", "gpt_oss", "mla", "llama4", "gdn"}
    assert set(report["tensor_parallel"]) == {"1", "2", "4", "8"}
    assert {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"} <= set(report["kv_cache_dtypes"])
    assert len(report["gpus"]) == 6
    assert 0 < report["boot_failures"] < report["compared"]


def test_the_comparison_catches_an_off_by_one(tmp_path):
    perturbed = run_differential(tmp_path, "--perturb", "kv_cache_tokens")
    assert len(perturbed["mismatches"]) == perturbed["compared"]
    assert {mismatch["field"] for mismatch in perturbed["mismatches"]} == {"kv_cache_tokens"}
