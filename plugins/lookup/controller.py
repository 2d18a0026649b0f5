# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: controller
author:
  - llmfleet.seats contributors (!UNKNOWN)
version_added: 0.1.0
short_description: The controller running the play, as the rebalance lock records it
description:
  - Without O(run), returns the controller's host name and the C(ansible-playbook) process running
    the play, with its start time, the boot it runs in and a digest of its command line. The
    rebalance lock records them, so a later run that finds the lock taken on the same controller
    can tell whether any process of its holder is still alive.
  - With O(run) (a record this lookup returned to another run), returns whether that run's
    C(ansible-playbook) still runs and which of its processes are left (its C(ansible-playbook)
    and its workers). Ansible forks each worker without exec and the worker leaves the process
    group and session at once, so neither finds it and killing the group leaves it running; it
    keeps the command line, so it is found by that and its start. When C(ansible-playbook) is gone,
    the workers are waited for, up to O(wait) seconds.
options:
  run:
    description: The controller record of the run to look for, as the lock holds it.
    type: dict
  wait:
    description: With O(run), how many seconds to wait for the workers of a run whose C(ansible-playbook) is gone.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Record who runs this rebalance
  ansible.builtin.set_fact:
    controller: "{{ query('llmfleet.seats.controller') | first }}"

- name: Wait up to two minutes for what is left of the run that held the lock
  ansible.builtin.set_fact:
    holder: "{{ query('llmfleet.seats.controller', run=lock.held_by.controller, wait=120) | first }}"
"""

RETURN = r"""
_raw:
  description:
    - Without O(run), one dict with C(host), C(pid) (the ansible-playbook process), C(started)
      (its start, in clock ticks since boot), C(boot_id) and C(command) (a SHA-256 of its command
      line, which may hold secrets given with -e).
    - With O(run), one dict with C(alive) (its ansible-playbook runs), C(processes) (C(pid),
      C(name), C(role) V(main) or V(worker), for each process of it left) and C(waited_s).
  type: list
  elements: dict
"""

import multiprocessing
import os
import socket

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.lock import (
    controller_identity,
    wait_for_run_to_end,
)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        # Templating runs in a worker forked from ansible-playbook, or in ansible-playbook itself.
        parent = multiprocessing.parent_process()
        own_pid = parent.pid if parent else os.getpid()
        run = self.get_option("run")
        if run is None:
            return [controller_identity(socket.gethostname(), own_pid)]
        wait = self.get_option("wait")
        if wait < 0:
            raise AnsibleLookupError("llmfleet.seats.controller: wait: expected seconds >= 0, got %d" % wait)
        return [wait_for_run_to_end(run, own_pid, wait)]
