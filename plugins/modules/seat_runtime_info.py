#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_runtime_info
short_description: The state of every seat the collection runs on a host
version_added: 0.1.0
description:
  - Asks each runtime (V(compose)) for the seats it runs on the host, by the C(io.llmfleet.seat)
    label the rendered files put on them, and says each one's state in the runtime's words.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.INFO_MODULE
options:
  docker_host:
    description: The Docker engine to ask; defaults to E(DOCKER_HOST), then the local socket.
    type: str
"""

EXAMPLES = r"""
- name: Which seats run now
  llmfleet.seats.seat_runtime_info:
  register: seats_now

- name: Show them
  ansible.builtin.debug:
    msg: "{{ seats_now.running | join(', ') }}"
"""

RETURN = r"""
seats:
  description: Every managed seat on the host (running or not) and its state.
  returned: always
  type: dict
  sample:
    gen-small: running (healthy)
    voices: "running (health: starting)"
    coder: "exited: Exited (1) 3 seconds ago"
running:
  description: The seats whose container runs (or restarts, or is paused), sorted.
  returned: always
  type: list
  elements: str
published:
  description:
    - The host port each running seat publishes now (a seat publishing one port), by seat; what
      a window repoints the gateway's routes from when the plan moves a seat to another port.
  returned: always
  type: dict
  sample: {"gen-small": 8001}
dormant:
  description:
    - Each dormant seat (kept stopped after another replaced it) and the seat that replaced it,
      as its C(io.llmfleet.dormant) label says; null where the label is not a seat name.
  returned: always
  type: dict
  sample: {"meromero-charrp": "gemma4-charrp"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.drain import running_at
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import dormant_seats, running, seat_states


def main():
    module = AnsibleModule(argument_spec={"docker_host": {"type": "str"}}, supports_check_mode=True)
    with operator_errors(module):
        docker = Docker(module.params["docker_host"])
        seats = seat_states(docker)
        published = {seat: port for seat, (_bind, port) in running_at(docker).items()}
        dormant = dormant_seats(docker)
    module.exit_json(changed=False, seats=seats, running=running(seats), published=published, dormant=dormant)


if __name__ == "__main__":
    main()
