# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Lookups on llmfleet.seats.gpu_info results (live or snapshots) and Beszel GPU readings.

Thin wrappers over plugins/module_utils/_gpu_snapshot.py; each filter has its own YAML doc.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import (
    ReadingError,
    beszel_gpus,
    beszel_mib,
    free_mib_by_uuid,
    gpus_by_uuid,
    reading_gpus,
    seat_mib,
    summary_line,
)


def _filter(func):
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ReadingError as exc:
            raise AnsibleFilterError(str(exc))
    return run


def gpu_summary(value):
    """A line for one GPU, or a list of lines for a gpu_info result or its gpus list."""
    if isinstance(value, dict) and "gpus" not in value:
        return summary_line(value)
    return [summary_line(gpu) for gpu in reading_gpus(value, "gpu_summary")]


class FilterModule:
    def filters(self):
        return {
            "beszel_mib": _filter(beszel_mib),
            "beszel_gpus": _filter(beszel_gpus),
            "gpu_by_uuid": _filter(gpus_by_uuid),
            "gpu_free_mib_by_uuid": _filter(free_mib_by_uuid),
            "gpu_seat_mib": _filter(seat_mib),
            "gpu_summary": _filter(gpu_summary),
        }
