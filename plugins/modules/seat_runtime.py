#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_runtime
short_description: Start, stop or remove one seat with its runtime
version_added: 0.1.0
description:
  - Runs one seat from the files M(llmfleet.seats.seat_files) wrote in its project directory,
    with the seat's runtime (V(compose) - C(docker compose up), C(stop), C(down); V(systemd) -
    C(systemctl link), C(enable) and C(restart) of its unit, C(stop), C(disable --now)). The
    rebalance role starts, stops and brings seats back through it, so it names no runtime
    itself.
  - A systemd seat is restarted only when its files differ from those it was last started
    with (or its unit is not active).
  - With O(state=started) and O(wait_timeout), returns once the seat is healthy (its
    healthcheck passes) and fails when it exits, turns unhealthy, or is not healthy in time.
  - O(state=dormant) keeps a compose seat that another seat replaces (a model swap) as that
    seat's fallback - its container stopped and recreated in the C(created) state with the
    C(io.llmfleet.dormant) label naming O(replaced_by) and no restart policy, from its own files
    and a C(compose.dormant.yaml) laid over them. O(state=started) wakes it from its own files
    alone; O(state=absent) removes it.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is started or stopped; RV(changed) says whether it would be.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  project_dir:
    description: The seat's project directory (its files, named by the seat).
    type: path
    required: true
  state:
    description:
      - V(started) creates or recreates the seat from its files and starts it; V(stopped) stops
        it and keeps it; V(dormant) keeps it stopped as the fallback of O(replaced_by); V(absent)
        removes it (its files stay).
    type: str
    choices: [started, stopped, dormant, absent]
    required: true
  replaced_by:
    description: With O(state=dormant), the seat that takes this one's place (its label's value).
    type: str
  wait_timeout:
    description: With O(state=started), seconds to wait for the seat to be healthy; 0 returns at once.
    type: int
    default: 0
  runtime:
    description: The seat's runtime (a plan seat's C(runtime)).
    type: str
    choices: [compose, systemd]
    default: compose
  docker_host:
    description: The Docker engine to use; defaults to E(DOCKER_HOST), then the local socket.
    type: str
"""

EXAMPLES = r"""
- name: Start gen-small and wait until it is healthy
  llmfleet.seats.seat_runtime:
    project_dir: /opt/docker/compose/gen-small
    state: started
    wait_timeout: 1800
  become: true

- name: Stop the seats that move, before anything boots
  llmfleet.seats.seat_runtime:
    project_dir: "/opt/docker/compose/{{ item }}"
    state: stopped
  loop: [coder, voices]
  become: true

- name: Keep the old char-rp seat, stopped, to fall back on after its model swap
  llmfleet.seats.seat_runtime:
    project_dir: /opt/docker/compose/meromero-charrp
    state: dormant
    replaced_by: gemma4-charrp
  become: true
"""

RETURN = r"""
changed:
  description: Whether the seat's container was created, recreated, started, stopped, put to sleep or removed.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker, DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import RUNTIMES, run_seat


def main():
    module = AnsibleModule(
        argument_spec={
            "project_dir": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["started", "stopped", "dormant", "absent"], "required": True},
            "replaced_by": {"type": "str"},
            "wait_timeout": {"type": "int", "default": 0},
            "runtime": {"type": "str", "choices": sorted(RUNTIMES), "default": "compose"},
            "docker_host": {"type": "str"},
        },
        required_if=[("state", "dormant", ["replaced_by"])],
        supports_check_mode=True,
    )
    params = module.params
    with operator_errors(module):
        try:
            changed, problem = run_seat(params["runtime"], params["state"], params["project_dir"],
                                        Docker(params["docker_host"]), params["wait_timeout"],
                                        module.check_mode, params["replaced_by"])
        except DockerError as exc:
            changed, problem = False, str(exc)
    if problem:
        module.fail_json(msg="%s: %s" % (params["project_dir"], problem), changed=changed)
    module.exit_json(changed=changed)


if __name__ == "__main__":
    main()
