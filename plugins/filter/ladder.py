# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The context ladder's arithmetic (roles/seat_ladder): its rungs, the next one to try, each
rung's record and the result. Thin wrappers over plugins/module_utils/_rollout/ladder.py; each
filter has its own YAML doc."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import ladder
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


def ladder_rungs(plan, seat, knob, step=0, high=None, published=None):
    """``{"values": [...], "step": N}``: the grid from what the seat runs now to ``high`` (else
    the arithmetic's upper bound), on ``step`` (else, for 0, the knob's own)."""
    ladder.planned_seat(plan, seat, knob)  # a seat without this knob is refused before it is read
    high, step = ladder.whole_number(high or 0, "ladder_high", 0), ladder.step_of(knob, step)
    return {"values": ladder.rungs(ladder.current_value(plan, seat, knob),
                                   high or ladder.upper_bound(plan, seat, knob, published), step),
            "step": step}


def ladder_next(values, results):
    """The next value to try (0 when the search is over)."""
    return ladder.next_rung(values, {int(k): v for k, v in (results or {}).items()}) or 0


class FilterModule:
    def filters(self):
        return {
            "ladder_problems": operator_errors(ladder.options_problems, ladder.LadderError),
            "ladder_rungs": operator_errors(ladder_rungs, ladder.LadderError),
            "ladder_next": operator_errors(ladder_next, ladder.LadderError),
            "ladder_seats": operator_errors(ladder.with_knob, ladder.LadderError),
            "ladder_rung": operator_errors(ladder.rung_record, ladder.LadderError),
            "ladder_result": operator_errors(ladder.result, ladder.LadderError),
        }
