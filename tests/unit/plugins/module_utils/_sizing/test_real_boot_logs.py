"""Boot logs of several vLLM releases as other operators' engines printed them, of models whose
configs are public (tests/unit/fixtures/vllm_logs/real_boots.json, each entry saying what booted
on which card): at the KV memory the log printed, rounded as printed, the modelled arithmetic of
that log's release must bracket the printed "GPU KV cache size" and "Maximum concurrency". Where the releases' arithmetic differs
(hybrid layouts before 0.20 count the capacity line's tokens by blocks per group), 0.33's
misses the log: the entries marked ``latest_misses``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import evaluate_kv_budget
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import LATEST

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BOOTS = json.loads((FIXTURES / "vllm_logs" / "real_boots.json").read_text())
GIB = 1 << 30


def _config(boot):
    return json.loads((FIXTURES / "model_configs" / ("%s.json" % boot["config"])).read_text())


def _at(boot, budget, release):
    return evaluate_kv_budget(_config(boot), boot["printed"]["max_model_len"], budget, vllm_version=release,
                              allow_long_max_model_len=True, **boot["options"])


def _bracket(boot, release):
    """The arithmetic of ``release`` at both ends of the printed KV memory: "Available KV cache
    memory: X GiB" rounds to two decimals, X - 0.005 <= memory < X + 0.005."""
    printed = boot["printed"]
    return (_at(boot, math.ceil((printed["available_kv_gib"] - 0.005) * GIB), release),
            _at(boot, math.floor((printed["available_kv_gib"] + 0.005) * GIB) - 1, release))


IDS = ["%s %s %s" % (b["vllm_version"], b["model"], b["options"]) for b in BOOTS]


@pytest.mark.parametrize("boot", BOOTS, ids=IDS)
def test_the_modelled_release_brackets_what_the_log_printed(boot):
    printed = boot["printed"]
    low, high = _bracket(boot, boot["vllm_version"])
    assert low["boot_ok"] and high["boot_ok"], (low["boot_error"], high["boot_error"])
    assert low["kv_cache_tokens"] <= printed["tokens"] <= high["kv_cache_tokens"], (
        boot["boot"], low["kv_cache_tokens"], printed["tokens"], high["kv_cache_tokens"])
    assert low["max_concurrency_exact"] - 0.005 <= printed["concurrency"] <= high["max_concurrency_exact"] + 0.005, (
        boot["boot"], low["max_concurrency_exact"], printed["concurrency"], high["max_concurrency_exact"])
    if "num_gpu_blocks" in printed:
        assert low["num_blocks"] <= printed["num_gpu_blocks"] <= high["num_blocks"], boot["boot"]


@pytest.mark.parametrize("boot", [b for b in BOOTS if b.get("latest_misses")],
                         ids=[i for b, i in zip(BOOTS, IDS) if b.get("latest_misses")])
def test_the_newest_releases_arithmetic_misses_an_older_hybrid_boot(boot):
    low, high = _bracket(boot, LATEST)
    assert not low["kv_cache_tokens"] <= boot["printed"]["tokens"] <= high["kv_cache_tokens"], (
        "%s's arithmetic brackets this %s log too: the entry no longer shows a release's difference"
        % (LATEST, boot["vllm_version"]))


def test_the_logs_span_releases_and_layouts():
    assert len({boot["vllm_version"] for boot in BOOTS}) >= 5
    assert {"llama-3.1-8b-instruct", "gemma-3-27b-it", "gpt-oss-20b", "deepseek-v2-lite"} <= {b["config"] for b in BOOTS}
    assert any(boot["options"].get("tensor_parallel_size", 1) > 1 for boot in BOOTS)
    assert any(boot["options"].get("kv_cache_dtype") == "fp8" for boot in BOOTS)


def test_each_log_is_a_boot_of_a_modelled_release():
    for boot in BOOTS:
        assert boot["boot"].startswith("vLLM %s, " % boot["vllm_version"]) and boot["lines"], boot
        printed = boot["printed"]
        assert any("Available KV cache memory: %s GiB" % printed["available_kv_gib"] in line for line in boot["lines"])
        assert any("GPU KV cache size: {:,} tokens".format(printed["tokens"]) in line for line in boot["lines"])
        assert any("version %s" % boot["vllm_version"] in line or "LLM engine (v%s)" % boot["vllm_version"] in line
                   for line in boot["lines"]), boot["boot"]
