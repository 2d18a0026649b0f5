# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The runtime seam, declared in code: ``RUNTIME`` names what a runtime module defines, each with
its parameters or type and, where a runtime may leave it out, the default it gets. ``RUNTIMES``
(this package) hands every runtime out through ``RUNTIME.implement``, and a conformance test asks
each registered runtime.

Its files: ``files``, ``MODE_OPTIONS``, ``render``, ``redact``, ``validate``. Running the seat:
``start``, ``stop``, ``remove``, ``sleep`` (each ``(changed, problem or None)``; in check mode
nothing is done and ``changed`` says whether it would be). What runs: ``states``, ``dormant``,
``log``.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.seam import Constant, Required, Seam


class RenderError(ValueError):
    """A seat that cannot be rendered safely; the message names the seat and field."""


def _sleep(_project_dir, _docker, _replaced_by, _check_mode):
    """Keep the seat's container stopped, labelled as the fallback of the seat ``replaced_by``
    (a model swap), so that a rollback can start it again; a runtime that cannot keep one refuses."""
    return False, "this runtime keeps no seat dormant: retire the seat (llmfleet_retire) instead"


def _dormant(_docker):
    """``{seat: the seat that replaced it}`` for every seat it keeps dormant on the host."""
    return {}


RUNTIME = Seam("runtime", {
    "NAME": Constant(str, doc="the plan seat's runtime: value"),
    "MODE_OPTIONS": Constant(dict, {}, doc="file name -> the seat_files option that sets its mode "
                                           "(env_mode, compose_mode)"),
    "files": Required("name", doc="{file name: mode}: the seat's files in its project directory and the mode each "
                                  "gets when it is created (a file that exists keeps its own)"),
    "render": Required("seat", "host", "secrets", "project_dir",
                       doc="{file name: text} for a plan seat in that directory, deterministic (RenderError); "
                           "secrets hold the values of its launch.secret_environment, which only a file its "
                           "owner alone reads may carry"),
    # required: a default that shows the text would show a new runtime's secrets in every diff
    "redact": Required("name", "text", "before",
                       doc="that file's text with every secret replaced, marked where it differs from before "
                           "(what a diff shows)"),
    "validate": Required("project_dir", "staged", "docker",
                         doc="why the runtime refuses the staged files ({file name: path}), or None"),
    "start": Required("project_dir", "docker", "wait_timeout", "check_mode",
                      doc="wait_timeout (or None) waits until the seat is healthy"),
    "stop": Required("project_dir", "docker", "check_mode"),
    "remove": Required("project_dir", "docker", "check_mode"),
    "sleep": _sleep,
    "dormant": _dormant,
    "states": Required("docker", doc='{seat: "running (healthy)" | "running (health: starting)" | "exited: ..."} '
                       "for every seat it runs on the host"),
    "log": Required("seat", "docker", doc="the plan seat's log since its last start (what its engine's gates read)"),
})
