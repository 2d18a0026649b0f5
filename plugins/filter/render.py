# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A plan seat's files as Jinja data, for a playbook of the operator's own to write with
ansible.builtin.copy. A thin wrapper over plugins/module_utils/_runtimes (the render seat_files
runs); the filter has its own YAML doc."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import seat_file_texts
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


class FilterModule:
    def filters(self):
        return {"seat_file_texts": operator_errors(seat_file_texts)}
