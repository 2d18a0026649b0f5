#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_plan
short_description: Plan a GPU host's seats - KV in bytes, footprints, provably best placement
version_added: 0.1.0
description:
  - Checks the host's GPUs and seats (the inventory schema of the collection) and names every
    problem at once, before anything runs.
  - Sizes every vLLM seat's KV cache in bytes exactly as vLLM 0.33 does (a pinned budget, or the
    smallest budget that gives the seat's C(kv_factor) times its C(max_model_len), rounded up to
    O(kv_round_to)), and refuses a budget vLLM would not boot with, in vLLM's words.
  - Counts each seat's footprint per GPU, weights + KV + runtime overhead; the overhead is
    measured from O(plateau) (the seat's process memory less weights and the KV it ran with)
    where it can be, else the seat's C(overhead_bytes), else a default. A measurement is only
    reused for the image, model and context the seat ran when the plateau was recorded, as the
    snapshot's own record of each seat this collection runs says, else O(plateau_ran), else
    O(plateau_kv) (the KV alone).
  - Cross-checks the inventory against the cards and the snapshots (the GPUs' memory, the host
    a snapshot was recorded on, seats the plateau shows that the inventory no longer lists, a
    fixed tenant holding more than its cap) and refuses a disagreement, naming both values,
    unless O(accept) passes it on purpose.
  - Places the seats with M(llmfleet.seats.seat_placement)'s exact search (the largest worst
    spare at plateau, then the fewest moves), on the capacity the cards leave for them (memory
    nobody in the plan holds counts against it), and picks each seat's boot-gate
    C(--gpu-memory-utilization).
  - Runs on the controller (model configs live in the inventory). It changes nothing but the
    plan files it writes into O(output_dir) when given.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.action
  - llmfleet.seats._host_seats
attributes:
  action:
    support: full
    details:
      - On the controller (a local connection without become, async or a task environment
        beyond a window's run id, as when delegated to localhost) the plan is made in Ansible's
        own process, with the same checks and results; elsewhere the module runs as usual.
  check_mode:
    support: full
    details:
      - In check mode the plan is made and the files in O(output_dir) are not written.
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  output_dir:
    description:
      - Write C(<host>-plan.json), C(<host>-plan.md) and C(<host>-plan.svg) here (made when
        missing), each replaced only when it changes. They are the plan's alone; a rebalance's
        report (M(llmfleet.seats.rebalance_report)) writes C(report.json), C(report.md) and
        C(<host>.svg) and none of these, so both may share one directory.
    type: path
  cards:
    description: A M(llmfleet.seats.gpu_info) result read now; its UUIDs must be the inventory's.
    type: dict
  plateau:
    description: A M(llmfleet.seats.gpu_info) snapshot recorded at the plateau.
    type: dict
  plateau_ran:
    description:
      - Seat name to what it ran when O(plateau) was recorded, for a snapshot that does not
        record it itself; C(kv_cache_memory_bytes) (a size such as C(22GiB)), C(max_model_len),
        C(image) and C(model). A seat that ran another image, model or context than the plan
        gets the default overhead, and the plan says why.
    type: dict
  plateau_kv:
    description:
      - Seat name to the KV bytes it ran with when O(plateau) was recorded (sizes such as
        C(22GiB) work), that is O(plateau_ran) with the KV alone.
    type: dict
  plateau_kv_planned:
    description:
      - Refused when true. It claimed that O(plateau) ran the budgets this plan computes, which
        a changed pin silently broke; the snapshot's record or O(plateau_ran) says what ran.
    type: bool
    default: false
  accept:
    description:
      - Cross-checks passed on purpose. C(snapshot_host) (the host a snapshot given for this
        one was recorded on), C(unknown_plateau_seats) (seats the plateau shows that the
        inventory does not list, counted as another tenant's memory) and
        C(fixed_cap_below_plateau) (fixed tenants whose cap is below what the plateau shows) and
        C(gpu_profile) (the O(gpu_profile) to size by although the cards' names say another).
    type: raw
  retire:
    description:
      - Seats no longer listed that a rebalance may stop (C(llmfleet_retire)); a name both
        listed and retired is refused.
    type: raw
  min_spare_mib:
    description: Refuse a placement whose worst spare at plateau is below this.
    type: int
    default: 0
  boot_margin_mib:
    description: Margin above the footprint for the boot-gate utilization.
    type: int
    default: 512
  default_overhead_mib:
    description: Runtime overhead per GPU of a vLLM seat when nothing better is known.
    type: int
    default: 2304
"""

EXAMPLES = r"""
- name: Plan fv-ml1 against its recorded plateau
  llmfleet.seats.seat_plan:
    host: "{{ inventory_hostname }}"
    gpus: "{{ llmfleet_gpus }}"
    seats: "{{ llmfleet_seats }}"
    inventory_dir: "{{ inventory_dir }}"
    plateau: "{{ lookup('ansible.builtin.file', inventory_dir ~ '/snapshots/plateau-20261007.json') | from_json }}"
    gpu_profile: rtx-pro-6000
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
plan:
  description:
    - C(gpus) (per GPU C(total_mib), C(background_mib) (memory not held by the plan's seats),
      C(capacity_mib), C(seats), C(footprint_mib), C(spare_mib) at plateau,
      C(spare_at_boot_mib), C(own_headroom_seat) (the seat that claims the GPU whole, or null)),
      C(seats) (per seat its GPUs, KV bytes, tokens, concurrency, the KV
      rule, weights/KV/overhead and footprint MiB, the boot-gate utilization, whether it moves,
      each planned number once, and C(launch), what the inventory declared about running it; a
      seat as it is is the input of M(llmfleet.seats.seat_files)), C(worst_spare_mib),
      C(moves), C(optimal) and C(warnings).
    - Each seat's C(now) is the seat as it runs now, beside the plan - C(gpus), C(held_mib),
      C(max_model_len), C(kv_cache_memory_bytes), C(kv_cache_tokens) and C(max_concurrency) (null
      where unknown) - the collection's own seat from its container's command, a container started
      by hand from the numbers M(llmfleet.seats.gpu_info) read of its command line and boot log.
    - A vLLM seat's C(calibration) (with a demand snapshot, the seat's measured figures - C(peak_kv_tokens),
      C(peak_kv_usage), C(requests), C(runaways) - C(demand_tokens), C(by_rule_bytes),
      C(by_demand_bytes) and C(sized_by), V(rule) or V(demand); null without figures).
    - C(last_watch), with a plateau snapshot that C(playbooks/watch_plateau.yml) wrote, is how the
      cards and seats settled after the window before (the C(watch) that M(llmfleet.seats.gpu_info)
      returns), with the snapshot's path as C(snapshot).
    - A radiance seat carries its funding instead of vLLM's KV figures - C(capacity_mib),
      C(elastic_mib), C(expert_floor_mib), C(vram_kv_bytes), C(kv_tokens), C(sessions),
      C(binding), C(funded_fraction), the pinned-RAM ledger (C(pin_ledger_mib), C(pin_ok)), its
      knobs, C(knob_effects) and C(host_pool_rungs) (docs/radiance.md).
  returned: success
  type: dict
markdown:
  description: The plan as Markdown tables.
  returned: success
  type: str
svg:
  description: A stacked bar per GPU (memory not ours, each seat, the spare).
  returned: success
  type: str
files:
  description: The plan files in O(output_dir).
  returned: when O(output_dir) is given
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import SEAT_PLAN_SPEC, seat_plan


def main():
    module = AnsibleModule(argument_spec=SEAT_PLAN_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = seat_plan(module.params, module.check_mode, module._diff)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
