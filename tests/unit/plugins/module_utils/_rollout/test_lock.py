"""The lock's view of a run cut short: which seats it left ungated (journal), and which of its
processes are still alive on the controller, found among real processes forked the way
ansible-playbook forks its workers (no exec, then setsid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import journal, lock

FILES = {"alpha": {".env": {"changed": True, "backup": "/srv/alpha/.env.bak"}},
         "beta": {".env": {"changed": False}}}

# A stand-in for ansible-playbook: forks a worker that leaves the process group and session,
# as Ansible's WorkerProcess does, prints both pids, then waits for stdin to close.
RUN = r"""
import os, sys, time
worker = os.fork()
if worker == 0:
    os.setsid()
    time.sleep(float(sys.argv[1]))
    os._exit(0)
print(os.getpid(), worker, flush=True)
sys.stdin.read()
"""


def test_unfinished_seats_are_touched_or_written_and_not_gated():
    assert journal.unfinished_seats({"files": FILES, "touched": ["gamma"], "gated": []}) == ["alpha", "gamma"]
    assert journal.unfinished_seats({"files": FILES, "touched": ["alpha", "gamma"], "gated": ["alpha", "gamma"]}) == []
    assert journal.unfinished_seats({}) == [], "a journal from before the window left nothing to finish"
    with pytest.raises(journal.JournalError, match=r"journal.gated: expected a list of seat names"):
        journal.unfinished_seats({"gated": "alpha"})


def test_a_takeover_returns_the_seats_the_dead_run_left_ungated(tmp_path):
    path = str(tmp_path / "rebalance.lock")
    lock.acquire(path, "run-a", {"host": "ctl", "pid": 1})
    lock.journal(path, "run-a", {"files": FILES, "touched": ["alpha", "beta"], "gated": ["beta"]})
    taken = lock.acquire(path, "run-b", {"host": "ctl", "pid": 2}, force=True)
    assert taken["interrupted"] == {"run_id": "run-a", "seats": ["alpha"]}
    assert lock.acquire(str(tmp_path / "free.lock"), "run-c", {})["interrupted"] == {}


@pytest.fixture
def killed_run():
    """A run whose main process was SIGKILLed while its worker lives on: (identity, worker pid)."""
    proc = subprocess.Popen([sys.executable, "-c", RUN, "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    main, worker = (int(pid) for pid in proc.stdout.readline().split())
    identity = lock.controller_identity("ctl", main)
    try:
        assert lock.run_processes(identity, os.getpid()) == [
            {"pid": main, "name": identity_name(main), "role": "main"},
            {"pid": worker, "name": identity_name(main), "role": "worker"}]
        os.killpg(main, signal.SIGKILL)  # the whole process group, as an operator's kill would
        proc.wait(timeout=30)
        yield identity, worker
    finally:
        for pid in (main, worker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def identity_name(pid):
    with open("/proc/%d/comm" % pid) as handle:
        return handle.read().strip()


def test_a_worker_outlives_its_killed_run_and_is_waited_for(killed_run):
    identity, worker = killed_run
    left = lock.wait_for_run_to_end(identity, os.getpid(), 1)
    assert left["alive"] is False
    assert [p["pid"] for p in left["processes"]] == [worker], "killing the group left the worker"
    assert left["waited_s"] >= 1

    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while os.path.exists("/proc/%d" % worker) and time.monotonic() < deadline:
        time.sleep(0.1)  # reaped by init once it has died
    gone = lock.wait_for_run_to_end(identity, os.getpid(), 30)
    assert gone == {"alive": False, "processes": [], "waited_s": gone["waited_s"]}
    assert gone["waited_s"] < 30


def test_a_run_whose_ansible_playbook_runs_is_alive_and_not_waited_for():
    proc = subprocess.Popen([sys.executable, "-c", RUN, "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        main = int(proc.stdout.readline().split()[0])
        found = lock.wait_for_run_to_end(lock.controller_identity("ctl", main), os.getpid(), 30)
        assert found["alive"] is True and found["waited_s"] < 30
    finally:
        proc.communicate("")


def test_own_processes_and_other_commands_are_not_the_dead_runs(killed_run):
    identity, worker = killed_run
    assert lock.run_processes(identity, worker) == [], "the run's own workers are its own"
    other = dict(identity, command="0" * 64)
    assert lock.run_processes(other, os.getpid()) == [], "another command line is another program"
    rebooted = dict(identity, boot_id="another boot")
    assert lock.run_processes(rebooted, os.getpid()) == [], "nothing outlives a reboot"
