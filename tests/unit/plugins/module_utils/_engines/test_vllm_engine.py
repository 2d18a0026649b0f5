"""The vLLM engine's own gates: its startup check before boot, the served models and the boot
log's KV line after it, each against the plan's numbers."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import failed, summary
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import vllm

SEAT = {"name": "voices", "engine": "vllm", "gpus": ["GPU-0"], "footprint_mib": 30000,
        "gpu_memory_utilization": 0.33, "container": "vllm-voices", "port": 8014,
        "served_model_names": ["voices"], "max_model_len": 40960,
        "kv_cache_memory_bytes": 6979321856, "kv_cache_tokens": 47328, "max_concurrency": 1.16}


def test_boot_log_gates_compare_the_plan_exactly():
    boot = {"kv_cache_memory_bytes": 6979321856, "kv_cache_memory_bytes_exact": True,
            "reserved_kv_gib": "6.5", "kv_cache_tokens": 47328, "max_concurrency": 1.16,
            "max_model_len": 40960, "oom_events": 0, "autotuner_oom_fallbacks": 0, "errors": []}
    assert all(g["ok"] for g in vllm.boot_log_gates(SEAT, boot))
    off_by_one = dict(boot, kv_cache_tokens=47327)
    wrong = failed(vllm.boot_log_gates(SEAT, off_by_one))
    assert [g["gate"] for g in wrong] == ["kv_cache_tokens"]
    assert "47,327 tokens; the plan computed 47,328" in wrong[0]["detail"]
    oom = dict(boot, oom_events=2, errors=["torch.OutOfMemoryError: CUDA out of memory"])
    assert "2 OOM event(s)" in summary(vllm.boot_log_gates(SEAT, oom))


def test_boot_log_gates_say_a_line_is_missing_rather_than_print_none():
    details = {g["gate"]: g["detail"] for g in vllm.boot_log_gates(SEAT, {"oom_events": 0})}
    assert details["kv_reserved"] == "the boot log has no such line; the plan pins %d bytes" \
        % SEAT["kv_cache_memory_bytes"]
    assert details["kv_cache_tokens"].startswith("the boot log has no such line; the plan computed")
    assert details["max_concurrency"].startswith("the boot log has no such line; the plan computed")
    assert "None" not in " ".join(details.values())


def test_models_gate_wants_every_name_with_the_planned_length():
    ok = vllm.models_gate(SEAT, {"data": [{"id": "voices", "max_model_len": 40960}]})
    assert ok["ok"]
    short = vllm.models_gate(SEAT, {"data": [{"id": "voices", "max_model_len": 8192}]})
    assert not short["ok"] and "voices (8192)" in short["detail"]
    assert not vllm.models_gate(SEAT, None)["ok"]
