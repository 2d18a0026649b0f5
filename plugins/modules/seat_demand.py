#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_demand
short_description: What each seat was asked for, from its vLLM metrics in Prometheus
version_added: 0.2.0
description:
  - Asks a Prometheus server that scrapes the seats' vLLM C(/metrics) what each seat in O(seats)
    served over O(window) ending at O(at) - requests, prompt and reply lengths (p50 and p99, from
    vLLM's request-token histograms), the peak of requests running and waiting, the peak KV cache
    usage and, with the seat's C(kv_cache_tokens), the peak KV tokens in use, preemptions, and the
    replies longer than O(runaway_tokens) (rounded down to a histogram bound, which the result
    names).
  - Every figure is one instant query, bounded by O(timeout) on the server. A seat without metrics
    in the window, or without traffic, says so in RV(seats[].detail).
  - vLLM labels its metrics with the served name only, so a name served on several hosts is read
    per scrape target (Prometheus's C(instance) label) - O(instance_host) and the seat's C(port)
    name it - and is never summed across them; without O(instance_host), a name found at more
    than one target gets no figures and the detail lists the targets.
  - The peak KV tokens use the KV tokens the seat ran with (C(vllm:cache_config_info), blocks x
    block size), and the seat's C(kv_cache_tokens) only where the engine does not publish them.
  - Counters are read with C(increase), so a seat restarted in the window is counted across its
    restart; Prometheus extrapolates to the window's edges, so counts are rounded.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
  - llmfleet.seats._prometheus
options:
  seats:
    description:
      - The seats to ask about, each with its C(name) and either C(model_name) (the label vLLM puts
        on its metrics) or C(served_model_names) (the first is used; a plan seat's C(launch) holds
        them); C(kv_cache_tokens) turns the peak usage into tokens where the engine does not say
        what it ran with; C(port) finds its scrape target with O(instance_host). A
        M(llmfleet.seats.seat_plan) plan's vLLM seats can be passed as they are.
    type: list
    elements: dict
    required: true
  window:
    description: How far back from O(at) to look, as a Prometheus duration (V(7d), V(12h), V(30m)).
    type: str
    default: 7d
  step:
    description: The resolution of the peaks of running and waiting requests and of KV usage.
    type: str
    default: 1m
  at:
    description: The window's end, in Unix seconds; now by default.
    type: float
  instance_host:
    description:
      - The host part of the seats' scrape targets as Prometheus labels them (C(instance) is
        V(<instance_host>:<port>)), for example V(fv-ml1) or V(10.0.4.21). Needed where the same
        served name runs on more than one host.
    type: str
  host:
    description:
      - The inventory host the seats run on. With it, RV(snapshot) is returned for the plan to read
        back as C(llmfleet_demand_snapshot).
    type: str
  runaway_tokens:
    description:
      - Replies longer than this many tokens are counted as runaways.
      - vLLM counts reply lengths in histogram buckets (1, 2, 5, 10, 20, 50, ...), so the count is of
        replies longer than the largest bucket bound at or below this figure; C(longer_than) in RV(seats[].runaways)
        names that bound.
    type: int
    default: 32768
seealso:
  - module: llmfleet.seats.seat_plan
"""

EXAMPLES = r"""
- name: A week of demand for fv-ml1's seats
  llmfleet.seats.seat_demand:
    prometheus_url: http://fv-mon:9090
    seats: "{{ plan.seats }}"
    window: 7d
  delegate_to: localhost
  register: demand
"""

RETURN = r"""
seats:
  description: One entry per seat, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    seat:
      description: The seat.
      type: str
    model_name:
      description: The C(model_name) label asked for.
      type: str
    instance:
      description: The scrape target the figures are from; null when none or several were found.
      type: str
    metrics:
      description: Whether Prometheus had the seat's vLLM metrics in the window.
      type: bool
    requests:
      description: Requests finished in the window.
      type: int
    prompt_tokens:
      description: C(p50) and C(p99) of the prompts' tokens.
      type: dict
    generation_tokens:
      description: C(p50) and C(p99) of the replies' tokens.
      type: dict
    peak_running:
      description: The most requests running at once.
      type: int
    peak_waiting:
      description: The most requests waiting at once.
      type: int
    peak_kv_usage:
      description: The highest KV cache usage, 0 to 1.
      type: float
    kv_cache_tokens:
      description: The KV tokens the peak usage is a share of.
      type: int
    kv_cache_tokens_from:
      description: V(engine) (what the seat ran with, from C(vllm:cache_config_info)), V(plan) (the seat's C(kv_cache_tokens) as given) or null (neither).
      type: str
    peak_kv_tokens:
      description: The highest KV tokens in use (usage x C(kv_cache_tokens)).
      type: int
    preemptions:
      description: Requests preempted in the window.
      type: int
    runaways:
      description: C(replies) longer than C(longer_than) tokens (the largest histogram bound at or below O(runaway_tokens)).
      type: dict
    detail:
      description: Why figures are missing (no metrics, no traffic, the name found at several scrape targets); empty otherwise.
      type: str
  sample:
    - {"seat": "gen-small", "model_name": "gen-small", "instance": "fv-ml1:8001", "metrics": true, "requests": 48112,
       "prompt_tokens": {"p50": 812.4, "p99": 4517.2}, "generation_tokens": {"p50": 302.1, "p99": 3985.0},
       "peak_running": 31, "peak_waiting": 2, "peak_kv_usage": 0.4187, "kv_cache_tokens": 58240,
       "kv_cache_tokens_from": "engine", "peak_kv_tokens": 24385, "preemptions": 0, "runaways": {"longer_than": 20000, "replies": 9}, "detail": ""}
table:
  description: One line per seat for the operator's log (requests, prompt and reply p50/p99, peak running, peak KV tokens, runaways, why figures are missing).
  returned: always
  type: list
  elements: str
  sample:
    - "seat       requests  prompt p50/p99  reply p50/p99  peak running  peak KV tokens          runaways              note"
    - "gen-small  48112     812.4/4517.2    302.1/3985.0   31            24385 of 58240 (42%)    9 over 20000 tokens"
snapshot:
  description:
    - With O(host), the figures as the plan reads them back (write it to a file and name it in
      C(llmfleet_demand_snapshot)); the format, the host, the window and RV(seats). It holds no
      server address or token.
  returned: when O(host) is given
  type: dict
  sample: {"format": "llmfleet.seats/demand/1", "host": "fv-ml1", "window": {"seconds": 604800, "end": 1796342400.0},
           "seats": [{"seat": "gen-small", "peak_kv_tokens": 24385, "requests": 48112}]}
window:
  description: The window's length in seconds and its end (Unix seconds).
  returned: always
  type: dict
  sample: {"seconds": 604800, "end": 1796342400.0}
svg:
  description:
    - One SVG with a panel per seat - its KV cache in use over the window (each step's most, in
      tokens where its KV tokens are known, else as a share), against its KV budget.
    - Range queries of at most 400 points per seat, one per seat read at one scrape target.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.demand import SEAT_DEMAND_SPEC, seat_demand
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors


def main():
    module = AnsibleModule(argument_spec=SEAT_DEMAND_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = seat_demand(module.params)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
