#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_load
short_description: What the gateway's clients see while a window runs
version_added: 0.2.0
description:
  - Sends a light, bounded stream of real chat completions through the gateway on every route in
    O(routes), side by side, until O(stop_file) appears, the O(run) it measures is gone or
    O(max_seconds) pass, and counts per
    route the requests sent, those that failed, and the longest stretch without a successful
    reply.
  - One request is in flight per route at a time, with O(interval) seconds between them, so the
    load stays a probe, not a benchmark.
  - M(llmfleet.seats.seat_rebalance) runs it in the background for the length of a window when
    C(seat_rebalance_gateway_load) is on, and puts its counts in the report; a route whose seat
    restarts and has another deployment to fall back on should lose no request.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
attributes:
  check_mode:
    details:
      - The requests are sent in check mode too; they change nothing on the gateway or the seats.
options:
  url:
    description: Base URL of the gateway, for example V(http://fv-gw:4000). A trailing V(/v1) is optional.
    type: str
    required: true
  api_key:
    description: Bearer token for the gateway (never returned, scrubbed from every failure).
    type: str
  routes:
    description: The gateway's model names to send requests to.
    type: list
    elements: str
    required: true
  stop_file:
    description: The stream stops as soon as this file exists.
    type: path
    required: true
  max_seconds:
    description: The stream stops after this many seconds whatever happens.
    type: float
    default: 1800
  interval:
    description: Seconds between one route's reply and its next request.
    type: float
    default: 0.5
  timeout:
    description: Seconds to wait for a reply before the request counts as failed.
    type: float
    default: 60
  max_tokens:
    description: C(max_tokens) of each request.
    type: int
    default: 8
  validate_certs:
    description: Verify the TLS certificate of an V(https) URL.
    type: bool
    default: true
  run:
    description:
      - The run the load measures, as the P(llmfleet.seats.controller#lookup) lookup records it (its
        C(pid) and C(started) are read); the stream stops as soon as that C(ansible-playbook) process
        is gone, so a window cut short (Ctrl-C, a killed controller) does not leave it running to
        O(max_seconds). It must run on the same machine as that process.
    type: dict
notes:
  - Run it where the gateway's clients sit (usually C(delegate_to) the controller), with C(async)
    and C(poll=0) to have it run beside other tasks, and collect it with M(ansible.builtin.async_status).
seealso:
  - module: llmfleet.seats.gateway_smoke
"""

EXAMPLES = r"""
- name: Watch two routes through the gateway until the window ends
  llmfleet.seats.gateway_load:
    url: http://fv-gw:4000
    api_key: "{{ vault_litellm_smoke_key }}"
    routes: [gen-small, char-rp]
    stop_file: "{{ window_dir.path }}/stop"
  delegate_to: localhost
  async: 3600
  poll: 0
  register: load
"""

RETURN = r"""
routes:
  description: One entry per route, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    route:
      description: The route.
      type: str
      sample: gen-small
    sent:
      description: Requests sent.
      type: int
      sample: 118
    failed:
      description: Requests that got no successful reply.
      type: int
      sample: 0
    longest_gap_s:
      description: The longest stretch in seconds without a successful reply (from the start, between replies, or to the end).
      type: float
      sample: 1.41
    longest_gap_ended_at_s:
      description: Seconds from the start to the end of that stretch; V(null) before any reply.
      type: float
      sample: 37.2
    failures:
      description: The first distinct failures, the key scrubbed.
      type: list
      elements: str
      sample: ["HTTP 500: Connection error."]
seconds:
  description: How long the stream ran.
  returned: always
  type: float
  sample: 74.3
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._gateway.load import GATEWAY_LOAD_SPEC, gateway_load


def main():
    module = AnsibleModule(argument_spec=GATEWAY_LOAD_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = gateway_load(module.params)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
