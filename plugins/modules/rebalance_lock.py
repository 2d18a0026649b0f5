#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: rebalance_lock
short_description: One rebalance at a time per GPU host, with the journal to undo it
version_added: 0.1.0
description:
  - Takes or releases a per-host lock file, created exclusively, that records which run holds it
    (run id, controller host and process, start time) and that run's journal, which says what
    ran before and which backups hold the files it replaced.
  - A second run finds the lock taken and fails with the holder's details, before it touches
    anything. A run whose controller process is gone (an interrupted run, a lost connection)
    leaves a stale lock; the playbooks detect that on the controller (no process of that run is
    left there, its workers included; see the P(llmfleet.seats.controller#lookup) lookup), take
    the lock over with O(force=true), and adopt the dead run's journal so that a rollback still
    returns to the state before the first run.
  - A run's modules on the host carry its run id in their environment (C(LLMFLEET_RUN_ID), which
    the rebalance role sets for every task of its window, and what they start inherits). A module
    whose controller worker was killed keeps running on the host; before a forced takeover the
    module waits up to O(takeover_wait) seconds for the holder's processes found that way, and
    fails naming them (RV(left)) if they stay.
  - The journal also says how far the window got (C(touched), the seats it stopped or booted, and
    C(gated), those that passed every gate since); a takeover returns the seats the dead run
    touched and never saw gated, for the new run to gate again.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is written; the module only reports whether the lock is free.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  path:
    description:
      - The lock file. It survives a reboot, so the journal of a run cut short is never lost.
    type: path
    default: /var/lib/llmfleet/rebalance.lock
  state:
    description:
      - V(acquired) takes the lock for O(run_id); V(journaled) merges O(journal) into the
        holder's journal; V(released) gives the lock back.
    type: str
    choices: [acquired, journaled, released]
    default: acquired
  journal:
    description: With O(state=journaled), keys to set in the run's journal (top-level replace).
    type: dict
    default: {}
  run_id:
    description: The run that takes or releases the lock.
    type: str
    required: true
  controller:
    description: The controller's host name and C(ansible-playbook) process id, recorded in the lock.
    type: dict
    default: {}
  force:
    description:
      - Take the lock even when another run holds it. Only for a holder known to be dead.
    type: bool
    default: false
  takeover_wait:
    description:
      - With O(force=true) and a lock another run holds, how many seconds to wait for that run's
        processes on this host (those whose environment carries its run id in C(LLMFLEET_RUN_ID))
        to end. The lock is not taken while any is left.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Take the rebalance lock
  llmfleet.seats.rebalance_lock:
    run_id: "{{ llmfleet_run_id }}"
    controller: {host: "{{ lookup('pipe', 'hostname') }}", pid: 4242}
  register: lock
  failed_when: false

- name: Record what the run must be able to undo
  llmfleet.seats.rebalance_lock:
    run_id: "{{ llmfleet_run_id }}"
    state: journaled
    journal:
      running_before: [gen-small, meromero-rp]

- name: Release it
  llmfleet.seats.rebalance_lock:
    run_id: "{{ llmfleet_run_id }}"
    state: released
"""

RETURN = r"""
acquired:
  description: Whether this run holds the lock now (in check mode, whether it could take it).
  returned: state=acquired
  type: bool
held_by:
  description:
    - The lock's contents when another run holds it (C(run_id), C(controller), C(started),
      C(journal)); after a forced takeover, the dead run's record.
  returned: when another run holds or held the lock
  type: dict
journal:
  description: This run's journal as it now stands in the lock.
  returned: state=acquired or state=journaled
  type: dict
interrupted:
  description:
    - After taking the lock from another run, that run's C(run_id) and C(seats), the seats its
      journal says it touched (files written, stopped, booted) and did not see pass their gates;
      V({}) when the lock was free.
  returned: state=acquired and the lock was taken
  type: dict
  sample: {run_id: 20261005T101500Z-4242, seats: [gen-small]}
left:
  description:
    - When a forced takeover was refused, the holder's processes still running on this host
      (C(pid), C(name), and C(what), its name and the module it runs where its command line says),
      after RV(waited_s) seconds.
  returned: a forced takeover refused for processes of the holder
  type: list
  elements: dict
  sample: [{pid: 40412, name: python3, what: "python3, module seat_boot"}]
waited_s:
  description: How long a refused forced takeover waited for RV(left) to end.
  returned: a forced takeover refused for processes of the holder
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import lock


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/var/lib/llmfleet/rebalance.lock"},
            "state": {"type": "str", "choices": list(lock.STATES), "default": "acquired"},
            "journal": {"type": "dict", "default": {}},
            "run_id": {"type": "str", "required": True},
            "controller": {"type": "dict", "default": {}},
            "force": {"type": "bool", "default": False},
            "takeover_wait": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    params, check = module.params, module.check_mode
    if params["takeover_wait"] < 0:
        module.fail_json(msg="takeover_wait: expected seconds >= 0, got %d" % params["takeover_wait"])
    with operator_errors(module):
        try:
            if params["state"] == "released":
                module.exit_json(changed=lock.release(params["path"], params["run_id"], check))
            if params["state"] == "journaled":
                changed, journal = lock.journal(params["path"], params["run_id"], params["journal"], check)
                module.exit_json(changed=changed, journal=journal)
            module.exit_json(**lock.acquire(params["path"], params["run_id"], params["controller"],
                                            params["force"], check, params["takeover_wait"]))
        except lock.LockError as exc:
            failure = {"msg": str(exc), "held_by": exc.held_by}
            if isinstance(exc, lock.HolderStillRuns):
                failure.update(left=exc.left, waited_s=exc.waited_s)
            if params["state"] == "acquired":
                failure["acquired"] = False
            module.fail_json(**failure)


if __name__ == "__main__":
    main()
