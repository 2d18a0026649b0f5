# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The runtime seam. A runtime is a module of this package that defines, with these names:

- ``NAME``; ``files(seat name)``: ``{file name: mode}``, the seat's files in its project
  directory and the mode each gets when it is created (a file that exists keeps its own);
- ``render(seat, host, secrets, project_dir)`` -> ``{file name: text}`` for a plan seat in that
  directory, deterministic (RenderError); ``secrets`` holds the values of the seat's ``launch.secret_environment``, which
  only a file its owner alone reads may carry; ``redact(name, text, before=None)``: that file's
  text with every secret replaced, marked where it differs from ``before`` (what a diff shows);
- ``validate(project_dir, staged, docker)``: why the runtime refuses the staged files
  (``{file name: path}``), or None;
- ``start(project_dir, docker, wait_timeout, check_mode)``, ``stop(project_dir, docker,
  check_mode)``, ``remove(project_dir, docker, check_mode)``: each ``(changed, problem or
  None)``; ``wait_timeout`` (or None) waits until the seat is healthy; in check mode nothing
  is done and ``changed`` says whether it would be;
- ``states(docker)``: ``{seat: "running (healthy)" | "running (health: starting)" |
  "exited: ..." }`` for every seat it runs on the host;
- ``log(seat, docker)``: the plan seat's log since its last start (what its engine's gates read).
"""

from __future__ import annotations


class RenderError(ValueError):
    """A seat that cannot be rendered safely; the message names the seat and field."""
