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
# The worker says when it is in a session of its own: a kill of the run's group before that would
# take it too (the race a busy machine lost).
RUN = r"""
import os, sys, time
ready, said = os.pipe()
worker = os.fork()
if worker == 0:
    os.setsid()
    os.write(said, b"x")
    time.sleep(float(sys.argv[1]))
    os._exit(0)
os.read(ready, 1)
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


def test_the_journal_is_rewritten_whole_past_a_leftover_temp(tmp_path):
    path = str(tmp_path / "rebalance.lock")
    lock.acquire(path, "run-a", {"host": "ctl", "pid": 1})
    os.mkdir(path + ".tmp")  # what a fixed temp name tripped on
    lock.journal(path, "run-a", {"files": FILES, "touched": ["alpha"]})
    assert lock.read(path)["journal"]["touched"] == ["alpha"]
    assert sorted(os.listdir(tmp_path)) == ["rebalance.lock", "rebalance.lock.tmp"]


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


# A stand-in for a module a killed run left on the host: it carries the run id in its environment,
# as every module of a window does, and starts a child that inherits it (docker compose, say).
HOST_MODULE = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
sys.stdin.read()
child.kill()
"""


@pytest.fixture
def host_module():
    """A live process tree of run ``run-dead`` on this host: (module pid, child pid, process)."""
    env = dict(os.environ, **{lock.RUN_ID_VARIABLE: "run-dead"})
    proc = subprocess.Popen([sys.executable, "-c", HOST_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    child = int(proc.stdout.readline())
    try:
        yield proc.pid, child, proc
    finally:
        proc.kill()
        proc.wait(timeout=30)
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_host_processes_of_a_run_are_found_by_the_run_id_they_carry(host_module):
    module, child, _proc = host_module
    name = identity_name(module)
    assert lock.host_processes("run-dead", os.getpid()) == [
        {"pid": module, "name": name, "what": name}, {"pid": child, "name": name, "what": name}]
    assert lock.host_processes("run-dead", module) == [{"pid": child, "name": name, "what": name}], \
        "the caller's own process is not the dead run's"
    assert lock.host_processes("run-dea", os.getpid()) == [], "another run id is another run"
    assert lock.host_processes("run-dead-2", os.getpid()) == []


def test_a_module_names_itself_without_its_arguments(tmp_path):
    proc = tmp_path / "proc"
    (proc / "77").mkdir(parents=True)
    (proc / "77" / "environ").write_bytes(b"HOME=/root\0LLMFLEET_RUN_ID=run-dead\0")
    (proc / "77" / "comm").write_text("python3\x1b]0;\n")
    (proc / "77" / "cmdline").write_bytes(b"/usr/bin/python3\0/root/.ansible/tmp/x/AnsiballZ_seat_boot.py\0"
                                          b"--api-key\0sk-not-for-messages\0")
    (proc / "78").mkdir()
    (proc / "78" / "environ").write_bytes(b"LLMFLEET_RUN_ID=run-other\0")
    found = lock.host_processes("run-dead", 1, proc=str(proc))
    assert found == [{"pid": 77, "name": "python3\x1b]0;", "what": "python3?]0;, module seat_boot"}]
    line = lock.describe_processes(found)
    assert line == "pid 77 (python3?]0;, module seat_boot)"
    assert "sk-not-for-messages" not in line and "\n" not in line


def test_a_takeover_waits_for_the_dead_runs_host_processes_then_refuses_naming_them(tmp_path, host_module):
    module, child, proc = host_module
    path = str(tmp_path / "rebalance.lock")
    lock.acquire(path, "run-dead", {"host": "ctl", "pid": 1})
    with pytest.raises(lock.HolderStillRuns) as refused:
        lock.acquire(path, "run-next", {"host": "ctl", "pid": 2}, force=True, wait=1)
    assert [p["pid"] for p in refused.value.left] == [module, child]
    assert refused.value.waited_s >= 1
    assert "run run-dead holds %s; 2 of its processes still run on this host after" % path in str(refused.value)
    assert "pid %d (" % module in str(refused.value)
    assert lock.read(path)["run_id"] == "run-dead", "a refused takeover takes nothing"

    proc.communicate("")  # the module ends, and takes its child with it
    taken = lock.acquire(path, "run-next", {"host": "ctl", "pid": 2}, force=True, wait=30)
    assert taken["held_by"]["run_id"] == "run-dead"
    assert lock.read(path)["run_id"] == "run-next"


def test_a_takeover_waits_until_the_host_processes_end(monkeypatch):
    ticks = iter([[{"pid": 5, "name": "python3", "what": "python3"}], []])
    now = iter(range(100))
    monkeypatch.setattr(lock, "host_processes", lambda run_id, own_pid, proc="/proc": next(ticks))
    left = lock.wait_for_host_processes("run-dead", 1, 300, clock=lambda: next(now), sleep=lambda s: None)
    assert left["processes"] == [] and left["waited_s"] > 0, "waited while one was there, not up to the bound"
