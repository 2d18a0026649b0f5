# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rebalance role's arithmetic: boot order, what changed, where a rollback left the host,
gateway results as gates, and a compact view of the cards for the report. Thin wrappers over
plugins/module_utils/_rollout (steps, rollback, journal, gates, report); each filter has its
own YAML doc."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import journal
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import GateInputError, smoke_gates
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import cards_summary
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.rollback import (
    RollbackError,
    host_differences,
    rollback_outcome,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.steps import (
    StepsError,
    rebalance_steps,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.takeover import takeover_lines
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


class FilterModule:
    def filters(self):
        return {
            "rebalance_steps": operator_errors(rebalance_steps, StepsError, "rebalance_steps: "),
            "rollback_outcome": operator_errors(rollback_outcome, RollbackError, "rollback_outcome: "),
            "host_differences": operator_errors(host_differences, RollbackError, "host_differences: "),
            "changed_seat_files": operator_errors(journal.changed_seat_files, journal.JournalError),
            "journal_files": operator_errors(journal.journal_files, journal.JournalError),
            "seat_file_backups": operator_errors(journal.seat_file_backups, journal.JournalError),
            "smoke_gates": operator_errors(smoke_gates, GateInputError),
            "cards_summary": operator_errors(cards_summary),
            "takeover_lines": operator_errors(takeover_lines),
        }
