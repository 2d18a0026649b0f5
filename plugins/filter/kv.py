# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""vLLM KV sizing and byte sizes as Jinja filters.

Thin wrappers over plugins/module_utils/_sizing (kv, model_config) and _common/sizes (the same
functions the kv_budget module runs); each filter has its own YAML doc.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common import sizes as _sizes
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import KV_FACTOR, KV_ROUND_TO
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import evaluate_kv_budget, kv_budget
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    load_model_config,
    published_max_model_len as _published_max_model_len,
)
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


def kv_cache_bytes(config, max_model_len, kv_factor=KV_FACTOR, kv_round_to=KV_ROUND_TO,
                   seat=None, **options):
    """The sizing rule's budget per GPU, in bytes."""
    return kv_budget(config, max_model_len, None, kv_factor, kv_round_to, seat,
                     **options)["kv_cache_memory_bytes"]


def kv_cache_tokens(config, max_model_len, kv_cache_memory_bytes, seat=None, **options):
    """What vLLM logs as "GPU KV cache size" for this budget."""
    return evaluate_kv_budget(load_model_config(config, seat=seat), max_model_len, kv_cache_memory_bytes,
                              seat=seat, **options)["kv_cache_tokens"]


def published_max_model_len(config, seat=None):
    """The model's native context window (no rope/YaRN extension)."""
    return _published_max_model_len(load_model_config(config, seat=seat), seat=seat)


def to_bytes(value):
    """A size string (22GiB, 5.5GiB, 512MiB, 8G, 8g) or a byte count, as an integer."""
    return _sizes.to_bytes(value, "to_bytes")


def human_bytes(value, unit=None, precision=2):
    """Bytes as a binary size: 22 GiB, 5.5 GiB, 512 MiB."""
    return _sizes.human_bytes(_sizes.to_bytes(value, "human_bytes"), unit=unit,
                              precision=precision)


class FilterModule:
    def filters(self):
        return {
            "kv_budget": operator_errors(kv_budget),
            "kv_cache_bytes": operator_errors(kv_cache_bytes),
            "kv_cache_tokens": operator_errors(kv_cache_tokens),
            "published_max_model_len": operator_errors(published_max_model_len),
            "to_bytes": operator_errors(to_bytes),
            "human_bytes": operator_errors(human_bytes),
        }
