# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The rebalance lock: one run at a time per GPU host, and the journal a rollback needs.

The lock is a file created exclusively (of two runs that race, exactly one creates it), holding
the run id, the controller's host and ansible-playbook PID, when it started, and the run's
journal (what ran before, and the backup of every file it will write). It is rewritten
atomically, so a crash mid-write never leaves half a journal, and it survives a reboot: the run
that takes over from one that was cut short adopts its journal, and finishes the seats that run
touched but never saw through their gates (``journal.unfinished_seats``).

A run is known by its controller (``controller_identity``): the host, the ansible-playbook
process with its start time, the boot, and a digest of its command line. Its processes
(``run_processes``) are that process and its workers: Ansible forks each worker from
ansible-playbook without exec (so a worker keeps its command line) and the worker leaves the
process group and session at once (setsid), so neither of those finds it, and killing the
group leaves it running; the worker holds its connection to the host until the module it runs
there ends. A run is over when none of them is alive.

On the host, what a run started there (a module, and what the module runs: ``docker compose
up``, a gate's wait) carries the run's id in its environment (``RUN_ID_VARIABLE``, set by the
role for every task of its window). A module whose worker was killed keeps running on the host;
a forced takeover finds it by that id (``host_processes``) and waits for it, or refuses.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import CONTROL_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.proc import process_stat
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.journal import unfinished_seats

STATES = ("acquired", "journaled", "released")
# Set by the rebalance role for every task of a window; inherited by what its modules start.
RUN_ID_VARIABLE = "LLMFLEET_RUN_ID"
# A module run without pipelining names itself on its command line.
_ANSIBALLZ_RE = lazy_regex(rb"AnsiballZ_([A-Za-z0-9_]+)\.py")


class LockError(Exception):
    """The lock is held by another run, or was taken by one at the same moment; held_by is
    that run's record."""

    def __init__(self, message, held_by=None):
        super().__init__(message)
        self.held_by = held_by


class HolderStillRuns(LockError):
    """A forced takeover found processes of the holder still running on this host: ``left``
    (``[{"pid", "name", "what"}]``) after ``waited_s`` seconds."""

    def __init__(self, message, held_by, left, waited_s):
        super().__init__(message, held_by)
        self.left = left
        self.waited_s = waited_s


def read(path):
    """The lock's record, None when it is free."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError:
        return {"run_id": "(unreadable lock file)"}


def _create(path, record):
    """Exclusive create: exactly one of two concurrent runs succeeds."""
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(handle, "w") as out:
        json.dump(record, out)


def _replace(path, record):
    replace_file(path, json.dumps(record), 0o644)


def release(path, run_id, check_mode=False):
    """Give the lock back if this run holds it; whether it did."""
    holder = read(path)
    mine = holder is not None and holder.get("run_id") == run_id
    if mine and not check_mode:
        os.unlink(path)
    return mine


def journal(path, run_id, entries, check_mode=False):
    """Merge entries into this run's journal (top-level replace): (changed, journal)."""
    holder = read(path)
    if holder is None or holder.get("run_id") != run_id:
        raise LockError("run %s does not hold %s; the journal was not written" % (run_id, path), holder)
    merged = dict(holder.get("journal") or {}, **entries)
    changed = merged != holder.get("journal")
    if changed and not check_mode:
        _replace(path, dict(holder, journal=merged))
    return changed, merged


def acquire(path, run_id, controller, force=False, check_mode=False, wait=0):
    """Take the lock for run_id: {"changed", "acquired", "journal", "held_by"?}. A lock
    held by another run is taken only with force (its holder is known to be dead), and its
    record comes back in held_by so the journal can be adopted. Before a forced takeover the
    holder's processes on this host are waited for, up to ``wait`` seconds (HolderStillRuns)."""
    holder = read(path)
    if holder is not None and holder.get("run_id") == run_id:
        return {"changed": False, "acquired": True, "journal": holder.get("journal") or {}}
    if holder is not None and not force:
        raise LockError(
            "another rebalance holds %s: run %s from %s (pid %s) since %s; if that run is dead, "
            "re-run with -e seat_rebalance_break_lock=true"
            % (path, holder.get("run_id"), holder.get("controller", {}).get("host", "?"),
               holder.get("controller", {}).get("pid", "?"), holder.get("started", "?")), holder)
    if holder is not None and isinstance(holder.get("run_id"), str):
        left = wait_for_host_processes(holder["run_id"], os.getpid(), wait)
        if left["processes"]:
            raise HolderStillRuns(
                "run %s holds %s; %d of its processes still run on this host after %s s (%s) and may "
                "still be changing it" % (holder["run_id"], path, len(left["processes"]), left["waited_s"],
                                          describe_processes(left["processes"])),
                holder, left["processes"], left["waited_s"])
    if check_mode:
        return {"changed": True, "acquired": True, "held_by": holder, "journal": {},
                "interrupted": _interrupted(holder)}
    record = {"run_id": run_id, "controller": controller,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "journal": {}}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if holder is not None:
        os.unlink(path)
    try:
        _create(path, record)
    except FileExistsError:
        raise LockError("another rebalance took %s at the same moment: %s" % (path, read(path)),
                        read(path)) from None
    return {"changed": True, "acquired": True, "held_by": holder, "journal": {},
            "interrupted": _interrupted(holder)}


def _interrupted(holder):
    """What a lock taken over says about the window it held: ``{"run_id", "seats"}`` with the
    seats that window touched and did not see through their gates; {} when none held it."""
    if not holder:
        return {}
    return {"run_id": holder.get("run_id"), "seats": unfinished_seats(holder.get("journal") or {})}


def _command_digest(pid, proc):
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _name(pid, proc):
    try:
        with open(os.path.join(proc, str(pid), "comm")) as handle:
            return handle.read().strip()
    except OSError:
        return "?"


def _boot_id(proc):
    try:
        with open(os.path.join(proc, "sys", "kernel", "random", "boot_id")) as handle:
            return handle.read().strip()
    except OSError:
        return None


def controller_identity(host, pid, proc="/proc"):
    """What the lock records of the run's controller: ``{"host", "pid", "started", "boot_id",
    "command"}`` (start in clock ticks since boot; ``command`` a digest of the command line, which
    may hold secrets given with -e)."""
    stat = process_stat(pid, proc)
    return {"host": host, "pid": pid, "started": stat[1] if stat else None, "boot_id": _boot_id(proc),
            "command": _command_digest(pid, proc)}


def run_processes(identity, own_pid, proc="/proc"):
    """The processes of the run ``identity`` names still alive on this controller, as
    ``[{"pid", "name", "role"}]``: its ansible-playbook (``main``) and every process started since
    with its command line (``worker``), except this run's own (``own_pid`` and its children). A
    lock written before the controller recorded its start is judged by its process id alone."""
    pid = identity.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return []
    started = identity.get("started")
    if started is None:
        return [{"pid": pid, "name": _name(pid, proc), "role": "main"}] if process_stat(pid, proc) else []
    if identity.get("boot_id") != _boot_id(proc):
        return []  # the controller rebooted since: nothing of that run can be alive
    alive = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == own_pid:
            continue
        stat = process_stat(entry, proc)
        if stat is None or stat[1] < started:
            continue
        ppid, start = stat
        if int(entry) == pid and start == started:
            alive.append({"pid": pid, "name": _name(entry, proc), "role": "main"})
        elif ppid != own_pid and _command_digest(entry, proc) == identity.get("command"):
            alive.append({"pid": int(entry), "name": _name(entry, proc), "role": "worker"})
    return sorted(alive, key=lambda process: process["pid"])


def wait_for_run_to_end(identity, own_pid, timeout, proc="/proc", clock=time.monotonic, sleep=time.sleep):
    """``{"alive", "processes", "waited_s"}``: a run whose ansible-playbook still runs is alive
    (another rebalance: nothing to wait for); otherwise its workers are waited for, up to
    ``timeout`` seconds, and ``processes`` lists those still there."""
    began = clock()
    while True:
        processes = run_processes(identity, own_pid, proc)
        alive = any(process["role"] == "main" for process in processes)
        if alive or not processes or clock() - began >= timeout:
            return {"alive": alive, "processes": processes, "waited_s": round(clock() - began, 1)}
        sleep(0.5)


def _what(pid, proc):
    """What a process is, for an operator: its name, and the module it runs where its command
    line says (a module run without pipelining). Never its arguments, which may hold secrets;
    the name is the host's, so a control character in it cannot break the message's line."""
    name = CONTROL_RE.sub("?", _name(pid, proc))
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            module = _ANSIBALLZ_RE.search(handle.read())
    except OSError:
        module = None
    return "%s, module %s" % (name, module.group(1).decode()) if module else name


def host_processes(run_id, own_pid, proc="/proc"):
    """The processes on this host whose environment carries run ``run_id`` (what its modules
    run, and what those started), as ``[{"pid", "name", "what"}]``, except ``own_pid``. A
    process whose environment cannot be read (another user's, gone meanwhile) is not one."""
    marker = ("%s=%s" % (RUN_ID_VARIABLE, run_id)).encode()
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == own_pid:
            continue
        try:
            with open(os.path.join(proc, entry, "environ"), "rb") as handle:
                carries = marker in handle.read().split(b"\0")
        except OSError:
            continue
        if carries:
            found.append({"pid": int(entry), "name": _name(entry, proc), "what": _what(entry, proc)})
    return sorted(found, key=lambda process: process["pid"])


def describe_processes(processes):
    """``pid 12 (python3, module seat_boot), pid 40 (docker-compose)``: one line for a message."""
    return ", ".join("pid %d (%s)" % (process["pid"], process["what"]) for process in processes)


def wait_for_host_processes(run_id, own_pid, timeout, proc="/proc", clock=time.monotonic, sleep=time.sleep):
    """``{"processes", "waited_s"}``: the processes of run ``run_id`` on this host, waited for
    up to ``timeout`` seconds; ``processes`` lists those still there."""
    began = clock()
    while True:
        processes = host_processes(run_id, own_pid, proc)
        if not processes or clock() - began >= timeout:
            return {"processes": processes, "waited_s": round(clock() - began, 1)}
        sleep(0.5)
