#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_smoke
short_description: A real client's view of each route of a LiteLLM gateway or vLLM seat
version_added: 0.1.0
description:
  - Sends real chat completions for every route and check declared in O(routes), the way the
    seats' consumers use them, and judges the answers. Health endpoints are not consulted. vLLM's
    C(/health) answers 200 with a broken engine, and LiteLLM's C(/health) fails reasoning models
    because it probes with C(max_tokens=1).
  - V(chat) - a non-streaming completion; for prose routes the content must be non-empty and
    free of think blocks, channel markers and raw tool-call syntax.
  - "V(stream) - the same request streamed; the server-sent events are parsed up to
    C(data: [DONE]) and the time to first token is measured."
  - V(reasoning) - a streamed request whose reasoning must arrive in its own field and the
    answer in C(content). vLLM streams C(delta.reasoning); LiteLLM renames it to
    C(delta.reasoning_content). Either is accepted and RV(results[].reasoning_key) reports which
    one was seen. A C(<think>) block or channel marker inside C(content) fails the check (the
    seat lacks C(--reasoning-parser)).
  - V(tools) - a request offering one tool with C(tool_choice=auto); a tool call must come back
    with JSON arguments, then a follow-up turn carrying the tool result must answer in content
    without channel markers (a vLLM seat without a reasoning parser leaks its chat template's open
    channel into the turn after a tool result). vLLM's 400 for a seat without
    C(--enable-auto-tool-choice --tool-call-parser) fails the check with vLLM's own message.
  - The module fails when any check fails, naming the route and the check; RV(results) is
    returned either way.
  - Works against a gateway (O(url) of LiteLLM, routes are its model names) and straight against
    a seat (O(url) of the vLLM server, routes are its served model names).
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
attributes:
  check_mode:
    support: full
    details:
      - The checks run in check mode too. They only read - the gateway and the seats keep no
        state from a completion - and a dry run that skipped them would report routes as fine
        that a real client cannot use, which is what the dry run is for.
      - Each check costs a few hundred tokens and appears in LiteLLM's spend logs. To keep a
        dry run off the gateway, put C(when) V(not ansible_check_mode) on the task.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    support: full
    details:
      - Nothing is changed; the task never reports a change.
options:
  url:
    description:
      - Base URL of the LiteLLM gateway or of the vLLM seat, for example V(http://fv-gw:4000) or
        V(http://10.251.50.54:8016). A trailing V(/v1) is optional.
    type: str
    required: true
  api_key:
    description:
      - Bearer token sent as C(Authorization), for example a LiteLLM virtual key or the seat's
        C(--api-key). Omit it for a seat that takes none.
      - Never returned; it is scrubbed from every detail, also in the masked forms LiteLLM echoes.
    type: str
  routes:
    description: The routes to check, each with the checks it promises.
    type: list
    elements: dict
    required: true
    suboptions:
      model:
        description: The gateway's model name (or the seat's served model name).
        type: str
        required: true
      checks:
        description: The checks this route must pass.
        type: list
        elements: str
        choices: [chat, stream, reasoning, tools]
        default: [chat, stream]
      max_tokens:
        description:
          - C(max_tokens) of this route's requests. Defaults to O(reasoning_max_tokens) for a
            route that declares V(reasoning) (it thinks before it answers), else O(max_tokens).
        type: int
      prose:
        description:
          - Whether this route answers in prose, so V(chat) and V(stream) require non-empty
            content. Set V(false) for a route whose replies may be only tool calls.
        type: bool
        default: true
      extra_body:
        description:
          - Merged into every request body of this route, for example C(chat_template_kwargs)
            with C(enable_thinking=true) to reach a seat's thinking mode directly, as the
            gateway's route would (see the examples).
        type: dict
  timeout:
    description: Seconds to wait for any byte of a reply before the check fails.
    type: float
    default: 60
  max_tokens:
    description: Default C(max_tokens) for routes without V(reasoning); at least 16.
    type: int
    default: 256
  reasoning_max_tokens:
    description:
      - Default C(max_tokens) for routes that declare V(reasoning); at least 16. LiteLLM's own
        health check sends C(max_tokens=1), which a reasoning model spends thinking.
    type: int
    default: 2048
  validate_certs:
    description: Verify the TLS certificate of an V(https) URL.
    type: bool
    default: true
notes:
  - The request goes from the host the task runs on; run it where the operator's clients sit
    (usually C(delegate_to) the controller or the gateway host).
  - V(reasoning) streams because that is how the seats' clients read reasoning, and because
    vLLM before 0.28 cannot split a non-streamed reply for every reasoning parser.
seealso:
  - module: llmfleet.seats.gateway_routes
"""

EXAMPLES = r"""
- name: Check every route through the gateway
  llmfleet.seats.gateway_smoke:
    url: http://fv-gw:4000
    api_key: "{{ vault_litellm_smoke_key }}"
    routes:
      - model: gen-small
        checks: [chat, stream, tools]
      - model: char-rp
        checks: [chat, stream, tools]
      - model: char-rp-reasoning
        checks: [stream, reasoning]
  delegate_to: localhost
  register: smoke

- name: The same thinking alias straight on the seat (no gateway)
  llmfleet.seats.gateway_smoke:
    url: http://10.251.50.54:8016
    routes:
      - model: char-rp-thinking
        checks: [reasoning]
        extra_body:
          chat_template_kwargs:
            enable_thinking: true
"""

RETURN = r"""
results:
  description: One entry per route and check, in the order they ran.
  returned: always
  type: list
  elements: dict
  contains:
    model:
      description: The route.
      type: str
      sample: char-rp-reasoning
    check:
      description: V(chat), V(stream), V(reasoning) or V(tools).
      type: str
      sample: reasoning
    ok:
      description: Whether the route kept this contract.
      type: bool
      sample: true
    detail:
      description: What was seen, or why it failed (with the server's own error message).
      type: str
      sample: 'reasoning in delta.reasoning_content (53 chars), answer in content "17 + 25 = 42."'
    latency_s:
      description: Wall time of the check in seconds (both turns for V(tools)).
      type: float
      sample: 1.284
    ttft_s:
      description: Seconds to the first streamed token (V(stream), V(reasoning)); else V(null).
      type: float
      sample: 0.212
    reasoning_key:
      description:
        - The field the reasoning arrived in, V(reasoning) (vLLM) or V(reasoning_content)
          (LiteLLM); V(null) when none was seen or the check does not look for it.
      type: str
      sample: reasoning_content
    http_status:
      description: The HTTP status of a failed request, else V(null).
      type: int
      sample: 400
table:
  description:
    - The per-route contract table, one line per check, for the operator's log. A failed
      check's line ends with the start of its detail.
  returned: always
  type: list
  elements: str
  sample:
    - "route              check      result  latency  ttft   reasoning key      why"
    - "char-rp-reasoning  reasoning  ok      1.28s    0.21s  reasoning_content"
    - "char-rp            tools      FAIL    0.05s    -      -                  HTTP 400: ..."
failed_checks:
  description: How many checks failed.
  returned: always
  type: int
  sample: 0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._gateway.smoke import (
    CHECKS,
    DEFAULT_CHECKS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_REASONING_MAX_TOKENS,
    contract_table,
    failures_message,
    run_smoke,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "routes": {
                "type": "list", "elements": "dict", "required": True,
                "options": {
                    "model": {"type": "str", "required": True},
                    "checks": {"type": "list", "elements": "str", "choices": list(CHECKS),
                               "default": list(DEFAULT_CHECKS)},
                    "max_tokens": {"type": "int", "no_log": False},
                    "prose": {"type": "bool", "default": True},
                    "extra_body": {"type": "dict"},
                },
            },
            "timeout": {"type": "float", "default": 60},
            "max_tokens": {"type": "int", "default": DEFAULT_MAX_TOKENS, "no_log": False},
            "reasoning_max_tokens": {"type": "int", "default": DEFAULT_REASONING_MAX_TOKENS,
                                     "no_log": False},
            "validate_certs": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    with operator_errors(module):
        results = run_smoke(params["url"], params["routes"], api_key=params["api_key"],
                            timeout=params["timeout"], validate_certs=params["validate_certs"],
                            max_tokens=params["max_tokens"],
                            reasoning_max_tokens=params["reasoning_max_tokens"])
    failed = failures_message(results)
    outcome = {"changed": False, "results": results, "table": contract_table(results),
               "failed_checks": sum(1 for result in results if not result["ok"])}
    if failed:
        module.fail_json(msg=failed, **outcome)
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()
