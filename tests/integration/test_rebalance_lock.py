"""rebalance_lock through real ansible runs: one holder at a time, a clear refusal naming the
holder, release only by the holder, forced takeover of a dead run's lock."""

from __future__ import annotations

import json
import socket
import subprocess

from conftest import ansible_env, run_ansible, VENV_BIN, REPO_ROOT
from support.adhoc import run_module


def _lock(path, run_id, *extra):
    args = "path=%s run_id=%s controller={'host':'ctl','pid':%d} %s" % (
        path, run_id, 100 + len(run_id), " ".join(extra))
    return run_ansible(["ansible", "localhost", "-c", "local", "-m",
                        "llmfleet.seats.rebalance_lock", "-a", args])


def test_second_run_is_refused_until_release(tmp_path):
    path = tmp_path / "rebalance.lock"
    first = _lock(path, "run-a")
    assert first.returncode == 0, first.stdout
    assert json.loads(path.read_text())["run_id"] == "run-a"

    second = _lock(path, "run-b")
    assert second.returncode != 0
    assert "another rebalance holds %s: run run-a from ctl (pid 105)" % path in second.stdout

    not_mine = _lock(path, "run-b", "state=released")
    assert not_mine.returncode == 0 and path.exists(), "only the holder releases"
    again = _lock(path, "run-a")
    assert again.returncode == 0 and "CHANGED" not in again.stdout, "re-acquire is idempotent"

    released = _lock(path, "run-a", "state=released")
    assert released.returncode == 0 and not path.exists()
    assert _lock(path, "run-b").returncode == 0


def test_check_mode_takes_nothing(tmp_path):
    path = tmp_path / "rebalance.lock"
    args = "path=%s run_id=dry" % path
    proc = run_ansible(["ansible", "localhost", "-c", "local", "--check", "-m",
                        "llmfleet.seats.rebalance_lock", "-a", args])
    assert proc.returncode == 0 and not path.exists()


def test_force_takes_over_a_dead_runs_lock(tmp_path):
    path = tmp_path / "rebalance.lock"
    assert _lock(path, "run-a").returncode == 0
    rc, taken = run_module("llmfleet.seats.rebalance_lock",
                           {"path": str(path), "run_id": "run-c", "force": True})
    assert rc == 0
    assert json.loads(path.read_text())["run_id"] == "run-c"
    assert taken["held_by"]["run_id"] == "run-a", "the takeover reports whose lock it broke"


def test_concurrent_runs_one_wins(tmp_path):
    path = tmp_path / "rebalance.lock"
    procs = [subprocess.Popen(
        [str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-m", "llmfleet.seats.rebalance_lock",
         "-a", "path=%s run_id=run-%d" % (path, i)], cwd=REPO_ROOT, env=ansible_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(4)]
    codes = [p.wait(timeout=120) for p in procs]
    assert sorted(codes).count(0) == 1, [p.stdout.read() for p in procs]


def test_journal_survives_a_takeover(tmp_path):
    path = tmp_path / "rebalance.lock"
    assert _lock(path, "run-a").returncode == 0
    wrote = _lock(path, "run-a", "state=journaled", "journal={'running_before':['gen-small']}")
    assert wrote.returncode == 0 and "CHANGED" in wrote.stdout
    refused = _lock(path, "run-b", "state=journaled", "journal={'x':1}")
    assert refused.returncode != 0 and "does not hold" in refused.stdout
    assert json.loads(path.read_text())["journal"] == {"running_before": ["gen-small"]}

    rc, taken = run_module("llmfleet.seats.rebalance_lock",
                           {"path": str(path), "run_id": "run-c", "force": True})
    assert rc == 0
    assert taken["held_by"]["journal"] == {"running_before": ["gen-small"]}, \
        "the dead run's journal comes back to adopt"
    assert json.loads(path.read_text())["journal"] == {}


# Two windows of one play, as a ladder's rungs run them: the first takes over a dead run's lock,
# then another controller's run takes the lock before the second starts.
RUNGS = """
- name: Two windows' locks in one play
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    seat_rebalance_lock_path: {path}
    seat_rebalance_takeover_wait: 0
  tasks:
    - name: The first window finds the lock of a run that was cut short
      ansible.builtin.include_role:
        name: llmfleet.seats.seat_rebalance
        tasks_from: lock.yml
      vars:
        seat_rebalance_run_id: rung-1
        __seat_rebalance_actions: []
    - name: It says which run it took over
      ansible.builtin.debug:
        msg: "{{{{ __seat_rebalance_actions }}}}"
    - name: It ends and releases the lock
      llmfleet.seats.rebalance_lock:
        path: {path}
        run_id: rung-1
        state: released
    - name: A run on another controller takes the lock
      llmfleet.seats.rebalance_lock:
        path: {path}
        run_id: elsewhere
        controller: {{host: another-controller, pid: 1}}
    - name: The second window
      ansible.builtin.include_role:
        name: llmfleet.seats.seat_rebalance
        tasks_from: lock.yml
      vars:
        seat_rebalance_run_id: rung-2
        __seat_rebalance_actions: []
"""


def test_a_later_window_of_the_play_leaves_another_controllers_live_run_its_lock(tmp_path):
    path = tmp_path / "rebalance.lock"
    with open("/proc/sys/kernel/pid_max") as pid_max:
        never_a_process = int(pid_max.read()) + 1
    cut_short = run_ansible(["ansible", "localhost", "-c", "local", "-m", "llmfleet.seats.rebalance_lock", "-a",
                             json.dumps({"path": str(path), "run_id": "cut-short",
                                         "controller": {"host": socket.gethostname(), "pid": never_a_process}})])
    assert cut_short.returncode == 0, cut_short.stdout
    playbook = tmp_path / "rungs.yml"
    playbook.write_text(RUNGS.format(path=path))
    rungs = run_ansible(["ansible-playbook", "-i", "localhost,", str(playbook)])
    assert "took over the lock of run cut-short" in rungs.stdout, rungs.stdout[-3000:]
    assert rungs.returncode != 0
    assert "another rebalance holds %s: run elsewhere from another-controller (pid 1)" % path in rungs.stdout, \
        rungs.stdout[-3000:]
    assert json.loads(path.read_text())["run_id"] == "elsewhere"
