# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The fixed engine: a tenant that takes a fixed amount of GPU memory whatever it is asked (an
ASR model, an embedder). Sized by its declared cap; its image runs its own command on its own
port; after boot it only has to be running and healthy. Every name of the seam it leaves out
takes the seam's default (seam.ENGINE)."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import fixed_footprint

NAME = "fixed"
FIELDS = frozenset({"memory_cap_bytes", "memory_boot_bytes", "container_port"})
# Its plan seat's field (_engines.fields): where its image listens, the seat's port when null.
PLAN_SEAT_FIELDS = (("launch.container_port", "port or null", None),)
SIZE_FIELDS = ("memory_cap_bytes", "memory_boot_bytes")
HOST_IPC = False
# It leaves the operator's margin free on its GPUs.
KEEPS_OWN_HEADROOM = False
EXITS_CLEAN_ON_FAULT = False


def container_name(name):
    return name


def normalize(check, where, raw, seat, defaults):
    cap = raw.get("memory_cap_bytes")
    if cap is None:
        check.fail(where, "memory_cap_bytes", "the tenant's fixed memory cap, e.g. 3840MiB", cap)
    else:
        seat["memory_cap_bytes"] = check.size(where, "memory_cap_bytes", cap, MIB)
    seat["memory_boot_bytes"] = check.size(where, "memory_boot_bytes", raw["memory_boot_bytes"], MIB) \
        if raw.get("memory_boot_bytes") is not None else None
    # The port the tenant's image listens on inside the container (vLLM's is --port).
    seat["container_port"] = check.positive_int(
        where, "container_port", raw.get("container_port", seat["port"]), 65535)


def size(seat, inventory_dir, options):
    return {"kv": None, "rule": "fixed cap", "weights_bytes": None}


def footprint(seat, sized, plateau, record, default_overhead_mib):
    return fixed_footprint(seat)


def command(seat, var):
    """The image's own command, or the one the inventory gives it."""
    return list(seat["launch"].get("command") or [])


def listen_port(seat, var):
    """Where the tenant's image listens; the host port is the seat's."""
    return str(seat["launch"].get("container_port") or seat["port"])


def plan_cells(seat):
    return "fixed cap", "-", "-"
