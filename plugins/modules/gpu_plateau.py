#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_plateau
short_description: Each card's plateau after a window, and whether it still creeps, from DCGM metrics in Prometheus
version_added: 0.2.0
description:
  - Asks a Prometheus server that scrapes the host's DCGM exporter how each card in O(gpus) settled
    after a window - C(DCGM_FI_DEV_FB_USED) and C(DCGM_FI_DEV_FB_FREE) (MiB), by the card's
    C(UUID) label.
  - The boot transient, the O(settle) after O(since) (the window's end), is left out; from
    there to O(at) the plateau is the most the card held and the least it left free. The creep is
    the slope of what it held over the last O(creep_over), in MiB per hour.
  - A card still creeping faster than O(creep_mib_per_hour), left with less than O(margin_mib)
    free, or left more than O(tolerance_mib) below the plan's predicted spare
    (each card's C(spare_mib), a M(llmfleet.seats.seat_plan) plan's C(gpus) as they are), is flagged
    in words in RV(gpus[].flags).
  - With O(reading), the host's cards read after the transient, each of the plan's seats (O(seats))
    is held to its planned footprint as well, and RV(snapshot) is a plateau snapshot in
    M(llmfleet.seats.gpu_info)'s format for the next plan (C(llmfleet_plateau_snapshot)), with the
    verdict under C(watch) for the next window's report.
  - Every figure is one instant query, bounded by O(timeout) on the server.
  - With O(source=beszel) the cards' figures come from a Beszel hub instead (its system stats
    records of O(beszel_system), each GPU's C(mu) and C(mt) turned back into MiB, x 1.024), by
    each card's index (Beszel has no UUIDs). The plateau is the most a record shows after the
    transient, the creep the least-squares slope of the records over O(creep_over). Beszel records
    no reserved memory, so free is total less used; its coarser record types are averages, which
    smooth a short peak away.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
  - llmfleet.seats._prometheus
options:
  source:
    description: Where the cards' figures come from - V(prometheus) (DCGM exporter's gauges) or V(beszel) (a Beszel hub).
    type: str
    choices: [prometheus, beszel]
    default: prometheus
  prometheus_url:
    description: The Prometheus server, for example V(http://fv-mon:9090); required with O(source=prometheus).
    type: str
    required: false
  beszel_url:
    description: The Beszel hub, for example V(http://fv-mon:8090); required with O(source=beszel).
    type: str
  beszel_token:
    description: A token of a Beszel user who may read the system's stats (never returned).
    type: str
  beszel_system:
    description: The Beszel system's record id (the host as Beszel knows it); required with O(source=beszel).
    type: str
  beszel_record_type:
    description: Which of Beszel's records to read - one a minute, or averages over longer spans.
    type: str
    choices: [1m, 10m, 20m, 120m, 480m]
    default: 1m
  gpus:
    description:
      - The host's cards, each with its C(uuid) and C(index); a plan's C(gpus) carry C(spare_mib),
        the spare at plateau the plan predicted, which each card is held to.
      - The plan's in O(report) by default.
    type: list
    elements: dict
  since:
    description:
      - When the window ended, in Unix seconds; when O(host)'s window in O(report) finished by default
        (after its boots, gates and report, so the boots themselves are before it).
    type: float
  report:
    description:
      - A window's C(report.json) (M(llmfleet.seats.rebalance_report)'s) on the host the task runs
        on. O(host)'s section gives O(since) (when it finished) and O(gpus) (its plan's, with the
        predicted spare), so a scheduled run needs only the report and the host.
    type: path
  host:
    description: The inventory host whose window O(report) holds.
    type: str
  settle:
    description: The boot transient after O(since) that the plateau leaves out, as a Prometheus duration.
    type: str
    default: 1h
  at:
    description: When to read, in Unix seconds; now by default.
    type: float
  creep_over:
    description: How far back from O(at) the creep is measured, as a Prometheus duration.
    type: str
    default: 6h
  creep_mib_per_hour:
    description: A card whose memory grows faster than this is still creeping.
    type: float
    default: 1.0
  margin_mib:
    description: The least a card should keep free at its plateau.
    type: int
    default: 512
  tolerance_mib:
    description:
      - How far below the plan's predicted spare a card may settle, and how far above its planned
        footprint a seat may hold.
    type: int
    default: 512
  reading:
    description:
      - A M(llmfleet.seats.gpu_info) result read on O(host) after the transient, with each process
        attributed to its seat; it needs O(host).
      - Each card in RV(snapshot) is raised to the plateau Prometheus saw where that is higher than
        the reading, the difference counted as memory not held by the seats (DCGM does not say
        whose it was).
    type: dict
  seats:
    description:
      - The plan's seats, each with its C(name), C(gpus) (UUIDs) and C(footprint_mib) (per GPU), that
        O(reading) holds to their footprints; the plan's in O(report) by default.
    type: list
    elements: dict
notes:
  - DCGM exporter reports whole cards; what each seat holds on them comes from O(reading), which
    M(llmfleet.seats.gpu_info) takes on the host.
seealso:
  - module: llmfleet.seats.seat_demand
  - module: llmfleet.seats.gpu_info
"""

EXAMPLES = r"""
- name: How fv-ml1's cards settled since Tuesday's window
  llmfleet.seats.gpu_plateau:
    prometheus_url: http://fv-mon:9090
    gpus: "{{ seat_plan_result.gpus }}"
    since: 1796342400
    settle: 2h
    creep_over: 12h
  delegate_to: localhost
  register: plateau

- name: Two days after the window, against the plan it ran
  llmfleet.seats.gpu_plateau:
    prometheus_url: http://fv-mon:9090
    report: reports/2026-10-06/report.json
    host: fv-ml1
  delegate_to: localhost

- name: Read what each seat holds now
  llmfleet.seats.gpu_info:
  register: cards_now

- name: The same, each seat held to its footprint, and a plateau snapshot for the next plan
  llmfleet.seats.gpu_plateau:
    prometheus_url: http://fv-mon:9090
    report: reports/2026-10-06/report.json
    host: "{{ inventory_hostname }}"
    reading: "{{ cards_now }}"
  delegate_to: localhost
  register: plateau
"""

RETURN = r"""
gpus:
  description: One entry per card, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The card's index.
      type: int
    uuid:
      description: The card's UUID.
      type: str
    metrics:
      description: Whether Prometheus had the card's DCGM series after the boot transient.
      type: bool
    transient_peak_used_mib:
      description: The most the card held in the O(settle) after O(since) (the boots' tail and the first traffic), left out of the plateau.
      type: int
    plateau_used_mib:
      description: The most the card held after it.
      type: int
    least_free_mib:
      description: The least it left free after it.
      type: int
    creep_mib_per_hour:
      description: The slope of what it held over O(creep_over).
      type: float
    predicted_spare_mib:
      description: The plan's predicted spare at plateau, when given.
      type: int
    settled:
      description: Whether it creeps no faster than O(creep_mib_per_hour); null without a slope.
      type: bool
    flags:
      description:
        - What is wrong with it, in words, a seat of it holding more than O(tolerance_mib) above its
          planned footprint included; empty when it settled as planned.
      type: list
      elements: str
    detail:
      description: Why figures are missing; empty otherwise.
      type: str
  sample:
    - {"index": 0, "uuid": "GPU-5b0c6e8e-2f1d", "metrics": true, "transient_peak_used_mib": 91234, "plateau_used_mib": 97827,
       "least_free_mib": 60, "creep_mib_per_hour": 0.0, "predicted_spare_mib": 512, "settled": true,
       "flags": ["60 MiB free at the plateau, below the margin of 512 MiB"], "detail": ""}
flagged:
  description: The indices of the cards with a flag.
  returned: always
  type: list
  elements: int
table:
  description: One line per card for the operator's log.
  returned: always
  type: list
  elements: str
window:
  description: O(since), the transient in seconds, and O(at).
  returned: always
  type: dict
svg:
  description:
    - One SVG with a panel per card - what it held from O(since) to O(at) (each step's most, at most
      400 points), the boot transient shaded, its plateau and the plan's line (what it holds with
      the plan's predicted spare left free) dashed.
  returned: always
  type: str
seats:
  description: Each of O(seats) on each of its cards, as O(reading) shows it.
  returned: with O(reading)
  type: list
  elements: dict
  contains:
    seat:
      description: The seat's name.
      type: str
    index:
      description: The card's index.
      type: int
    uuid:
      description: The card's UUID.
      type: str
    held_mib:
      description: What the reading shows the seat holding there; null when it is not there.
      type: int
    planned_mib:
      description: Its planned footprint there.
      type: int
    over_plan_mib:
      description: RV(seats[].held_mib) less RV(seats[].planned_mib); null when not held.
      type: int
snapshot:
  description:
    - The plateau snapshot to keep (M(llmfleet.seats.gpu_info)'s format, schema
      C(llmfleet.seats/gpu_snapshot)) - O(reading) taken at O(at), each card's
      C(plateau_above_reading_mib), and C(watch) - C(window) (with C(settled_from)), C(gpus) (each
      card's plateau figures and flags), C(seats) (as RV(seats)) and C(flagged).
    - Write it as JSON and give its path as C(llmfleet_plateau_snapshot) to plan against it.
  returned: with O(reading)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plateau import GPU_PLATEAU_SPEC, gpu_plateau
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors


def main():
    module = AnsibleModule(argument_spec=GPU_PLATEAU_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = gpu_plateau(module.params)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
