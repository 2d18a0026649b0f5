# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The runtime seam: how a seat is run on its host (docker compose). ``seam`` lists the
interface, ``RUNTIMES`` who implements it; docs/architecture.md has the table.

May import: _common, _engines (a seat's launch arguments).
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose

RUNTIMES = {runtime.NAME: runtime for runtime in (compose,)}
DEFAULT_RUNTIME = compose.NAME


def runtime_of(seat):
    """The runtime module of a plan seat (its ``runtime``, compose by default)."""
    return RUNTIMES[(seat or {}).get("runtime") or DEFAULT_RUNTIME]
