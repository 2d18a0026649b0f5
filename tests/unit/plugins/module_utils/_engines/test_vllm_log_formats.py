# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The boot logs an operator meets beyond the rendered fixtures: vLLM's V0 engine (0.5 ... 0.10),
Ray's nested worker prefixes, a speculative draft model's own context line, and every spelling
of an OOM with where in the boot it happened. The lines have the shapes V0 prints (its weights,
block and concurrency lines and its worker prefixes, as operators' logs show them); the figures
are this test's own."""
from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._engines import vllm
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log

V0_TP2 = """\
INFO 07-17 23:40:01 api_server.py:495] vLLM API server version 0.5.2
INFO 07-17 23:40:02 llm_engine.py:174] Initializing an LLM engine (v0.5.2) with config: model='/models/l3', tensor_parallel_size=2
(VllmWorkerProcess pid=6923) INFO 07-17 23:41:16 model_runner.py:559] Loading model weights took 7.4812 GB
INFO 07-17 23:41:16 model_runner.py:559] Loading model weights took 7.4812 GB
INFO 07-17 23:41:28 distributed_gpu_executor.py:56] # GPU blocks: 20011, # CPU blocks: 4096
INFO 07-17 23:41:28 distributed_gpu_executor.py:60] Maximum concurrency for 8192 tokens per request: 39.08x
INFO 07-17 23:41:30 model_runner.py:847] Capturing the model for CUDA graphs.
INFO 07-17 23:41:40 model_runner.py:1000] Graph capturing finished in 10 secs.
INFO:     Application startup complete.
"""


def test_v0_weights_blocks_and_concurrency():
    boot = parse_boot_log(V0_TP2)
    assert boot["version"] == "0.5.2"
    assert boot["model_weights_gib"] == 7.4812, "V0 says GB and means GiB"
    assert boot["num_gpu_blocks"] == 20011 and boot["kv_cache_tokens"] is None, "V0 printed blocks, not tokens"
    assert (boot["max_concurrency"], boot["max_model_len"]) == (39.08, 8192)
    assert boot["ready"] and boot["oom_events"] == 0
    later = parse_boot_log("INFO 01-02 03:04:05 [gpu_model_runner.py:1] Model loading took 0.47 GB and 3.2 seconds\n")
    assert later["model_weights_gib"] == 0.47


RESERVED = ("Initial free memory 78.1 GiB, reserved 9.68 GiB memory for KV Cache as specified by "
            "kv_cache_memory_bytes config and skipped memory profiling.")
RAY_TP2 = "\n".join([
    "(APIServer pid=1) INFO 10-01 12:00:00 [api_server.py:1] vLLM server version 0.11.0, serving model /m",
    "(EngineCore_0 pid=77) INFO 10-01 12:00:01 [config.py:1] Using max model len 32768",
    "(EngineCore_0 pid=77) INFO 10-01 12:00:01 [config.py:1] Using max model len 4096",
    "(EngineCore_0 pid=77) (RayWorkerWrapper pid=901) INFO 10-01 12:00:09 [gpu_worker.py:276] " + RESERVED,
    "(EngineCore_0 pid=77) (RayWorkerWrapper pid=902) INFO 10-01 12:00:09 [gpu_worker.py:276] " + RESERVED, ""])


def test_ray_workers_nested_prefixes_each_rank_and_the_target_model_s_context():
    boot = parse_boot_log(RAY_TP2)
    assert boot["worker_reserved_kv_gib"] == {"RayWorkerWrapper pid=901": "9.68", "RayWorkerWrapper pid=902": "9.68"}
    assert boot["max_model_len"] == 32768, "the draft model's 4,096 is its own, not the seat's"
    seat = {"name": "q", "gpus": ["GPU-a", "GPU-b"], "kv_cache_memory_bytes": 10388766720, "kv_cache_tokens": 1,
            "max_concurrency": 1.0, "max_model_len": 32768}
    rank = [g for g in vllm.boot_log_gates(seat, boot) if g["gate"] == "kv_reserved_per_rank"][0]
    assert rank["ok"], rank
    one = parse_boot_log("\n".join(RAY_TP2.splitlines()[:-1]))  # the last worker's line lost
    assert not [g for g in vllm.boot_log_gates(seat, one) if g["gate"] == "kv_reserved_per_rank"][0]["ok"]


HEAD = ("(APIServer pid=1) INFO 10-01 12:00:00 [api_server.py:1] vLLM server version 0.33.0, serving model /m\n"
        "(EngineCore pid=20) INFO 10-01 12:00:01 [config.py:1] Using max model len 32768\n")
WEIGHTS = "(EngineCore pid=20) INFO 10-01 12:00:05 [model_runner.py:428] Model loading took 7.63 GiB memory and 2.1 seconds\n"
KV = ("(EngineCore pid=20) INFO 10-01 12:00:07 [kv_cache_utils.py:1] GPU KV cache size: 58,240 tokens, "
      "Maximum concurrency for 32,768 tokens per request: 1.78x\n")
GRAPHS = "(EngineCore pid=20) INFO 10-01 12:00:09 [model_runner.py:1163] Graph capturing finished in 2 secs, took 0.50 GiB\n"
READY = "(APIServer pid=1) INFO:     Application startup complete.\n"
TORCH_OOM = ("(EngineCore pid=20) ERROR 10-01 12:00:08 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. "
             "Tried to allocate 76.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 0 bytes is free.\n")
ACCELERATOR_OOM = "(EngineCore pid=20) ERROR 10-01 12:00:30 [core.py:1] torch.AcceleratorError: CUDA error: out of memory\n"
ECHO = "(EngineCore pid=20) ERROR 10-01 12:00:30 [core.py:1] RuntimeError: Worker failed with error 'CUDA out of memory.'\n"
AUTOTUNER = "(EngineCore pid=20) WARNING 10-01 12:00:31 [autotuner.py:1] [Autotuner]: OOM detected, falling back to default tactic\n"


def test_every_oom_spelling_counts_once_with_where_it_happened():
    cases = {
        "weights": HEAD + TORCH_OOM,
        "profile": HEAD + WEIGHTS + TORCH_OOM,
        "graph capture": HEAD + WEIGHTS + KV + TORCH_OOM,
        "runtime": HEAD + WEIGHTS + KV + GRAPHS + READY + ACCELERATOR_OOM + ECHO,
    }
    for phase, log in cases.items():
        boot = parse_boot_log(log)
        assert (boot["oom_events"], boot["oom_phases"]) == (1, [phase]), (phase, boot["oom_events"], boot["oom_phases"])
    tuned = parse_boot_log(HEAD + WEIGHTS + KV + GRAPHS + READY + AUTOTUNER + AUTOTUNER)
    assert (tuned["autotuner_oom_fallbacks"], tuned["oom_phases"]) == (2, ["runtime", "runtime"])
    seat = {"name": "q", "gpus": ["GPU-a"], "kv_cache_memory_bytes": 1, "kv_cache_tokens": 1, "max_concurrency": 1.0,
            "max_model_len": 32768}
    no_oom = [g for g in vllm.boot_log_gates(seat, parse_boot_log(cases["graph capture"])) if g["gate"] == "no_oom"][0]
    assert not no_oom["ok"] and no_oom["measured"]["phases"] == ["graph capture"]
