# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this doc fragment is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

from __future__ import annotations


class ModuleDocFragment:

    # How a seat is gated around its boot: seat_gates and seat_boot take the same
    # (plugins/module_utils/_rollout/gates.py SEAT_GATES_SPEC).
    DOCUMENTATION = r"""
options:
  plan_gpus:
    description: The plan's C(gpus) entries.
    type: list
    elements: dict
    default: []
  margin_mib:
    description: Memory to keep free on a GPU beyond the footprints.
    type: int
    default: 512
  tolerance_mib:
    description: How far below the plan's predicted spare the measured free memory may be.
    type: int
    default: 512
  spare_gate:
    description:
      - Hold each card's free memory after a boot (and at the plateau) to the plan's spare at
        plateau less O(tolerance_mib), as well as to O(margin_mib).
      - V(false) gates the margin alone, for a window whose spare at plateau is what it measures
        (a ladder's rung).
    type: bool
    default: true
  health_timeout:
    description: Seconds to wait for a seat's C(/health) to answer 200.
    type: int
    default: 1800
  health_interval:
    description: Seconds between C(/health) polls.
    type: int
    default: 10
  runtime_probe:
    description: Send one long request (about O(runtime_probe_fraction) of C(max_model_len)).
    type: bool
    default: false
  runtime_probe_fraction:
    description: The probe's prompt length as a fraction of C(max_model_len).
    type: float
    default: 0.9
"""

    # How a seat is reached: every module that asks seats (seat_gates, seat_boot, seat_drain).
    ADDRESS = r"""
options:
  address:
    description: Where the seats' ports answer, seen from the host the module runs on.
    type: str
    default: 127.0.0.1
  api_key:
    description: The key every seat's endpoints are asked with, unless the seat has its own in O(secrets).
    type: str
  secrets:
    description:
      - The seats' secrets as M(llmfleet.seats.seat_files) takes them, each seat's name to its
        variables' names and values (the P(llmfleet.seats.seat_secrets#filter) filter's result).
      - A seat's own API key (the inventory's C(api_key), C(VLLM_API_KEY) for a vLLM seat) is sent as a
        Bearer token to its endpoints. Nothing else of them is read.
    type: dict
  docker_host:
    description: The Docker Engine to ask; defaults to C(DOCKER_HOST), then the CLI's default.
    type: str
"""
