# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The inventory on the controller: its problems before anything reads a host, and the seats'
secrets (the values for a seat's .env, and the seats without them for everything else). Thin
wrappers over plugins/module_utils/_plan; each filter has its own YAML doc."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import inventory_problems
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import seat_secrets, without_secrets
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


class FilterModule:
    def filters(self):
        return {
            "inventory_problems": operator_errors(inventory_problems),
            "seat_secrets": operator_errors(seat_secrets),
            "without_secrets": operator_errors(without_secrets),
        }
