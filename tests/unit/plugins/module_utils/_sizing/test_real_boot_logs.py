"""Public vLLM boot logs of several releases, whose models' configs are public
(tests/unit/fixtures/vllm_logs/real_boots.json, each entry with its source): at the KV memory
the log printed, rounded as printed, the modelled arithmetic of that log's release must bracket
the printed "GPU KV cache size" and "Maximum concurrency"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import evaluate_kv_budget

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BOOTS = json.loads((FIXTURES / "vllm_logs" / "real_boots.json").read_text())
GIB = 1 << 30


def _config(boot):
    return json.loads((FIXTURES / "model_configs" / ("%s.json" % boot["config"])).read_text())


def _at(boot, budget):
    return evaluate_kv_budget(_config(boot), boot["printed"]["max_model_len"], budget, vllm_version=boot["vllm_version"],
                              allow_long_max_model_len=True, **boot["options"])


@pytest.mark.parametrize("boot", BOOTS, ids=["%s %s" % (b["vllm_version"], b["model"]) for b in BOOTS])
def test_the_modelled_release_brackets_what_the_log_printed(boot):
    printed = boot["printed"]
    # "Available KV cache memory: X GiB" rounds to two decimals: X - 0.005 <= memory < X + 0.005
    low = _at(boot, math.ceil((printed["available_kv_gib"] - 0.005) * GIB))
    high = _at(boot, math.floor((printed["available_kv_gib"] + 0.005) * GIB) - 1)
    assert low["boot_ok"] and high["boot_ok"], (low["boot_error"], high["boot_error"])
    assert low["kv_cache_tokens"] <= printed["tokens"] <= high["kv_cache_tokens"], (
        boot["source"], low["kv_cache_tokens"], printed["tokens"], high["kv_cache_tokens"])
    assert low["max_concurrency_exact"] - 0.005 <= printed["concurrency"] <= high["max_concurrency_exact"] + 0.005, (
        boot["source"], low["max_concurrency_exact"], printed["concurrency"], high["max_concurrency_exact"])
    if "num_gpu_blocks" in printed:
        assert low["num_blocks"] <= printed["num_gpu_blocks"] <= high["num_blocks"], boot["source"]


def test_each_log_is_a_public_one_of_a_modelled_release():
    for boot in BOOTS:
        assert boot["source"].startswith("https://") and boot["lines"], boot
        printed = boot["printed"]
        assert any("Available KV cache memory: %s GiB" % printed["available_kv_gib"] in line for line in boot["lines"])
        assert any("GPU KV cache size: {:,} tokens".format(printed["tokens"]) in line for line in boot["lines"])
        assert any("version %s" % boot["vllm_version"] in line for line in boot["lines"])
