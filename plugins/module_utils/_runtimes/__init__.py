# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The runtime seam: how a seat is run on its host (a docker compose project, or a systemd unit
that runs its container). ``seam`` declares the interface, ``RUNTIMES`` who implements it (each checked against it as it is registered);
docs/architecture.md has the table.

May import: _common, _engines (a seat's launch arguments), _plan (what a plan seat is).
"""

from __future__ import annotations

import os

from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RUNTIME, RenderError

# each runtime as the seam hands it out: its own names, and the seam's default for each it leaves out
RUNTIMES = {runtime.NAME: RUNTIME.implement(runtime) for runtime in (compose, systemd)}
DEFAULT_RUNTIME = compose.NAME


def runtime_of(seat):
    """The runtime module of a plan seat (its ``runtime``, compose by default)."""
    name = (seat if isinstance(seat, dict) else {}).get("runtime") or DEFAULT_RUNTIME
    if name not in RUNTIMES:
        raise RenderError("seat %s: runtime: expected one of %s, got %r"
                          % (seat.get("name"), ", ".join(sorted(RUNTIMES)), name))
    return RUNTIMES[name]


def seat_file_texts(seat, project_dir, host=None, secrets=None):
    """A plan seat's files as its runtime renders them for ``project_dir`` (what seat_files
    writes there), each ``{"name", "path", "content", "mode"}`` with the mode a new file gets, so
    an operator's own playbook can write them with ansible.builtin.copy. ``secrets``: the values
    of its launch.secret_environment (the seat_secrets filter's, for this seat)."""
    if not isinstance(project_dir, str) or not os.path.isabs(project_dir):
        raise RenderError("project_dir: expected the seat's directory as an absolute path, got %r" % (project_dir,))
    runtime = runtime_of(seat)
    modes = runtime.files(seat.get("name"))
    return [{"name": name, "path": os.path.join(project_dir, name), "content": text, "mode": "%04o" % modes[name]}
            for name, text in sorted(runtime.render(seat, host, secrets, project_dir).items())]


def run_seat(runtime, state, project_dir, docker, wait_timeout=0, check_mode=False, replaced_by=None):
    """``(changed, problem or None)`` of starting, stopping, removing one seat or keeping it
    dormant (``state="dormant"``, as the fallback of the seat ``replaced_by``)."""
    module = RUNTIMES[runtime]
    if state == "started":
        return module.start(project_dir, docker, wait_timeout or None, check_mode)
    if state == "stopped":
        return module.stop(project_dir, docker, check_mode)
    if state == "dormant":
        return module.sleep(project_dir, docker, replaced_by, check_mode)
    return module.remove(project_dir, docker, check_mode)


def running(states):
    """The seats whose container exists and is not stopped (running, restarting or paused, as
    ``docker ps`` lists them), sorted."""
    return sorted(seat for seat, state in states.items()
                  if state.split(" ", 1)[0].rstrip(":") in ("running", "restarting", "paused"))


def dormant_seats(docker):
    """``{seat: the seat that replaced it}`` of every dormant seat on the host, whatever its runtime."""
    found = {}
    for module in RUNTIMES.values():
        found.update(module.dormant(docker))
    return found


def seat_states(docker):
    """``{seat: state}`` of every seat any runtime runs on the host (a systemd seat's unit
    says more than its container, which compose's reading lists too)."""
    states = {}
    for module in RUNTIMES.values():
        states.update(module.states(docker))
    return states
