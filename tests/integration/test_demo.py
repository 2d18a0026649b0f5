"""The README's first command: `make demo` rehearses fv-ml1's rebalance on a twin of fv-ml1
(the seeds' host, 4 x 97,887 MiB, nine seats) and leaves no twin behind, however it ends."""

from __future__ import annotations

import json
import re
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


def _section(report_dir):
    return json.loads((report_dir / "report.json").read_text())["hosts"]["fv-ml1"]


def test_make_demo_rehearses_the_fv_ml1_window(tmp_path):
    need_root_and("ip", "dockerd")
    try:
        proc = run_in_group(["make", "-s", "demo"], timeout=1500, cwd=REPO_ROOT,
                            env=ansible_env({"LLMFLEET_DEMO_DIR": str(tmp_path)}))
    finally:
        left_up = _take_down_what_is_left()
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    assert not left_up, "the demo left its twin up"
    out = proc.stdout

    # before: util-sized seats, each with the KV its card had free when it booted
    lottery = re.findall(r"^([a-z-]+) \| ([0-9.]+) \| ([0-9]+) \| ([0-9.]+)$", out, re.M)
    assert sorted(row[0] for row in lottery) == [
        "coder", "cyberprev", "erp-seat", "gen-small", "intern-decision", "meromero-rp", "voices"]
    assert all(float(gib) > 0 for _name, gib, _tokens, _conc in lottery)

    # the window's plan: the one `make plan` prints (the recorded plateau), from where the seats
    # run, with seats that move
    window = _section(tmp_path / "window")
    planned = json.loads((tmp_path / "plan" / "fv-ml1-plan.json").read_text())
    assert (window["plan"]["worst_spare_mib"], window["plan"]["moves"]) == (
        planned["worst_spare_mib"], planned["moves"])
    assert window["plan"]["moves"], "a rebalance, not a first deployment: seats move"
    assert set(window["plan"]["moves"]) <= set(window["changed_seats"])

    # the window: every gate passed, every replaced file kept as a dated backup
    assert window["status"] == "applied" and all(g["ok"] for g in window["gates"])
    assert len(window["backups"]) == 2 * 7 + 2, "each vLLM seat's .env and compose.yaml, each tenant's compose.yaml"
    assert all(re.search(r"/srv/compose/[a-z-]+/(\.env|compose\.yaml)\.bak-\d{8}-rebal$", path)
               for path in window["backups"])
    assert any(action.startswith("stopped first (moves or shrinks): ") for action in window["actions"])
    assert "| fv-ml1 | **applied** |" in out
    seats = {seat["name"]: seat for seat in window["plan"]["seats"]}
    tokens = {g["seat"]: g["measured"] for g in window["gates"] if g["gate"] == "kv_cache_tokens"}
    assert tokens["meromero-rp"] == seats["meromero-rp"]["kv_cache_tokens"], \
        "the seat's boot log prints the tokens the plan computed for its pinned 22 GiB"
    assert seats["parakeet-nemo"]["gpu_indices"] == [0], "parakeet stays on GPU 0"
    assert all(3 not in seat["gpu_indices"] for seat in seats.values()), "GPU 3 stays clear"
    assert re.search(r"\d+ s +fv-ml1 vllm-[a-z-]+: running \(health: starting\)", out), "progress while it boots"
    assert (tmp_path / "window" / "fv-ml1.svg").read_text().startswith("<svg")
    dry = json.loads((tmp_path / "dry-run" / "report.json").read_text())
    assert dry["check_mode"] and dry["hosts"]["fv-ml1"]["status"] == "planned"

    # a second run changes nothing
    assert _section(tmp_path / "again")["status"] == "unchanged"
    assert re.search(r"^fv-ml1 +: ok=\d+ +changed=0 ", out, re.M)

    # the faulty window is rolled back to what the window left, file by file
    fault = _section(tmp_path / "fault")
    assert fault["status"] == "rolled_back" and fault["rollback"]["complete"]
    failed = {(g["seat"], g["gate"]) for g in fault["gates"] if not g["ok"]}
    assert ("voices", "container_running") in failed and {seat for seat, _gate in failed} == {"voices"}
    assert {entry["seat"] for entry in fault["rollback"]["files"] if entry["state"] != "as before"} == {"voices"}
    assert all(entry["ok"] for entry in fault["rollback"]["files"] + fault["rollback"]["seats"])


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
