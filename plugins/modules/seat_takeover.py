#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_takeover
short_description: Find, stop and bring back what runs outside the collection in a seat's place
version_added: 0.2.0
description:
  - Reads every container on the host (the collection's seats and anything else) and finds the
    ones started outside the collection that hold a planned seat's compose project, container
    name, port or GPU memory (a hand-started compose project of the same name, say), and the
    seat ports a process outside every container listens on.
  - Warns when the plan publishes a running seat on other addresses than it runs on now (a seat
    on every interface now and on C(127.0.0.1) after the window is lost to a gateway on another host).
  - A seat whose inventory says C(take_over=true) has them stopped first in the window and
    brought back by a rollback exactly as they ran; any other such container refuses the
    window before anything is touched, naming the container and what it holds.
  - A container is removed only when the seat's own project or container name would replace it
    anyway, and only when its compose files are on the host to bring it back from; otherwise it
    is stopped, and renamed aside when its name is the seat's.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is stopped, removed, renamed or started; C(changed) says whether it would be.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  state:
    description:
      - V(planned) reads the host and refuses the conflicts no seat takes over (read-only).
      - V(stopped) stops (and removes or renames) the containers in O(take_over).
      - V(restored) brings them back as they ran before the window, one at a time in the order they last
        started, each running (healthy when it had a healthcheck, serving when it runs an engine's server)
        before the next.
      - V(released), after a window that passed, removes a taken-over compose container (its files
        stay) and keeps any other stopped, with restart policy C(no).
    type: str
    choices: [planned, stopped, restored, released]
    default: planned
  host:
    description: The inventory's name for the host, for the messages.
    type: str
    required: true
  seats:
    description: With O(state=planned), the host's plan seats (C(seat_plan)'s C(plan.seats)).
    type: list
    elements: dict
    default: []
  take_over:
    description: With the other states, the RV(take_over) list of the V(planned) call (as journaled).
    type: list
    elements: dict
    default: []
  wait_timeout:
    description: With O(state=restored), seconds each container may take to run (and be healthy).
    type: int
    default: 1800
  docker_host:
    description: The Docker engine to ask; defaults to E(DOCKER_HOST), then the local socket.
    type: str
"""

EXAMPLES = r"""
- name: Find what runs in the seats' places
  llmfleet.seats.seat_takeover:
    host: "{{ inventory_hostname }}"
    seats: "{{ seat_plan_result.seats }}"
  register: takeover

- name: Stop it before the seats boot
  llmfleet.seats.seat_takeover:
    host: "{{ inventory_hostname }}"
    state: stopped
    take_over: "{{ takeover.take_over }}"
"""

RETURN = r"""
containers:
  description: Every container on the host as read at the end of the call (name, image, state, health, ports, compose project).
  returned: always
  type: list
  elements: dict
take_over:
  description:
    - With O(state=planned), each container to stop first, with the seats it blocks (C(seats)), what it holds
      (C(holds)), whether it ran (C(was_running)), how it steps aside (C(step_aside) - C(stop), C(remove) or C(rename))
      and the engine whose server it runs (C(engine), null for any other).
  returned: always
  type: list
  elements: dict
actions:
  description: What was done, one line each.
  returned: always
  type: list
  elements: str
problems:
  description: With O(state=restored), what could not be brought back as it was (the module does not fail for them).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import takeover
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.host import (
    host_containers, listening_sockets, socket_holders)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["planned", "stopped", "restored", "released"], "default": "planned"},
            "host": {"type": "str", "required": True},
            "seats": {"type": "list", "elements": "dict", "default": []},
            "take_over": {"type": "list", "elements": "dict", "default": []},
            "wait_timeout": {"type": "int", "default": 1800},
            "docker_host": {"type": "str"},
        },
        supports_check_mode=True,
    )
    params, check = module.params, module.check_mode
    result = {"changed": False, "take_over": [], "actions": [], "problems": []}
    with operator_errors(module):
        docker = Docker(params["docker_host"])
        if params["state"] == "planned":
            containers = host_containers(docker)
            for warning in takeover.exposure_changes(params["host"], params["seats"], containers):
                module.warn(warning)
            entries, problems = takeover.conflicts(params["host"], params["seats"], containers,
                                                   listening_sockets(), holders=socket_holders)
            if problems:
                result["problems"] = problems
                module.fail_json(msg="%d problem(s) with what runs outside the collection in the seats' places:\n- %s"
                                 % (len(problems), "\n- ".join(problems)), **result)
            result["take_over"] = takeover.engines_served(entries, docker)
        elif params["state"] == "stopped":
            result["changed"], result["actions"], problems = takeover.step_aside(params["take_over"], docker, check)
            if problems:
                result.update(problems=problems, containers=host_containers(docker))
                module.fail_json(msg="could not stop what the seats take over: %s" % "; ".join(problems), **result)
        elif params["state"] == "restored":
            result["changed"], result["actions"], result["problems"] = takeover.bring_back(
                params["take_over"], docker, params["wait_timeout"], check)
        else:
            result["changed"], result["actions"], problems = takeover.release(params["take_over"], docker, check)
            if problems:
                result.update(problems=problems, containers=host_containers(docker))
                module.fail_json(msg="could not retire what the seats took over: %s" % "; ".join(problems), **result)
        result["containers"] = host_containers(docker)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
