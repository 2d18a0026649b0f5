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
options:
  host:
    description: The host's name, used in messages and the table.
    type: str
    required: true
  gpus:
    description: The host's GPUs, C(llmfleet_gpus).
    type: list
    elements: dict
    required: true
  seats:
    description: The host's seats, C(llmfleet_seats).
    type: list
    elements: dict
    required: true
  seat_defaults:
    description: C(llmfleet_seat_defaults), fields every seat of an engine gets unless it sets them.
    type: dict
  inventory_dir:
    description: Directory that relative C(model_config) paths are relative to.
    type: path
  kv_factor:
    description: The sizing rule's factor for seats without their own C(kv_factor).
    type: float
    default: 1.25
  kv_round_to:
    description: The sizing rule's rounding (bytes or a size such as V(0.5GiB)).
    type: str
    default: 0.5GiB
  gpu_profile:
    description: The card whose attention backends vLLM's arithmetic assumes.
    type: str
    default: h100
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
      C(block_size), C(num_blocks), C(per_token_kv_bytes), C(served_model_names)).
  returned: always
  type: list
  elements: dict
markdown:
  description: The same as a Markdown table.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import GPU_PROFILE, KV_FACTOR, KV_ROUND_TO
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import size_seats
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import SeatSpecError
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import sizing_markdown


def main():
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "gpus": {"type": "list", "elements": "dict", "required": True},
            "seats": {"type": "list", "elements": "dict", "required": True},
            "seat_defaults": {"type": "dict"},
            "inventory_dir": {"type": "path"},
            "kv_factor": {"type": "float", "default": KV_FACTOR},
            "kv_round_to": {"type": "str", "default": KV_ROUND_TO},
            "gpu_profile": {"type": "str", "default": GPU_PROFILE},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        sizing = size_seats(**params)
    except SeatSpecError as exc:
        module.fail_json(msg=str(exc))
    markdown = sizing_markdown(params["host"], sizing)
    if sizing["problems"]:
        module.fail_json(msg="host %s: these seats cannot be sized or would not boot:\n- %s"
                         % (params["host"], "\n- ".join(sizing["problems"])),
                         seats=sizing["seats"], markdown=markdown)
    module.exit_json(changed=False, seats=sizing["seats"], markdown=markdown)


if __name__ == "__main__":
    main()
