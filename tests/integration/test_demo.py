"""The README's first command: `make demo` rehearses fv-ml1's rebalance on a twin of fv-ml1
(the seeds' host, 4 x 97,887 MiB, nine seats) and leaves no twin behind."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO_ROOT, ansible_env
from support.need import need_root_and

pytestmark = [pytest.mark.twin, pytest.mark.slow]


def test_make_demo_rehearses_the_fv_ml1_window(tmp_path):
    need_root_and("ip", "dockerd")
    proc = subprocess.run(["make", "-s", "demo"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900, check=False,
                          env=ansible_env({"LLMFLEET_DEMO_DIR": str(tmp_path)}))
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
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
    assert plan["parakeet-nemo"]["gpu_indices"] == [0], "Prime: leave parakeet on GPU 0"
    assert all(3 not in seat["gpu_indices"] for seat in plan.values()), "GPU 3 stays clear"
    dry = json.loads((tmp_path / "dry-run" / "report.json").read_text())
    assert dry["check_mode"] and dry["hosts"]["fv-ml1"]["status"] == "planned"
    assert (tmp_path / "window" / "fv-ml1.svg").read_text().startswith("<svg")

    status = subprocess.run([str(REPO_ROOT / "tests" / "twin" / "twin"), "status"],
                            capture_output=True, text=True, check=False, env=ansible_env())
    assert "no twin is up" in (status.stdout + status.stderr).lower()
