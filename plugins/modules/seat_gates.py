#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_gates
short_description: The rebalance's gates for seats before and after they boot
version_added: 0.1.0
description:
  - Evaluates the gates of a rebalance and returns every one with its measured and expected
    value; fails, naming each failed gate with its numbers, when any does not pass.
  - O(phase=before_start) needs O(cards), a M(llmfleet.seats.gpu_info) result read just before.
    Free memory on each of the seat's GPUs, counting what the seat itself holds now, must cover
    its footprint plus O(margin_mib); for vLLM it must also pass vLLM's own startup check
    C(free >= ceil(total x gpu_memory_utilization)).
  - O(phase=after_boot) waits for each seat's C(/health) to answer 200 (up to
    O(health_timeout) seconds; it stops early when the container exits), then checks the
    container runs without restarts, C(/v1/models) lists the served names with the planned
    C(max_model_len), the boot log's reserved KV bytes, C(GPU KV cache size) and concurrency equal
    the plan, and the log has no OOM or FlashInfer fall-back line; with O(runtime_probe), one
    request near C(max_model_len) must succeed (boot is not runtime; a seat can pass every boot
    gate and die on its first long request).
  - O(phase=after_boot_memory) and O(phase=plateau) need O(cards) and O(plan_gpus). Free memory
    on the GPUs in O(gpus) must be at least the margin and, unless O(spare_gate=false), at least
    the plan's spare at plateau less O(tolerance_mib).
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.action
  - llmfleet.seats._seat_gates
  - llmfleet.seats._seat_gates.address
  - llmfleet.seats._attributes.info_module
attributes:
  action:
    support: full
    details:
      - O(phase=before_start), O(phase=after_boot_memory) and O(phase=plateau) read nothing from
        the host (every input is an argument), so they are computed in Ansible's own process on
        the controller, with the same checks and results; O(phase=after_boot) runs the module on
        the host whose seats it gates.
options:
  phase:
    description: Which gates to evaluate.
    type: str
    required: true
    choices: [before_start, after_boot, after_boot_memory, plateau]
  seats:
    description:
      - The seats, as entries of a M(llmfleet.seats.seat_plan) plan's C(seats).
    type: list
    elements: dict
    default: []
  cards:
    description: A M(llmfleet.seats.gpu_info) result read now.
    type: dict
  gpus:
    description: The GPU UUIDs whose memory to check in the memory phases.
    type: list
    elements: str
    default: []
requirements:
  - The C(docker) CLI on the target for O(phase=after_boot).
"""

EXAMPLES = r"""
- name: Gate the wave before it starts
  llmfleet.seats.seat_gates:
    phase: before_start
    seats: "{{ plan.seats | selectattr('name', 'in', wave) }}"
    cards: "{{ cards }}"

- name: Gate the wave after it boots
  llmfleet.seats.seat_gates:
    phase: after_boot
    seats: "{{ plan.seats | selectattr('name', 'in', wave) }}"
    health_timeout: 1800
    runtime_probe: true
"""

RETURN = r"""
gates:
  description: Every gate evaluated, passed or not.
  returned: always
  type: list
  elements: dict
  contains:
    seat:
      description: The seat (or C(GPU n) for memory gates).
      type: str
    gate:
      description: The gate's name, e.g. C(free_mib_before_start), C(health), C(kv_cache_tokens).
      type: str
    ok:
      description: Whether it passed.
      type: bool
    measured:
      description: What was measured.
      type: raw
    expected:
      description: What the plan expects.
      type: raw
    detail:
      description: The gate as a sentence with its numbers.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import (
    SEAT_GATES_REQUIRED_IF,
    SEAT_GATES_SPEC,
    SeatHost,
    seat_gates,
)


def main():
    module = AnsibleModule(argument_spec=SEAT_GATES_SPEC, required_if=SEAT_GATES_REQUIRED_IF,
                           supports_check_mode=True)
    params = module.params
    with operator_errors(module):
        host = SeatHost(Docker(params["docker_host"]), params["address"], params["api_key"],
                        params["health_timeout"], params["health_interval"], params["runtime_probe"],
                        params["runtime_probe_fraction"], secrets=params["secrets"])
        result = seat_gates(params, host)
    if result.get("failed"):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
