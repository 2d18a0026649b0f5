# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmfleet.seats.rebalance_report in Ansible's own process on the controller (plugin_utils._in_process)."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import (
    REBALANCE_REPORT_SPEC,
    rebalance_report,
)
from ansible_collections.llmfleet.seats.plugins.plugin_utils._in_process import InProcessModule


class ActionModule(InProcessModule):
    module = "llmfleet.seats.rebalance_report"
    argument_spec = REBALANCE_REPORT_SPEC

    @staticmethod
    def work(params, check_mode, diff):
        return rebalance_report(params, check_mode)
