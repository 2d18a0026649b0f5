"""A window cut short on the fleet twin, then run again with the same inventory (issue 34.3).

ansible-playbook is SIGKILLed (its whole process group) while a changed seat boots. Its worker
left that group (Ansible's workers call setsid) and keeps running the boot on the host, so the
next run waits for it, or refuses while it runs, and never runs beside it. Once it is gone, the
next run takes the lock over and gates the seat the dead run never saw gated: the report says so
and the host is `applied` (or put back, when the operator asks for that), never `unchanged`.

When the worker is killed too, the module it ran keeps running on the host (the boot goes on over
a closed SSH channel); the next run finds it there by the run id it carries, and waits for it or
refuses naming it, as for the worker."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.lock import host_processes, run_processes
from support.rollout import (FLEET, assert_rolled_back, fleet, fleet_with, rebalance, report_of, state,
                             twin_pair, wait_for, wait_healthy)

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.slow]

ONLY_TWIN1 = ("-e", "target=twin1")


@pytest.fixture(scope="module")
def twin_inventory(tmp_path_factory):
    with twin_pair() as inventory:
        rebalance(FLEET / "hosts.yml", inventory, tmp_path_factory.mktemp("baseline"), *ONLY_TWIN1)
        wait_healthy("twin1")
        yield inventory


def _lock() -> dict | None:
    path = Path(fleet.find_host("twin1").path("/srv/llmfleet/rebalance.lock"))
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):  # free, or being replaced
        return None


def _alpha_booting(old_id: str) -> bool:
    cid, running, healthy = state("twin1")["containers"].get("vllm-alpha", (old_id, "", False))
    return cid != old_id and running == "running" and not healthy


def _alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_while_alpha_boots(inventory: str, tmp_path: Path, max_model_len: int, boot_delay_s: int):
    """Start a window that changes alpha, SIGKILL ansible-playbook's process group while alpha
    boots; (the dead run's lock record, the state before, its processes left)."""
    before = state("twin1")
    hosts = fleet_with(tmp_path, alpha={"max_model_len": max_model_len,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": str(boot_delay_s)}})
    first = rebalance(hosts, inventory, tmp_path / "first", *ONLY_TWIN1, background=True)
    try:
        wait_for(lambda: _alpha_booting(before["containers"]["vllm-alpha"][0]), what="alpha booting")
        held = _lock()
        assert held and held["controller"]["pid"] == first.pid
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    left = run_processes(held["controller"], os.getpid())
    return held, before, hosts, left


def test_a_worker_that_outlives_its_run_is_waited_for_and_the_seat_is_gated(twin_inventory, tmp_path):
    held, _before, hosts, left = _kill_while_alpha_boots(twin_inventory, tmp_path, 24576, 25)
    workers = [p["pid"] for p in left if p["role"] == "worker"]
    assert workers and all(_alive(pid) for pid in workers), \
        "killing ansible-playbook's process group leaves the worker that runs the boot"

    refused = rebalance(hosts, twin_inventory, tmp_path / "refused", *ONLY_TWIN1,
                        "-e", "seat_rebalance_takeover_wait=1", check=False)
    assert refused.returncode != 0
    assert ("run %s holds /srv/llmfleet/rebalance.lock on twin1; its ansible-playbook is gone but"
            % held["run_id"]) in refused.stdout, refused.stdout[-3000:]
    assert "pid %d" % workers[0] in refused.stdout
    assert _lock()["run_id"] == held["run_id"], "the refused run took nothing"
    assert not (tmp_path / "refused" / "report.json").exists()

    # The next run with the default wait: it takes the lock only once the worker has gone.
    seen = {}

    def watch():
        while "lock" not in seen:
            if "gone" not in seen and not any(_alive(pid) for pid in workers):
                seen["gone"] = time.monotonic()
            record = _lock()
            if record and record["run_id"] != held["run_id"]:
                seen["lock"] = time.monotonic()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rebalance(hosts, twin_inventory, tmp_path / "second", *ONLY_TWIN1)
    seen.setdefault("lock", time.monotonic())
    watcher.join(timeout=10)
    assert "gone" in seen and seen["gone"] <= seen["lock"], \
        "the next run took the lock while a worker of the dead run still ran"

    section = report_of(tmp_path / "second")["hosts"]["twin1"]
    assert section["status"] == "applied", section["status"]
    assert section["interrupted"] == {"run_id": held["run_id"], "seats": ["alpha"]}
    assert "took over the lock of run %s, which was cut short; finishing an interrupted window (run %s): alpha" \
        % (held["run_id"], held["run_id"]) in section["actions"]
    gated = {g["gate"] for g in section["gates"] if g["seat"] == "alpha"}
    assert {"health", "kv_cache_tokens"} <= gated and all(g["ok"] for g in section["gates"]), gated
    assert ("Finishing an interrupted window (run %s): alpha" % held["run_id"]
            in (tmp_path / "second" / "report.md").read_text())
    assert _lock() is None, "the finished window released the lock"

    again = rebalance(hosts, twin_inventory, tmp_path / "third", *ONLY_TWIN1)
    assert report_of(tmp_path / "third")["hosts"]["twin1"]["status"] == "unchanged", again.stdout[-2000:]


def test_an_interrupted_window_is_rolled_back_when_the_operator_asks(twin_inventory, tmp_path):
    held, before, hosts, left = _kill_while_alpha_boots(twin_inventory, tmp_path, 20480, 5)
    wait_for(lambda: not run_processes(held["controller"], os.getpid()), timeout=180,
             what="the dead run's worker to finish the boot it had under way")
    assert left, "the dead run had a worker to wait for"

    proc = rebalance(hosts, twin_inventory, tmp_path / "second", *ONLY_TWIN1,
                     "-e", "seat_rebalance_interrupted_window=roll_back", check=False)
    assert proc.returncode != 0, "a window rolled back did not apply"
    section = report_of(tmp_path / "second")["hosts"]["twin1"]
    assert section["status"] == "rolled_back", section["error"]
    assert section["interrupted"]["seats"] == ["alpha"]
    assert "seat_rebalance_interrupted_window=roll_back" in section["error"]
    assert_rolled_back(before)
    assert _lock() is None


def test_a_module_that_outlives_its_killed_worker_is_waited_for_on_the_host(twin_inventory, tmp_path):
    held, _before, hosts, left = _kill_while_alpha_boots(twin_inventory, tmp_path, 28672, 30)
    workers = [p["pid"] for p in left if p["role"] == "worker"]
    assert workers, "the dead run had a worker running the boot"
    for worker in workers:  # the worker called setsid: its group is it and its ssh client
        os.killpg(worker, signal.SIGKILL)
    wait_for(lambda: not run_processes(held["controller"], os.getpid()), what="the killed workers to go")

    # The twin's hosts run on this machine: the test sees the host's processes as the host does.
    on_host = host_processes(held["run_id"], os.getpid())
    modules = [p["pid"] for p in on_host if p["name"].startswith("python")]
    assert modules and all(_alive(pid) for pid in modules), \
        "the boot the killed worker started goes on on the host: %s" % on_host

    refused = rebalance(hosts, twin_inventory, tmp_path / "refused", *ONLY_TWIN1,
                        "-e", "seat_rebalance_takeover_wait=1", check=False)
    assert refused.returncode != 0
    refusal = [line for line in refused.stdout.splitlines()
               if "of its processes still run on twin1 after" in line]
    assert refusal, refused.stdout[-3000:]
    assert ("run %s holds /srv/llmfleet/rebalance.lock on twin1; " % held["run_id"]) in refusal[0]
    assert "pid %d (python" % modules[0] in refusal[0], refusal[0]
    assert "Traceback" not in refused.stdout + refused.stderr
    assert _lock()["run_id"] == held["run_id"], "the refused run took nothing"
    assert not (tmp_path / "refused" / "report.json").exists()

    # With the default wait the next run takes the lock only once the module on the host is gone.
    seen = {}

    def watch():
        while "lock" not in seen:
            if "gone" not in seen and not any(_alive(pid) for pid in modules):
                seen["gone"] = time.monotonic()
            record = _lock()
            if record and record["run_id"] != held["run_id"]:
                seen["lock"] = time.monotonic()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rebalance(hosts, twin_inventory, tmp_path / "second", *ONLY_TWIN1)
    seen.setdefault("lock", time.monotonic())
    watcher.join(timeout=10)
    assert "gone" in seen and seen["gone"] <= seen["lock"], \
        "the next run took the lock while a module of the dead run still ran on the host"

    section = report_of(tmp_path / "second")["hosts"]["twin1"]
    assert section["status"] == "applied", section["status"]
    assert section["interrupted"] == {"run_id": held["run_id"], "seats": ["alpha"]}
    assert all(g["ok"] for g in section["gates"]), section["gates"]
    assert _lock() is None, "the finished window released the lock"
