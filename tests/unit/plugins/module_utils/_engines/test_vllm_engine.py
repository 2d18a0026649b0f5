"""The vLLM engine's own gates: its startup check before boot, the served models and the boot
log's KV line after it, each against the plan's numbers."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import failed, summary
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import vllm
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import models_gate

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
    ok = models_gate(SEAT, {"data": [{"id": "voices", "max_model_len": 40960}]})
    assert ok["ok"]
    short = models_gate(SEAT, {"data": [{"id": "voices", "max_model_len": 8192}]})
    assert not short["ok"] and "voices (8192)" in short["detail"]
    assert not models_gate(SEAT, None)["ok"]


@pytest.mark.parametrize("arg, flag, why", [
    ("--config", "--config", "flags that cannot override the plan (--config"),
    ("--config=/srv/vllm.yaml", "--config", "flags that cannot override the plan (--config"),
    ("--hf-overrides.max_position_embeddings", "--hf-overrides", "cannot override the plan"),
    ("--hf_overrides={}", "--hf-overrides", "cannot override the plan"),
    ("--generation", "--generation-config", "cannot override the plan"),
    ("-dcp", "--decode-context-parallel-size", "cannot override the plan"),
    ("--max_model_len", "--max-model-len", "flags the plan does not set"),
    ("--max-model-len=", "--max-model-len", "flags the plan does not set"),
    ("--max-model", "--max-model-len", "flags the plan does not set"),
    ("--max-model-len.x", "--max-model-len", "flags the plan does not set"),
    ("-tp=2", "-tp", "flags the plan does not set"),
    ("--api-key=sk-never-shown", "--api-key", "no secret on the command line"),
    ("--api_key", "--api-key", "no secret on the command line"),
    ("--hf-token", "--hf-token", "no secret on the command line"),
    ("--upstream-secret=x", "--upstream-secret", "no secret on the command line"),
    ("--Max-Model-Len", "--Max-Model-Len", "a flag in lowercase words"),
    ("-max-model-len", "-max-model-len", "with two dashes"),
    ("\u2014max-model-len", "\u2014", "a typographic dash"),
    (" --enforce-eager", " ", "a typographic dash or a space"),
])
def test_an_extra_arg_that_overrides_or_breaks_the_plan_is_refused_naming_its_flag(arg, flag, why):
    problem = vllm.extra_arg_problem(arg)
    assert problem is not None and problem[0] == flag and why in problem[1], problem
    assert "sk-never-shown" not in repr(problem)


@pytest.mark.parametrize("arg", ["--enable-prefix-caching", "--config-format", "--model-impl", "--ssl-keyfile",
                                 "--compilation-config.level", "-O3", "-q", "-1", "0.5", "hermes", "--max-log-len=10"])
def test_flags_and_values_the_plan_does_not_own_pass(arg):
    assert vllm.extra_arg_problem(arg) is None
