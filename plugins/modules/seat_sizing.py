#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_sizing
short_description: Size every seat of a GPU host as the plan does, without placing them
version_added: 0.1.0
description:
  - Checks the host's GPUs and seats as M(llmfleet.seats.seat_plan) does, and sizes each seat by
    its engine the same way (a vLLM seat's KV budget in bytes exactly as vLLM 0.33, pinned or by
    the rule), so the sizing and the plan never disagree.
  - Fails when a seat cannot be sized or vLLM would not boot with its budget, naming every such
    seat, with the table of all of them.
  - Runs on the controller (model configs live in the inventory) and changes nothing.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.pure
  - llmfleet.seats._host_seats
options:
  snapshot_host:
    description:
      - The host O(demand_snapshot) was measured on, when it sizes this host's seats on purpose
        (as C(llmfleet_plan_accept.snapshot_host) lets the plan); a snapshot of another host is
        refused otherwise.
    type: str
"""

EXAMPLES = r"""
- name: Size the host's seats
  llmfleet.seats.seat_sizing:
    host: "{{ inventory_hostname }}"
    gpus: "{{ llmfleet_gpus }}"
    seats: "{{ llmfleet_seats }}"
    inventory_dir: "{{ inventory_dir }}"
  delegate_to: localhost
  register: sizing

- name: Show it
  ansible.builtin.debug:
    msg: "{{ sizing.markdown }}"
"""

RETURN = r"""
seats:
  description:
    - Every seat as its engine sizes it, in inventory order. C(name), C(engine), C(kv_rule),
      C(boot_ok), C(boot_error), the footprint with the default overhead (C(weights_mib),
      C(kv_mib), C(overhead_mib), C(footprint_mib)), and for vLLM the planned numbers
      (C(max_model_len), C(kv_cache_memory_bytes), C(kv_cache_tokens), C(max_concurrency),
      C(block_size), C(num_blocks), C(per_token_kv_bytes), C(served_model_names), and
      C(calibration) (with a demand snapshot, the seat's measured figures - C(peak_kv_tokens),
      C(peak_kv_usage), C(requests), C(runaways) - C(demand_tokens), C(by_rule_bytes),
      C(by_demand_bytes) and C(sized_by), V(rule) or V(demand); null without figures)).
  returned: always
  type: list
  elements: dict
markdown:
  description: The same as a Markdown table.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import HOST_OPTIONS, size_seats
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import sizing_markdown


def main():
    module = AnsibleModule(
        argument_spec={
            **HOST_OPTIONS,
            "snapshot_host": {"type": "str"},
        },
        supports_check_mode=True,
    )
    params = module.params
    with operator_errors(module):
        sizing = size_seats(**params)
    markdown = sizing_markdown(params["host"], sizing)
    if sizing["problems"]:
        module.fail_json(msg="host %s: these seats cannot be sized or would not boot:\n- %s"
                         % (params["host"], "\n- ".join(sizing["problems"])),
                         seats=sizing["seats"], markdown=markdown)
    module.exit_json(changed=False, seats=sizing["seats"], markdown=markdown)


if __name__ == "__main__":
    main()
