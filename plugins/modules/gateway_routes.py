#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_routes
short_description: Audit a LiteLLM config's targets against the seats, and repoint moved ones
version_added: 0.1.0
description:
  - Reads a LiteLLM C(config.yaml) and checks that every C(model_list[].litellm_params.api_base)
    and every C(general_settings.pass_through_endpoints[].target) points at a seat (host and
    port) in O(seats). After a move an C(api_base)-only substitution leaves pass-through targets
    dead, so both are audited.
  - "Each target gets a status: V(ok) (a seat's address, and for an C(api_base) that seat serves
    the route's model), V(moved) (a seat's previous address, see O(seats[].previous_host)),
    V(wrong_seat) (a seat's address, but another model), V(unknown) (no seat has it),
    V(external) (a host in O(external_hosts)) or V(unresolved) (an C(os.environ/) reference or
    not a URL; reported, not judged)."
  - With O(rewrite=true), V(moved) targets are repointed in place. Only the C(host:port)
    characters of each value change, so comments, quoting and layout are kept; the result is
    read back before it is written; the file is backed up first as
    C(<path>.bak-YYYYMMDD-<tag>) and replaced atomically with its owner and mode.
  - A seat with an O(seats[].api_key) answers only requests that carry it, so a route whose
    C(api_base) is that seat's address must carry the seat's key in C(litellm_params.api_key);
    without one it is V(no_key), with a key written in the file that is not the seat's it is
    V(wrong_key). An C(os.environ/) key is resolved by the gateway and not judged. No key (the
    seat's or the file's) is ever shown; the file's literal keys are kept out of the diff.
  - A route to a seat is held to the seat's limits when O(seats[].max_model_len) is given - its
    C(model_info.max_input_tokens) and C(model_info.max_tokens) at most the seat's
    C(max_model_len), its C(model_info.max_output_tokens) at most the seat's output cap
    (O(seats[].max_new_tokens), else the context) - and is V(over_limit) when it declares more, as
    the gateway would let through requests the seat refuses. Each such target returns the
    limits its seat has (RV(targets[].limits)), the C(model_info) to write where the config is
    managed elsewhere.
  - Fails when, after any rewrite, a target is still V(moved), V(wrong_seat), V(unknown),
    V(no_key), V(wrong_key) or V(over_limit) (see O(strict)), naming the line, route and target of each (and the
    seat, for a key); it then writes nothing. Run it with C(check_mode) before a window to catch a
    route that would answer 401 only once the window's smoke gates ask it.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reports the rewrites it would make (and the diff) without writing.
  diff_mode:
    support: full
  idempotent:
    support: full
requirements:
  - PyYAML on the host the task runs on (always there on the controller, see notes).
options:
  path:
    description: The LiteLLM C(config.yaml).
    type: path
    required: true
  seats:
    description: Where the seats are now (and were, for moved ones).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The seat's name.
        type: str
        required: true
      host:
        description:
          - The seat's host as the gateway addresses it (compared as written, case-insensitive;
            names are not resolved).
        type: str
        required: true
      port:
        description: The seat's port.
        type: int
        required: true
      served_model_names:
        description:
          - The names the seat serves. An C(api_base) whose route model
            (C(hosted_vllm/<name>)) is not among them is V(wrong_seat). Empty matches by address
            alone.
        type: list
        elements: str
        default: []
      previous_host:
        description: The host the seat had before it moved; defaults to O(seats[].host).
        type: str
      max_model_len:
        description: The seat's context; the most a route's C(max_input_tokens) and C(max_tokens) may say.
        type: int
      max_new_tokens:
        description: The seat's output cap; the most a route's C(max_output_tokens) may say (the context without one).
        type: int
      previous_port:
        description: The port the seat had before it moved; defaults to O(seats[].port).
        type: int
      api_key:
        description:
          - The seat's API key (the seat's own C(api_key), never printed). Its routes must carry
            it; a seat's inventory entry can be passed as it is.
        type: str
  scope_hosts:
    description:
      - Judge only the targets on these hosts (as the gateway writes them; a seat that moved host
        needs its previous one too) and leave the rest out of the result, for an audit of one
        host's seats in a config that routes to many. Every target by default.
    type: list
    elements: str
    default: []
  rewrite:
    description: Repoint V(moved) targets to where their seat is now.
    type: bool
    default: false
  rewrite_limits:
    description:
      - Set every C(model_info) limit a route to a seat declares (C(max_input_tokens), C(max_tokens),
        C(max_output_tokens)) to what its seat serves (RV(targets[].limits)), in place, after any
        repoint, as a window that changes a seat's context or output cap must. A limit the route
        does not declare stays undeclared; one that is not written as a plain number is refused.
    type: bool
    default: false
  external_hosts:
    description: Hosts that are not seats and may be targets (for example V(api.openai.com)).
    type: list
    elements: str
    default: []
  strict:
    description:
      - Fail, writing nothing, when a target would be left V(moved), V(wrong_seat) or
        V(unknown). With V(false) the problems are only reported and the moved targets are
        still rewritten.
    type: bool
    default: true
  backup_tag:
    description: The tag in the backup's name.
    type: str
    default: routes
  backup_date:
    description: The date in the backup's name (V(YYYYMMDD)); defaults to today on the target.
    type: str
notes:
  - The file is parsed with PyYAML, whose nodes carry the character offsets the in-place edits
    need. PyYAML is always installed where Ansible runs, so when the config lives in the
    operator's repository (for example C(stacks/litellm/conf/config.yaml)), run the task
    with C(delegate_to) V(localhost). On a gateway host without PyYAML the module fails saying
    so.
  - Files pulled in with LiteLLM's C(include:) are not followed; audit each one.
seealso:
  - module: llmfleet.seats.gateway_smoke
"""

EXAMPLES = r"""
- name: Repoint the gateway after fv-ml1 moved to 10.251/16
  llmfleet.seats.gateway_routes:
    path: "{{ playbook_dir }}/../stacks/litellm/conf/config.yaml"
    rewrite: true
    backup_tag: renumber
    seats:
      - name: char-rp
        host: 10.251.50.54
        port: 8016
        served_model_names: [char-rp, char-rp-thinking]
        previous_host: 10.250.50.54
      - name: scalar-judge
        host: 10.251.50.54
        port: 8030
        previous_host: 10.250.50.54
  delegate_to: localhost

- name: Audit only
  llmfleet.seats.gateway_routes:
    path: /opt/litellm/config.yaml
    seats: "{{ gateway_seats }}"
    external_hosts: [api.openai.com]
  check_mode: true
"""

RETURN = r"""
targets:
  description: Every target in the file, judged after any rewrite (as it would be in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: V(api_base) or V(pass_through).
      type: str
    where:
      description: Its place in the file, for example V(model_list[3]).
      type: str
    route:
      description: The route's C(model_name), or the pass-through C(path).
      type: str
    model:
      description: The route's C(litellm_params.model) (V(null) for pass-through targets).
      type: str
    line:
      description: Line of the value in the file.
      type: int
    target:
      description: The URL as written.
      type: str
    status:
      description:
        - V(ok), V(moved), V(wrong_seat), V(unknown), V(external), V(unresolved), V(no_key),
          V(wrong_key) or V(over_limit).
      type: str
    model_info:
      description: The token limits the route declares in C(model_info) (C(max_input_tokens), C(max_tokens), C(max_output_tokens)), as written.
      type: dict
    limits:
      description: For a target judged against its seat, the most each limit may say for that seat; V(null) otherwise.
      type: dict
    route_key:
      description:
        - For an V(api_base), how the route sends its key. V(null) (none), V(environment) (an
          C(os.environ/) reference) or V(literal) (written in the file; its value is not returned).
      type: str
    seat:
      description: The seat it points at (or should point at), else V(null).
      type: str
    new_target:
      description: For V(moved), the URL it should have.
      type: str
    detail:
      description: Why it has this status.
      type: str
  sample:
    - kind: pass_through
      where: pass_through_endpoints[0]
      route: /judge/score
      model: null
      line: 41
      target: http://10.251.50.54:8030/score
      status: ok
      seat: scalar-judge
      new_target: null
      detail: seat scalar-judge
      model_info: {}
      limits: null
    - kind: api_base
      where: model_list[2]
      route: char-rp
      model: hosted_vllm/char-rp
      line: 17
      target: http://10.251.50.54:8016/v1
      status: over_limit
      seat: char-rp
      new_target: null
      detail: model_info.max_input_tokens 131072 is more than seat char-rp serves (max_model_len 32768)
      model_info: {max_input_tokens: 131072}
      limits: {max_input_tokens: 32768, max_tokens: 32768, max_output_tokens: 8192}
rewrites:
  description:
    - The targets repointed (or that would be, in check mode), and with O(rewrite_limits) the
      limits set (C(kind) V(model_info), C(where) ending in the limit's name, C(old) and C(new) the
      numbers).
  returned: always
  type: list
  elements: dict
  sample:
    - where: pass_through_endpoints[0]
      kind: pass_through
      route: /judge/score
      line: 41
      old: http://10.250.50.54:8030/score
      new: http://10.251.50.54:8030/score
problems:
  description: How many targets are left V(moved), V(wrong_seat), V(unknown), V(no_key), V(wrong_key) or V(over_limit).
  returned: always
  type: int
  sample: 0
backup_file:
  description: The backup written before the rewrite, else V(null).
  returned: always
  type: str
  sample: /opt/litellm/config.yaml.bak-20261005-routes
"""

import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._gateway.litellm_config import (
    check_routes,
)

try:
    import yaml
except ImportError:
    yaml = None
    YAML_IMPORT_ERROR = traceback.format_exc()
else:
    YAML_IMPORT_ERROR = None


def yaml_nodes(text):
    # The pure-Python loader: its marks count characters of `text`, which the edits rely on.
    return yaml.compose(text, Loader=yaml.SafeLoader)


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "seats": {
                "type": "list", "elements": "dict", "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "host": {"type": "str", "required": True},
                    "port": {"type": "int", "required": True},
                    "served_model_names": {"type": "list", "elements": "str", "default": []},
                    "previous_host": {"type": "str"},
                    "previous_port": {"type": "int"},
                    "api_key": {"type": "str", "no_log": True},
                    "max_model_len": {"type": "int"},
                    "max_new_tokens": {"type": "int", "no_log": False},
                },
            },
            "scope_hosts": {"type": "list", "elements": "str", "default": []},
            "rewrite": {"type": "bool", "default": False},
            "rewrite_limits": {"type": "bool", "default": False},
            "external_hosts": {"type": "list", "elements": "str", "default": []},
            "strict": {"type": "bool", "default": True},
            "backup_tag": {"type": "str", "default": "routes"},
            "backup_date": {"type": "str"},
        },
        supports_check_mode=True,
    )
    if yaml is None:
        module.fail_json(msg=missing_required_lib(
            "PyYAML", reason="to read the LiteLLM config (or run the task with"
            " delegate_to: localhost on a copy of the config)"), exception=YAML_IMPORT_ERROR)
    params = module.params
    with operator_errors(module):
        result, failure = check_routes(params["path"], params["seats"], yaml_nodes, params["rewrite"],
                                       params["external_hosts"], params["strict"], params["backup_tag"],
                                       params["backup_date"] or time.strftime("%Y%m%d"),
                                       module.check_mode, module.no_log_values.add, params["scope_hosts"],
                                       params["rewrite_limits"])
    if failure:
        module.fail_json(msg=failure, **result)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
