#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_drain
short_description: Let seats finish the requests they are working on before they stop
version_added: 0.2.0
description:
  - For each seat in O(seats), reads the count of requests its engine is working on (vLLM's
    C(/metrics) - C(vllm:num_requests_running) plus C(vllm:num_requests_waiting)) until it reaches
    zero or O(timeout) seconds pass, the seats side by side. It stops nothing itself; the task
    after it does.
  - Each seat is asked where its container publishes its port now (a seat the window moves to
    another port is still at its old one); O(leaving) names seats that leave the host, asked
    there too, with whichever engine's count answers. Where the container engine cannot be
    asked, the plan's port is.
  - A seat that does not answer, or whose engine counts nothing (a fixed tenant, radiance), is not
    waited for.
  - The gateway keeps sending a draining seat new requests until it stops; a route with another
    deployment to fall back on, and retries, carries those (see the gateway guide).
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
  - llmfleet.seats._seat_gates.address
attributes:
  check_mode:
    details:
      - In check mode no seat is asked and nothing is waited for.
options:
  seats:
    description: The seats about to stop, as entries of a M(llmfleet.seats.seat_plan) plan's C(seats).
    type: list
    elements: dict
    required: true
  leaving:
    description: Seats that leave the host (in no plan any more) to drain too, where they run now.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait at most, for all the seats together; V(0) asks nothing.
    type: float
    default: 30
  interval:
    description: Seconds between two readings of a seat's count.
    type: float
    default: 0.2
seealso:
  - module: llmfleet.seats.seat_runtime
  - module: llmfleet.seats.seat_boot
"""

EXAMPLES = r"""
- name: Let the seats that move finish what they are answering
  llmfleet.seats.seat_drain:
    seats: "{{ plan.seats | selectattr('name', 'in', steps.stop_first) | list }}"
    timeout: 30
  register: drained

- name: Then stop them
  llmfleet.seats.seat_runtime:
    project_dir: "/opt/docker/compose/{{ item }}"
    state: stopped
  loop: "{{ steps.stop_first }}"
  become: true
"""

RETURN = r"""
drains:
  description:
    - One entry per seat, in the order given, then one per seat of O(leaving) that runs on the host
      (one that does not has nothing to wait for); empty in check mode.
  returned: always
  type: list
  elements: dict
  contains:
    seat:
      description: The seat.
      type: str
    outcome:
      description:
        - V(drained) (nothing in flight when the wait ended), V(timed_out) (RV(drains[].in_flight_left)
          still in flight at the deadline), V(count_lost) (counted, then no count could be read
          until the deadline), V(not_answering) (nothing served at its address), V(unreadable)
          (something answered without the count) or V(not_counted) (its engine counts nothing, or
          O(timeout) is 0).
      type: str
    in_flight_at_start:
      description: The count at the first reading; null without one.
      type: int
    in_flight_left:
      description: The count at the last reading; null without one.
      type: int
    waited_s:
      description: Seconds waited.
      type: float
  sample: [{"seat": "coder", "outcome": "drained", "in_flight_at_start": 3, "in_flight_left": 0, "waited_s": 4.1}]
actions:
  description: One line per seat that had something to wait for, for the report.
  returned: always
  type: list
  elements: str
  sample: ["before its stop: coder: drained 3 request(s) in flight in 4.1 s"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.drain import SEAT_DRAIN_SPEC, seat_drain


def main():
    module = AnsibleModule(argument_spec=SEAT_DRAIN_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = seat_drain(module.params, Docker(module.params["docker_host"]), check_mode=module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
