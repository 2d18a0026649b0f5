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
that takes over from one that was cut short adopts its journal.
"""

from __future__ import annotations

import json
import os
import time

STATES = ("acquired", "journaled", "released")


class LockError(Exception):
    """The lock is held by another run, or was taken by one at the same moment; held_by is
    that run's record."""

    def __init__(self, message, held_by=None):
        super().__init__(message)
        self.held_by = held_by


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
    temp = path + ".tmp"
    with open(temp, "w") as out:
        json.dump(record, out)
    os.rename(temp, path)


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


def acquire(path, run_id, controller, force=False, check_mode=False):
    """Take the lock for run_id: {"changed", "acquired", "journal", "held_by"?}. A lock
    held by another run is taken only with force (its holder is known to be dead), and its
    record comes back in held_by so the journal can be adopted."""
    holder = read(path)
    if holder is not None and holder.get("run_id") == run_id:
        return {"changed": False, "acquired": True, "journal": holder.get("journal") or {}}
    if holder is not None and not force:
        raise LockError(
            "another rebalance holds %s: run %s from %s (pid %s) since %s; if that run is dead, "
            "re-run with -e seat_rebalance_break_lock=true"
            % (path, holder.get("run_id"), holder.get("controller", {}).get("host", "?"),
               holder.get("controller", {}).get("pid", "?"), holder.get("started", "?")), holder)
    if check_mode:
        return {"changed": True, "acquired": True, "held_by": holder, "journal": {}}
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
    return {"changed": True, "acquired": True, "held_by": holder, "journal": {}}
