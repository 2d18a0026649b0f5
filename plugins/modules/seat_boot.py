#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_boot
short_description: Boot a host's changed seats one at a time per GPU, the GPUs side by side, gated
version_added: 0.1.0
description:
  - Starts the seats of O(waves) from the files M(llmfleet.seats.seat_files) wrote under
    O(root), each with its runtime. Each GPU boots its seats one at a time in wave order, and
    the GPUs boot side by side. A seat starts as soon as the seat before it on each of its GPUs
    has booted and passed its gates, not when a whole wave has. So the boots last about as long
    as the busiest GPU's boots one after another, and no two seats ever co-boot on one card.
  - Every seat is gated as M(llmfleet.seats.seat_gates) gates it. Before its start, free memory
    on its GPUs, read just then, must cover its footprint plus O(margin_mib), and pass the
    engine's own startup check. After its boot, the container runs, C(/health) answers 200 and
    the engine's own gates pass. Then its GPUs' free memory must be at least the plan's spare
    less O(tolerance_mib) (the margin alone with O(spare_gate=false)).
  - The first failed gate abandons the boots still under way, starts no further seat and fails
    the task, naming each failed gate with its numbers; RV(gates), RV(boots) and RV(actions)
    come back with the failure, for the report and the rollback.
  - RV(boots) records each seat's own boot seconds (start to C(/health) 200), and RV(floor_s)
    the busiest GPU's sum of them, which no window that boots one seat at a time per GPU can
    beat; compare it with RV(elapsed_s).
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._seat_gates
  - llmfleet.seats._seat_gates.address
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing starts; RV(boots) lists the order and what each seat waits for.
  diff_mode:
    support: none
  idempotent:
    support: none
    details:
      - Every seat in O(waves) is started (recreated when it runs); the rebalance role passes only
        the seats that change.
options:
  seats:
    description: The seats to boot, as entries of a M(llmfleet.seats.seat_plan) plan's C(seats).
    type: list
    elements: dict
    required: true
  waves:
    description:
      - The seat names in boot order, as the C(llmfleet.seats.rebalance_steps) filter's C(waves)
        give them. A seat waits for the seat of an earlier wave last on each of its GPUs.
    type: list
    elements: list
    required: true
  root:
    description: The directory holding one project directory per seat, named by the seat.
    type: path
    required: true
  runtimes:
    description: Seat name to its runtime, for the seats that name one (a plan seat's C(runtime)).
    type: dict
    default: {}
  gpu_source:
    description: How the cards are read before and after each boot, as M(llmfleet.seats.gpu_info) reads them.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  drain_timeout:
    description:
      - Before a seat restarts, wait at most this many seconds until the requests it is working
        on reach zero (its engine's count, for vLLM C(/metrics)), so a long answer finishes
        rather than being cut off; V(0) restarts it at once. A seat that does not answer, or
        whose engine counts nothing, restarts at once.
      - A gateway that fails the seat's routes over to another deployment sends it new requests
        until it stops; what those lose depends on the gateway's retries (see the gateway guide).
    type: float
    default: 0
  drain_interval:
    description: Seconds between two readings of the count while a seat drains.
    type: float
    default: 0.2
requirements:
  - The C(docker) CLI with the compose plugin on the target, and what M(llmfleet.seats.gpu_info)
    needs to read the cards.
seealso:
  - module: llmfleet.seats.seat_gates
  - module: llmfleet.seats.seat_runtime
"""

EXAMPLES = r"""
- name: Boot the seats that change, gated, one at a time on each GPU
  llmfleet.seats.seat_boot:
    seats: "{{ plan.seats | selectattr('name', 'in', steps.waves | flatten) | list }}"
    waves: "{{ steps.waves }}"
    root: /opt/docker/compose
    plan_gpus: "{{ plan.gpus }}"
    health_timeout: 1800
  become: true
  register: boot
"""

RETURN = r"""
gates:
  description: Every gate evaluated, seat by seat in boot order, as M(llmfleet.seats.seat_gates) returns them.
  returned: always
  type: list
  elements: dict
boots:
  description: Each seat in boot order.
  returned: always
  type: list
  elements: dict
  contains:
    seat:
      description: The seat.
      type: str
    gpus:
      description: Its GPU UUIDs.
      type: list
      elements: str
    after:
      description: The seats it waited for (the one before it on each of its GPUs).
      type: list
      elements: str
    started_s:
      description: When it started, in seconds after the first start; null when it did not start.
      type: float
    boot_s:
      description: Seconds from its start to C(/health) 200; null when it did not get there.
      type: float
    outcome:
      description: C(ready), C(failed), C(abandoned) (another seat failed while it booted) or C(not started).
      type: str
    drain:
      description:
        - How its restart waited for its requests in flight, with O(drain_timeout); null without.
        - C(outcome) is C(drained), C(timed_out) (stopped with C(in_flight_left) still running),
          C(count_lost) (counted, then no count read until the deadline), C(not_answering) (nothing
          served at its address), C(unreadable) (something answered without the count) or
          C(not_counted) (its engine counts nothing).
      type: dict
  sample: [{"seat": "coder", "gpus": ["GPU-5f1c"], "after": [], "started_s": 0.0, "boot_s": 81.6, "outcome": "ready"}]
actions:
  description: One line per seat for the report (see the sample).
  sample: ["booted: coder in 81.6 s", "booted: voices in 40.2 s (after coder)"]
  returned: always
  type: list
  elements: str
elapsed_s:
  description: Seconds from the first start until the last seat was done.
  returned: always
  type: float
floor_s:
  description: The busiest GPU's boot seconds one seat after another (from RV(boots)).
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.boot import SEAT_BOOT_SPEC, seat_boot


def main():
    module = AnsibleModule(argument_spec=SEAT_BOOT_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = seat_boot(module.params, Docker(module.params["docker_host"]), module.check_mode)
    if result.get("failed"):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
