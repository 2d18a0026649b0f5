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
  - Returns the controller's host name and the process id of the C(ansible-playbook) running
    the play. The rebalance lock records both, so a later run that finds the lock taken on the
    same controller can tell whether its holder is still alive.
options: {}
"""

EXAMPLES = r"""
- name: Record who runs this rebalance
  ansible.builtin.set_fact:
    controller: "{{ query('llmfleet.seats.controller') | first }}"
"""

RETURN = r"""
_raw:
  description: One dict with C(host) (the host name) and C(pid) (the ansible-playbook process).
  type: list
  elements: dict
"""

import multiprocessing
import os
import socket

from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        # Templating runs in a worker forked from ansible-playbook, or in ansible-playbook itself.
        parent = multiprocessing.parent_process()
        return [{"host": socket.gethostname(), "pid": parent.pid if parent else os.getpid()}]
