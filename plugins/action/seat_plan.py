# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmfleet.seats.seat_plan in Ansible's own process on the controller (plugin_utils._in_process)."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import SEAT_PLAN_SPEC, seat_plan
from ansible_collections.llmfleet.seats.plugins.plugin_utils._in_process import InProcessModule


class ActionModule(InProcessModule):
    module = "llmfleet.seats.seat_plan"
    argument_spec = SEAT_PLAN_SPEC
    work = staticmethod(seat_plan)
