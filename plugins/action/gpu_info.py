# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmfleet.seats.gpu_info reading a snapshot on the controller in Ansible's own process
(plugin_utils._in_process); a live read always runs the module, on the host it reads."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.read import (
    GPU_INFO_REQUIRED_IF,
    GPU_INFO_SPEC,
    gpu_info,
)
from ansible_collections.llmfleet.seats.plugins.plugin_utils._in_process import InProcessModule


class ActionModule(InProcessModule):
    module = "llmfleet.seats.gpu_info"
    argument_spec = GPU_INFO_SPEC
    validator_options = {"required_if": GPU_INFO_REQUIRED_IF}

    @staticmethod
    def work(params, check_mode, diff):
        return gpu_info(params, check_mode)

    def runs_here(self, args):
        return self._on_controller() and args.get("source") == "snapshot"
