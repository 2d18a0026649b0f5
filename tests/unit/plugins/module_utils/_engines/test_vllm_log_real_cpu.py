"""The log reader over logs the real vLLM 0.32 printed (its CPU build, booted by the realengine
tests; tests/unit/fixtures/vllm_logs/real-0.32.0-cpu/, paths shortened): what a gate reads from
a boot that served, a boot refused at admission, a context over the model's window, and an
engine that died at its first request."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "vllm_logs" / "real-0.32.0-cpu"


def _read(name):
    return parse_boot_log((LOGS / ("%s.log" % name)).read_text())


def test_a_boot_that_served_reads_whole():
    boot = _read("ready-served")
    assert (boot["version"], boot["model"], boot["kv_cache_pool"]) == ("0.32.0", "/models/tiny", "CPU")
    assert (boot["kv_cache_tokens"], boot["max_concurrency"], boot["max_model_len"]) == (131072, 64.0, 2048)
    # the worker's "Explicitly set (0.06/23.54) GiB", made exact by the CLI's echo of the flag
    assert (boot["kv_cache_memory_bytes"], boot["kv_cache_memory_bytes_exact"]) == (64 << 20, True)
    assert boot["startup_complete"] and boot["server_address"] == "http://127.0.0.1:48041"
    # the test stopped it afterwards: a log that ends in a shutdown is not a ready seat
    assert boot["shutdown"] and not boot["ready"] and not boot["engine_dead"]
    assert boot["errors"] == [], "a client's 404 is no boot error"


def test_a_budget_below_one_request_is_the_admission_refusal():
    boot = _read("admission-failed")
    assert boot["admission_check"] == {"max_model_len": 4096, "needed_gib": 0.0, "available_gib": 0.0,
                                       "estimated_max_model_len": 1920, "kv_cache_tokens": None}
    assert boot["kv_cache_tokens"] is None and boot["engine_dead"] and not boot["ready"]
    assert boot["kv_cache_memory_bytes"] == 1 << 20
    assert boot["cause"].startswith("ValueError: To serve at least one request"), boot["errors"]


def test_a_context_over_the_window_is_the_config_refusal():
    boot = _read("context-above-window")
    assert boot["version"] == "0.32.0" and boot["kv_cache_tokens"] is None and not boot["ready"]
    assert any(error.startswith("ValueError: User-specified max_model_len (8192) is greater than the derived "
                                "max_model_len (max_position_embeddings=4096.0") for error in boot["errors"])


def test_an_engine_dead_at_its_first_request_is_dead_and_names_why():
    boot = _read("engine-died-at-first-request")
    assert boot["startup_complete"] and boot["engine_dead"] and not boot["ready"]
    assert boot["kv_cache_tokens"] == 131072
    assert boot["cause"] == "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"
    # the engine's dumps of the request it died on are its data, not an error line of the boot
    assert not any(error.startswith("Dumping") for error in boot["errors"])
    assert all(len(error) < 400 for error in boot["errors"]), boot["errors"]
