# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmfleet.seats.seat_gates: the phases computed from their arguments alone run in Ansible's own
process (plugin_utils._in_process); O(phase=after_boot) runs the module on the host it gates."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import (
    COMPUTED_PHASES,
    SEAT_GATES_REQUIRED_IF,
    SEAT_GATES_SPEC,
    seat_gates,
)
from ansible_collections.llmfleet.seats.plugins.plugin_utils._in_process import InProcessModule


class ActionModule(InProcessModule):
    module = "llmfleet.seats.seat_gates"
    argument_spec = SEAT_GATES_SPEC
    validator_options = {"required_if": SEAT_GATES_REQUIRED_IF}

    @staticmethod
    def work(params, check_mode, diff):
        return seat_gates(params)

    def runs_here(self, args):
        return args.get("phase") in COMPUTED_PHASES
