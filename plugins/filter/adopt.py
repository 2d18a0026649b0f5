# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Adopting a running host on the controller: what adopt_info read, as a starting inventory.
A thin wrapper over plugins/module_utils/_adopt; the filter has its own YAML doc."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.inventory import adopted_inventory
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


class FilterModule:
    def filters(self):
        return {"adopted_inventory": operator_errors(adopted_inventory)}
