# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this doc fragment is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

from __future__ import annotations


class ModuleDocFragment:

    # A host's GPUs and seats as the inventory has them, and the sizing rule: seat_plan and
    # seat_sizing take the same (plugins/module_utils/_plan/plan.py HOST_OPTIONS).
    DOCUMENTATION = r"""
options:
  host:
    description: The host's name, used in messages and the results.
    type: str
    required: true
  gpus:
    description: The host's GPUs, C(llmfleet_gpus) (index, uuid, name, memory_total_mib, keep_clear).
    type: list
    elements: dict
    required: true
  seats:
    description: The host's seats, C(llmfleet_seats).
    type: list
    elements: dict
    required: true
  seat_defaults:
    description:
      - C(llmfleet_seat_defaults), fields every seat of an engine gets unless it sets them, keyed
        by engine (C(vllm), C(fixed)), for example a C(volumes) list that mounts the host's model
        cache into every vLLM seat.
    type: dict
  inventory_dir:
    description: Directory that relative C(model_config) paths are relative to.
    type: path
  kv_factor:
    description: The sizing rule's factor for seats without their own.
    type: float
    default: 1.25
  kv_round_to:
    description: The sizing rule's rounding (bytes or a size such as V(0.5GiB)).
    type: str
    default: 0.5GiB
  gpu_profile:
    description: The card whose vLLM defaults apply (see M(llmfleet.seats.kv_budget)'s C(gpu)).
    type: str
    default: h100
  demand_snapshot:
    description:
      - C(llmfleet_demand_snapshot), the demand snapshot C(playbooks/calibrate.yml) wrote for this
        host (M(llmfleet.seats.seat_demand)'s figures per seat), on the controller.
      - A vLLM seat with C(kv_sizing=demand) is sized from its peak KV tokens in use times
        O(demand_factor); every seat with figures gets the budget its demand needs beside its
        own in its C(calibration).
    type: path
  demand_factor:
    description: C(llmfleet_demand_factor), the headroom over the measured peak a seat sized by demand gets (at least 1).
    type: float
    default: 1.25
  demand_required:
    description:
      - Refuse a seat with C(kv_sizing=demand) that O(demand_snapshot) measured nothing for (no
        figures, no peak, no request), or whose snapshot file does not exist yet. V(false) sizes
        it by the rule and says so in its C(kv_rule), as a calibration that is yet to measure it needs.
    type: bool
    default: true
"""
