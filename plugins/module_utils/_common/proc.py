# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A process as Linux's /proc tells it: its parent and its start, which together with its id
name one process across the reuse of ids."""

from __future__ import annotations

import os


def process_stat(pid, proc="/proc"):
    """``(ppid, start ticks since boot)`` of a process from /proc/PID/stat, None when it is gone.
    The command name in parentheses may hold spaces and parentheses: the fields follow the last ')'."""
    try:
        with open(os.path.join(proc, str(pid), "stat")) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def still_runs(pid, started, proc="/proc"):
    """Whether the process ``pid`` that started at ``started`` (ticks since boot) still runs: an
    id reused by a later process is not it."""
    stat = process_stat(pid, proc)
    return stat is not None and stat[1] == started
