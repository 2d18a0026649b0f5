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


RESERVED = ("Initial free memory 78.1 GiB, reserved %s GiB memory for KV Cache as specified by "
            "kv_cache_memory_bytes config and skipped memory profiling.")
TP_LOG = "\n".join([
    "(APIServer pid=1) INFO 12-02 05:47:50 [api_server.py:1] vLLM server version 0.33.0, serving model /m",
    "(EngineCore pid=20) (Worker_TP0 pid=31) INFO 12-02 05:47:55 [gpu_worker.py:1] " + RESERVED % "9.68",
    "(EngineCore pid=20) (Worker_TP1 pid=32) INFO 12-02 05:47:55 [gpu_worker.py:1] " + RESERVED % "%s", ""])


def test_a_tensor_parallel_seat_is_gated_on_every_rank_s_own_kv_line():
    from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log
    seat = dict(SEAT, gpus=["GPU-a", "GPU-b"], kv_cache_memory_bytes=10388766720)
    boot = parse_boot_log(TP_LOG % "9.68")
    assert boot["worker_reserved_kv_gib"] == {"Worker_TP0": "9.68", "Worker_TP1": "9.68"}
    rank = [g for g in vllm.boot_log_gates(seat, boot) if g["gate"] == "kv_reserved_per_rank"]
    assert rank and rank[0]["ok"], rank
    short = [g for g in vllm.boot_log_gates(seat, parse_boot_log(TP_LOG % "4.5")) if g["gate"] == "kv_reserved_per_rank"]
    assert not short[0]["ok"] and "Worker_TP1 (4.5)" in short[0]["detail"]
    lost = parse_boot_log("\n".join(line for line in (TP_LOG % "9.68").splitlines() if "TP1" not in line))
    detail = [g for g in vllm.boot_log_gates(seat, lost) if g["gate"] == "kv_reserved_per_rank"][0]
    assert not detail["ok"] and "Worker_TP1 (no line)" in detail["detail"]
    assert not [g for g in vllm.boot_log_gates(SEAT, boot) if g["gate"] == "kv_reserved_per_rank"], "TP=1: none"


def test_models_gate_wants_every_name_with_the_planned_length():
    ok = vllm.models_gate(SEAT, {"data": [{"id": "voices", "max_model_len": 40960}]})
    assert ok["ok"]
    short = vllm.models_gate(SEAT, {"data": [{"id": "voices", "max_model_len": 8192}]})
    assert not short["ok"] and "voices (8192)" in short["detail"]
    assert not vllm.models_gate(SEAT, None)["ok"]
