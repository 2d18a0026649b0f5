# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The engine seam: what kind of server a seat runs (vLLM, a fixed-size tenant, radiance). An engine says
how its seat is sized, what its launch arguments and environment are, how its boot log is read,
and which gates and probe apply after it boots; ``seam`` lists the interface, ``ENGINES`` who
implements it (each checked against the seam as it is registered).

May import: _common, _sizing.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._engines import fixed, radiance, vllm
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.seam import ENGINE

# each engine as the seam hands it out: its own names, and the seam's default for each it leaves out
ENGINES = {engine.NAME: ENGINE.implement(engine) for engine in (vllm, fixed, radiance)}


def engine_of(seat):
    """The engine module of a seat (a plan seat or a normalized inventory seat)."""
    return ENGINES[seat["engine"]]


def own_api_key(seat, secrets):
    """The key a seat's engine reads from its env file (vLLM's VLLM_API_KEY), from ``secrets``
    (seat -> {NAME: value}, the seat_secrets filter's), or None: what its endpoints want as a
    Bearer token."""
    variable = getattr(ENGINES.get(seat.get("engine")), "API_KEY_VARIABLE", None)
    own = (secrets or {}).get(seat.get("name")) if variable else None
    return own.get(variable) if isinstance(own, dict) else None


def engine_serving(argv):
    """The name of the engine whose server a process started outside the collection runs (its
    argv), or None."""
    if not isinstance(argv, list) or not all(isinstance(arg, str) for arg in argv):
        return None
    return next((name for name, engine in ENGINES.items() if engine.serves(argv)), None)
