# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Lookups on llmfleet.seats.gpu_info results (live or snapshots) and Beszel GPU readings.

Thin wrappers over plugins/module_utils/_cards/snapshot.py; each filter has its own YAML doc.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import (
    ReadingError,
    beszel_gpus,
    beszel_mib,
    free_mib_by_uuid,
    gpu_summary,
    gpus_by_uuid,
    seat_mib,
)
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


class FilterModule:
    def filters(self):
        return {
            "beszel_mib": operator_errors(beszel_mib, ReadingError),
            "beszel_gpus": operator_errors(beszel_gpus, ReadingError),
            "gpu_by_uuid": operator_errors(gpus_by_uuid, ReadingError),
            "gpu_free_mib_by_uuid": operator_errors(free_mib_by_uuid, ReadingError),
            "gpu_seat_mib": operator_errors(seat_mib, ReadingError),
            "gpu_summary": operator_errors(gpu_summary, ReadingError),
        }
