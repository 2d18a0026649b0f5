# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rebalance role's arithmetic: boot order, what changed, where a rollback left the host,
gateway results as gates, and a compact view of the cards for the report. Thin wrappers over
plugins/module_utils/_steps.py, _rollback.py and _gates.py; each filter has its own YAML doc."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import gate
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.rollback import (
    RollbackError,
    rollback_outcome,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.steps import (
    StepsError,
    rebalance_steps,
)


def _rebalance_steps(plan, changed, running, cards):
    try:
        return rebalance_steps(plan, changed, running, cards)
    except StepsError as exc:
        raise AnsibleFilterError("rebalance_steps: %s" % exc)


def _rollback_outcome(restore, restored, removed, brought_back, states, running_before, touched,
                      timeout):
    try:
        return rollback_outcome(restore, restored, removed, brought_back, states, running_before,
                                touched, timeout)
    except RollbackError as exc:
        raise AnsibleFilterError("rollback_outcome: %s" % exc)


def changed_seat_files(files_by_seat):
    """Seat names whose seat_files result shows a written file, from ``{seat: files}``."""
    if not isinstance(files_by_seat, dict):
        raise AnsibleFilterError("changed_seat_files: expected {seat: seat_files 'files' result}, "
                                 "got %s" % type(files_by_seat).__name__)
    return sorted(seat for seat, files in files_by_seat.items()
                  if any(entry.get("changed") for entry in (files or {}).values()))


def journal_files(this_run, adopted):
    """Merge this run's seat_files results with an adopted journal's, file by file: a file the
    dead run already changed keeps that run's entry (its backup holds the original), any other
    keeps this run's."""
    for name, value in (("this_run", this_run), ("adopted", adopted)):
        if not isinstance(value, dict):
            raise AnsibleFilterError("journal_files: %s: expected {seat: seat_files 'files' result}"
                                     % name)
    merged = {}
    for seat in sorted(set(this_run) | set(adopted)):
        mine, theirs = this_run.get(seat) or {}, adopted.get(seat) or {}
        merged[seat] = {}
        for file_name in sorted(set(mine) | set(theirs)):
            entry = theirs.get(file_name) or {}
            merged[seat][file_name] = entry if entry.get("changed") else mine.get(file_name, entry)
    return merged


def seat_file_backups(files_by_seat):
    """Every backup path in ``{seat: seat_files 'files' result}``, sorted."""
    if not isinstance(files_by_seat, dict):
        raise AnsibleFilterError("seat_file_backups: expected {seat: seat_files 'files' result}, "
                                 "got %s" % type(files_by_seat).__name__)
    return sorted(entry["backup"] for files in files_by_seat.values()
                  for entry in (files or {}).values() if entry.get("backup"))


def smoke_gates(results):
    """gateway_smoke's per-route results as rebalance gates."""
    if not isinstance(results, list):
        raise AnsibleFilterError("smoke_gates: expected gateway_smoke's 'results' list")
    return [gate("route %s" % item.get("model"), "gateway_%s" % item.get("check"), item.get("ok"),
                 {"latency_s": item.get("latency_s"), "reasoning_key": item.get("reasoning_key")},
                 "ok", item.get("detail")) for item in results]


def cards_summary(cards):
    """Per GPU: index, uuid, total/used/free MiB and who holds memory (seat or PID)."""
    summary = []
    for gpu in (cards or {}).get("gpus", []):
        holders = {}
        for process in gpu.get("processes") or []:
            who = process.get("compose_service") or process.get("container") or "pid %s" % process.get("pid")
            holders[who] = holders.get(who, 0) + (process.get("used_mib") or 0)
        summary.append({key: gpu.get(key) for key in (
            "index", "uuid", "memory_total_mib", "memory_used_mib", "memory_free_mib")})
        summary[-1]["holders_mib"] = holders
    return summary


class FilterModule:
    def filters(self):
        return {
            "rebalance_steps": _rebalance_steps,
            "rollback_outcome": _rollback_outcome,
            "changed_seat_files": changed_seat_files,
            "journal_files": journal_files,
            "seat_file_backups": seat_file_backups,
            "smoke_gates": smoke_gates,
            "cards_summary": cards_summary,
        }
