#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: rebalance_report
short_description: Write a host's part of a rebalance report
version_added: 0.1.0
description:
  - Puts one host's section into O(report_dir)C(/report.json) (a run with another O(run_id)
    starts a new report), then renders C(report.md) for every host in it and the host's plan as
    C(<host>.svg), a stacked bar per GPU, beside what each card held after the window. It writes
    none of the plan's own files (M(llmfleet.seats.seat_plan)'s C(<host>-plan.*)).
  - The playbooks run it on the controller with C(throttle=1), so hosts that finish together
    never write the report at the same time.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.action
attributes:
  action:
    support: full
    details:
      - On the controller (a local connection without become, async or a task environment
        beyond a window's run id, as when delegated to localhost) the report is written from
        Ansible's own process, with the same checks and results; elsewhere the module runs as usual.
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  report_dir:
    description: Where to write C(report.json), C(report.md) and C(<host>.svg); created if missing.
    type: path
    required: true
  run_id:
    description: The run the report belongs to.
    type: str
    required: true
  host:
    description: The host whose section this is.
    type: str
    required: true
  check_mode:
    description: Whether the run was a dry run (C(--check)); said in the report's title.
    type: bool
    default: false
  section:
    description:
      - The host's section, with at least C(status) (V(planned), V(unchanged), V(applied),
        V(rolled_back) or V(failed)); usually also C(plan), C(gates), C(actions), C(backups),
        C(before), C(after), C(error), C(started) and C(finished), and after a rollback
        C(rollback) (the result of P(llmfleet.seats.rollback_outcome#filter), each file's and
        seat's state); after taking over the lock of a run cut short, C(interrupted) (its
        C(run_id), and the C(seats) it left ungated, which this run finished or rolled back).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write this host's part of the report
  llmfleet.seats.rebalance_report:
    report_dir: /srv/reports/rebal-20261005
    run_id: "{{ llmfleet_run_id }}"
    host: "{{ inventory_hostname }}"
    section:
      status: applied
      gates: []
  delegate_to: localhost
  throttle: 1
"""

RETURN = r"""
paths:
  description: The files written.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import (
    REBALANCE_REPORT_SPEC,
    rebalance_report,
)


def main():
    module = AnsibleModule(argument_spec=REBALANCE_REPORT_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = rebalance_report(module.params, module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
