# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What llmfleet.seats.seat_plan does: plan one host, render the plan as Markdown and SVG, and
write the three files when asked. The module and its action plugin (the same work in the
controller's own process) both call seat_plan() with arguments checked against SEAT_PLAN_SPEC."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MARGIN_MIB
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import HOST_OPTIONS, build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import (
    plan_markdown,
    plan_svg,
    write_plan_files,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import DEFAULT_OVERHEAD_MIB

SEAT_PLAN_SPEC = {
    **HOST_OPTIONS,
    "cards": {"type": "dict"},
    "plateau": {"type": "dict"},
    "plateau_kv": {"type": "dict"},
    "plateau_kv_planned": {"type": "bool", "default": False},
    "plateau_ran": {"type": "dict"},
    "accept": {"type": "raw"},
    "retire": {"type": "raw"},
    "min_spare_mib": {"type": "int", "default": 0},
    "boot_margin_mib": {"type": "int", "default": MARGIN_MIB},
    "default_overhead_mib": {"type": "int", "default": DEFAULT_OVERHEAD_MIB},
    "output_dir": {"type": "path"},
}


def seat_plan(params, check_mode=False, diff=False):
    """The module's result: ``plan``, ``markdown``, ``svg``, and with ``output_dir`` the
    ``files`` written there (``changed`` when one of them changed)."""
    params = dict(params)
    output_dir = params.pop("output_dir")
    plan = build_plan(**params)
    result = {"changed": False, "plan": plan, "markdown": plan_markdown(plan), "svg": plan_svg(plan)}
    if output_dir:
        changed, files, diffs = write_plan_files(output_dir, plan["host"], plan, result["markdown"],
                                                 result["svg"], check_mode)
        result.update(changed=changed, files=files)
        if diff and diffs:
            result["diff"] = diffs
    return result
