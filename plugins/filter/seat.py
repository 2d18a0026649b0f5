# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The inventory on the controller: its problems before anything reads a host, the seats'
secrets (the values for a seat's .env, and the seats without them for everything else), and a
plan's seats as the gateway's route audit takes them. Thin
wrappers over plugins/module_utils/_plan; each filter has its own YAML doc."""

from __future__ import annotations

import functools
from pathlib import Path

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import inventory_problems
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import (
    gateway_seats,
    seat_secrets,
    without_secrets,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.variables import VARIABLE_NAME_RE
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


# The collection's root, wherever it is installed: plugins/filter/ is two levels down.
_COLLECTION = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def known_variables():
    """Every llmfleet_* and seat_* name the collection reads or documents: its roles' argument
    specs, defaults and tasks, its playbooks, and the tables of the inventory's reference
    (docs/inventory.md).
    A variable added there is known here at once."""
    names = set()
    for pattern in ("roles/*/meta/argument_specs.yml", "roles/*/defaults/*.yml", "roles/*/tasks/*.yml",
                    "playbooks/*.yml"):
        for path in _COLLECTION.glob(pattern):
            names.update(VARIABLE_NAME_RE.findall(path.read_text(encoding="utf-8")))
    # the reference's tables, whose first cell names a variable (its prose may quote a typo)
    for path in _COLLECTION.glob("docs/inventory.md"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("| `"):
                names.update(VARIABLE_NAME_RE.findall(line.split("|")[1]))
    return frozenset(names)


def host_inventory_problems(host, *args, **kwargs):
    """inventory_problems with the collection's own variable names known."""
    return inventory_problems(host, *args, known_variables=known_variables(), **kwargs)


class FilterModule:
    def filters(self):
        return {
            "gateway_seats": operator_errors(gateway_seats),
            "inventory_problems": operator_errors(host_inventory_problems),
            "seat_secrets": operator_errors(seat_secrets),
            "without_secrets": operator_errors(without_secrets),
        }
