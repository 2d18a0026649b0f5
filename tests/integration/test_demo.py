"""The README's first command: `make demo` rehearses fv-ml1's rebalance on a twin of fv-ml1
(the seeds' host, 4 x 97,887 MiB, nine seats) and leaves no twin behind, however it ends."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO_ROOT, ansible_env
from support.need import need_root_and
from support.process import run_in_group, stop_group

from twinlib import fleet

pytestmark = [pytest.mark.twin, pytest.mark.slow]

TWIN = str(REPO_ROOT / "tests" / "twin" / "twin")


def _take_down_what_is_left() -> bool:
    """Whether a twin was left up; it is taken down either way, so no later test trips on it."""
    left = fleet.live_record() is not None
    if left:
        subprocess.run([TWIN, "down"], capture_output=True, check=False, env=ansible_env())
    return left


def test_make_demo_rehearses_the_fv_ml1_window(tmp_path):
    need_root_and("ip", "dockerd")
    try:
        proc = run_in_group(["make", "-s", "demo"], timeout=1500, cwd=REPO_ROOT,
                            env=ansible_env({"LLMFLEET_DEMO_DIR": str(tmp_path)}))
    finally:
        left_up = _take_down_what_is_left()
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    assert not left_up, "the demo left its twin up"
    assert "Dry run: the plan and every file diff" in proc.stdout
    assert "| fv-ml1 | **applied** |" in proc.stdout
    assert "| fv-ml1 | **unchanged** |" in proc.stdout, "the second run changes nothing"

    window = json.loads((tmp_path / "window" / "report.json").read_text())["hosts"]["fv-ml1"]
    assert window["status"] == "applied" and all(g["ok"] for g in window["gates"])
    plan = {seat["name"]: seat for seat in window["plan"]["seats"]}
    assert len(plan) == 9
    tokens = {g["seat"]: g["measured"] for g in window["gates"] if g["gate"] == "kv_cache_tokens"}
    assert tokens["meromero-rp"] == plan["meromero-rp"]["kv_cache_tokens"], \
        "the seat's boot log prints the tokens the plan computed for its pinned 22 GiB"
    assert plan["parakeet-nemo"]["gpu_indices"] == [0], "parakeet stays on GPU 0"
    assert all(3 not in seat["gpu_indices"] for seat in plan.values()), "GPU 3 stays clear"
    dry = json.loads((tmp_path / "dry-run" / "report.json").read_text())
    assert dry["check_mode"] and dry["hosts"]["fv-ml1"]["status"] == "planned"
    assert (tmp_path / "window" / "fv-ml1.svg").read_text().startswith("<svg")


def test_a_demo_stopped_half_way_takes_its_twin_down(tmp_path):
    """What a test timeout or Ctrl-C does to the demo: SIGTERM to its process group while its
    twin is up. The demo's trap takes the twin down before the demo exits."""
    need_root_and("ip", "dockerd")
    proc = subprocess.Popen([str(REPO_ROOT / "scripts" / "demo")], cwd=REPO_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env=ansible_env({"LLMFLEET_DEMO_DIR": str(tmp_path)}))
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("== Staging the models"):
                break
        assert fleet.record_in_use(), "the demo's twin is up: " + "".join(seen)
    finally:
        stop_group(proc, grace=300)
        left_up = _take_down_what_is_left()
    assert proc.returncode == 143, "".join(seen)
    assert not left_up, "the stopped demo left its twin up"
