#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_placement
short_description: Assign seats to GPUs with the largest possible worst spare, provably
version_added: 0.1.0
description:
  - Places seats (vLLM engines and fixed-size tenants, each needing a number of MiB on every GPU
    it uses) onto GPUs so that the worst spare - capacity less the needs placed there, over
    the GPUs not kept clear - is as large as any assignment can make it.
  - Among assignments with that worst spare it takes one with the fewest moves (seats whose
    O(seats[].current_gpu) is given and differs); among those, the first in a fixed search
    order, so the same input always gives the same answer whatever order the seats come in.
  - The search is exact (bounds, bin completion with dominance and symmetry rules, memoised
    failures; moves by branch and bound), not a heuristic. RV(optimal) is V(true) only when
    both the worst spare and the moves are proven best.
  - It is also anytime. A search that spends O(search_node_limit) returns the best assignment
    found with RV(optimal=false) and RV(bound_mib), which no assignment's worst spare exceeds
    (the certified gap is RV(bound_mib) less RV(worst_spare_mib)). The same input and budget
    always give the same answer.
  - Fails, naming the GPUs, the shortfall in MiB and the seats involved, when no assignment
    leaves O(min_spare_mib) on every GPU.
  - Count the needs from what a seat really holds at its plateau (weights, pinned KV, runtime
    overhead), not from its declared budget; M(llmfleet.seats.seat_plan) does that from the
    inventory and calls the same search.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.pure
options:
  gpus:
    description:
      - The GPUs of one host, in the order ties are broken (usually by index).
    type: list
    elements: dict
    required: true
    suboptions:
      id:
        description: The GPU's id (its UUID, or any name); seats refer to GPUs by it.
        type: str
        required: true
      capacity_mib:
        description:
          - MiB the seats placed here may use - the card's total less reserved memory and less
            what tenants outside this placement hold.
        type: int
        required: true
      keep_clear:
        description:
          - Place nothing here. The GPU does not count towards the worst spare.
        type: bool
        default: false
  seats:
    description: The seats to place.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The seat's name, unique.
        type: str
        required: true
      need_mib:
        description: MiB the seat needs on each GPU it uses (per tensor-parallel rank).
        type: int
        required: true
      gpu_count:
        description:
          - How many distinct GPUs the seat needs (its tensor-parallel size). Defaults to the
            number of GPUs in O(seats[].gpu), else 1.
        type: int
      gpu:
        description:
          - Pin the seat - a GPU id, or a list of O(seats[].gpu_count) ids.
        type: raw
      avoid_gpus:
        description: GPU ids the seat must not use.
        type: list
        elements: str
        default: []
      current_gpu:
        description:
          - Where the seat runs now - a GPU id, or a list of ids for a multi-GPU seat. A seat
            placed elsewhere counts as a move; a seat without it is new and never a move.
        type: raw
  min_spare_mib:
    description:
      - The least spare every GPU not kept clear must keep; below it the module fails.
    type: int
    default: 0
  search_node_limit:
    description:
      - The most search steps to spend before returning the best assignment found with
        RV(optimal=false). A step is one search node on a host of up to 16 seats that are not
        pinned and 8 GPUs; a larger host's node counts one step per 16 seats times one per 8
        GPUs, rounded up, so the default is about 5 seconds on one core at any host size.
      - When some seat has O(seats[].current_gpu), the worst spare may use 60% of it and the
        moves get the rest.
    type: int
    default: 100000
notes:
  - C(docs/placement.md) in the collection explains the objective, the bounds and the proof, and
    how seat footprints are counted.
  - 24 to 32 seats on 8 identical GPUs are usually proven optimal in well under a second, with
    C(current_gpu) for every seat in a second or two. Mixed GPU sizes, avoid lists and several
    multi-GPU seats make the proof longer, and such hosts often end within the default budget
    with a gap of tens of MiB; C(bench/bench_placement.py) prints measured times and gaps.
seealso:
  - module: llmfleet.seats.seat_plan
"""

EXAMPLES = r"""
- name: Place fv-ml1's seats for the best worst-case spare at plateau
  llmfleet.seats.seat_placement:
    gpus:
      - {id: GPU-0, capacity_mib: 97887}
      - {id: GPU-1, capacity_mib: 97887}
      - {id: GPU-2, capacity_mib: 97887}
      - {id: GPU-3, capacity_mib: 97887, keep_clear: true}
    seats:
      - {name: parakeet-nemo, need_mib: 3840, gpu: GPU-0}
      - {name: meromero-rp, need_mib: 41200, current_gpu: GPU-1}
      - {name: gen-small, need_mib: 17800, current_gpu: GPU-1, avoid_gpus: [GPU-2]}
      - {name: coder, need_mib: 30500, current_gpu: GPU-0}
      - {name: big-tp, need_mib: 60000, gpu_count: 2}
    min_spare_mib: 1024
  register: placement

- name: Show where each seat goes and the spare left on each GPU
  ansible.builtin.debug:
    msg: "{{ placement.assignment }} / worst spare {{ placement.worst_spare_mib }} MiB"
"""

RETURN = r"""
assignment:
  description: Seat name to GPU id; a list of ids for a seat on several GPUs.
  returned: success
  type: dict
  sample: {"coder": "GPU-0", "meromero-rp": "GPU-1", "big-tp": ["GPU-0", "GPU-2"]}
spare_mib:
  description: GPU id to the MiB left there (capacity less the needs placed), kept-clear GPUs too.
  returned: success
  type: dict
  sample: {"GPU-0": 3547, "GPU-1": 38887, "GPU-2": 37887, "GPU-3": 97887}
worst_spare_mib:
  description: The smallest spare over the GPUs not kept clear.
  returned: success
  type: int
  sample: 3547
moves:
  description: Seats whose GPU(s) differ from their O(seats[].current_gpu), sorted.
  returned: success
  type: list
  elements: str
  sample: ["gen-small"]
optimal:
  description: Whether the worst spare and then the moves are proven best.
  returned: success
  type: bool
  sample: true
bound_mib:
  description:
    - No placement's worst spare can be larger than this; equal to RV(worst_spare_mib) when
      RV(optimal), else the certified gap to the best is RV(bound_mib) - RV(worst_spare_mib)
      (the relaxation's RV(upper_bound_mib), lowered by every worst spare the search proved
      impossible).
  returned: success
  type: int
  sample: 3600
upper_bound_mib:
  description: The bound the proof started from; the worst spare can be no larger.
  returned: success
  type: int
  sample: 3600
search_nodes:
  description: Search steps spent.
  returned: success
  type: int
  sample: 412
per_gpu:
  description: Per GPU, in the order given - id, capacity, whether kept clear, the seats placed there, MiB used and spare.
  returned: success
  type: list
  elements: dict
  sample: [{"id": "GPU-0", "capacity_mib": 97887, "keep_clear": false, "seats": ["coder", "parakeet-nemo"], "used_mib": 94340, "spare_mib": 3547}]
shortfall_mib:
  description: On failure for lack of room, how many MiB are missing.
  returned: failure
  type: int
  sample: 1524
short_gpus:
  description: On failure for lack of room, the GPUs that come up short.
  returned: failure
  type: list
  elements: str
  sample: ["GPU-1"]
short_seats:
  description: On failure for lack of room, the seats involved.
  returned: failure
  type: list
  elements: str
  sample: ["gen-small", "meromero-rp"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._placement import (
    DEFAULT_NODE_LIMIT,
    PlacementError,
    PlacementInfeasible,
    per_gpu,
    place,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "gpus": {"type": "list", "elements": "dict", "required": True, "options": {
                "id": {"type": "str", "required": True},
                "capacity_mib": {"type": "int", "required": True},
                "keep_clear": {"type": "bool", "default": False},
            }},
            "seats": {"type": "list", "elements": "dict", "required": True, "options": {
                "name": {"type": "str", "required": True},
                "need_mib": {"type": "int", "required": True},
                "gpu_count": {"type": "int"},
                "gpu": {"type": "raw"},
                "avoid_gpus": {"type": "list", "elements": "str", "default": []},
                "current_gpu": {"type": "raw"},
            }},
            "min_spare_mib": {"type": "int", "default": 0},
            "search_node_limit": {"type": "int", "default": DEFAULT_NODE_LIMIT},
        },
        supports_check_mode=True,
    )
    params = module.params
    with operator_errors(module):
        try:
            result = place(params["gpus"], params["seats"], params["min_spare_mib"],
                           params["search_node_limit"])
        except PlacementInfeasible as exc:
            module.fail_json(msg=str(exc), shortfall_mib=exc.shortfall_mib, short_gpus=exc.gpus,
                             short_seats=exc.seats)
        except PlacementError as exc:
            module.fail_json(msg=str(exc))
    result["per_gpu"] = per_gpu(params["gpus"], params["seats"], result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
