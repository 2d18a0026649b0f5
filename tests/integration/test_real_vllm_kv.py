"""kv_budget's CPU platform against the real vLLM 0.32 (its CPU build): each configuration boots
the real engine (all in one process, as ``vllm serve`` boots it but without the API server) and
the capacity line it prints, or the refusal it stops with, must be the one the collection
predicted, to the token and the hundredth. The log is read by the collection's own boot-log
parser, so that reader is judged by the real log as well; the engine that dies at its first
request runs as ``vllm serve``, since only the API server takes a request.

The models are tiny and made here (tests/realengine/make_tiny_model.py); what differs between
the cases is what KV planning reads: KV heads, head size, dtype, a sliding window, the block size,
the budget against max_model_len, the context against the model's window.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log, reserved_matches
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import kv_budget
from support.real_vllm import GQA_MODEL as GQA, HEAD16_MODEL, boot_engines, serve, stop_engine, tiny_model, tiny_models

pytestmark = [pytest.mark.realengine, pytest.mark.slow]

MHA_FP32 = {"model_type": "llama", "num_attention_heads": 2, "num_key_value_heads": 2,
            "dtype": "float32"}
SLIDING = {"model_type": "mistral", "hidden_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 2, "sliding_window": 256}
# Gemma 3's interleaving: sliding and full layers in groups of their own (the hybrid allocator)
INTERLEAVED = {"model_type": "gemma3_text", "hidden_size": 256, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 1, "sliding_window": 128,
               "layer_types": ["sliding_attention", "full_attention"] * 2}
WIDE_FP16 = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2,
             "num_key_value_heads": 2, "head_dim": 128, "dtype": "float16"}

# (id, model, max_model_len, --kv-cache-memory-bytes, kv_budget options)
CASES = [
    ("gqa-bf16", GQA, 2048, 64 << 20, {}),
    ("mha-fp32", MHA_FP32, 3072, 48 << 20, {}),
    ("sliding-window", SLIDING, 4096, 8 << 20, {}),
    ("wide-fp16-block-64", WIDE_FP16, 2048, 32 << 20, {"block_size": 64}),
    ("interleaved-sliding", INTERLEAVED, 4096, 16 << 20, {}),
    ("budget-below-one-request", GQA, 4096, 1 << 20, {}),
    ("context-above-window", GQA, 8192, 64 << 20, {}),
]


def _flags(max_model_len, budget, options):
    flags = ["--max-model-len", str(max_model_len), "--kv-cache-memory-bytes", str(budget)]
    for name, value in options.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


@pytest.fixture(scope="module")
def booted(tmp_path_factory):
    """What each case's boot printed: every case booted once, one after another."""
    tiny_models([case[1] for case in CASES] + [HEAD16_MODEL])  # this module's models, made in one run
    return boot_engines([dict(id=case_id, model=str(tiny_model(spec)), max_model_len=max_model_len,
                              kv_cache_memory_bytes=budget, **options)
                         for case_id, spec, max_model_len, budget, options in CASES],
                        tmp_path_factory.mktemp("real-kv"))


@pytest.mark.parametrize("case_id,spec,max_model_len,budget,options", CASES, ids=[c[0] for c in CASES])
def test_the_real_engine_prints_the_predicted_kv(case_id, spec, max_model_len, budget, options, booted):
    config = json.loads((tiny_model(spec) / "config.json").read_text())
    predicted = kv_budget(config, max_model_len, budget, gpu="cpu", vllm_version="0.32.0",
                          enforce_eager=True, **options)
    log = booted[case_id]
    live = parse_boot_log(log)
    if predicted["boot_ok"]:
        assert predicted["capacity_line"] in log, (case_id, predicted["capacity_line"], log[-3000:])
        assert (live["kv_cache_tokens"], live["max_concurrency"], live["max_model_len"], live["kv_cache_pool"]) \
            == (predicted["kv_cache_tokens"], predicted["max_concurrency"], max_model_len, "CPU")
        # the engine's own reserved line (the exact bytes are the API server's "non-default args")
        assert reserved_matches(budget, live) and live["version"] == "0.32.0"
        assert not live["errors"]
    else:
        assert live["kv_cache_tokens"] is None, (case_id, log[-3000:])
        assert predicted["boot_error"] in log, (case_id, predicted["boot_error"], log[-3000:])
        assert any(predicted["boot_error"].split(".")[0] in error for error in live["errors"]), live["errors"]


def test_an_engine_that_dies_at_its_first_request_is_read_as_dead(tmp_path):
    """Heads of 16 boot (KV planning takes them) and kill the engine at the first request: the
    collection predicts both, its log reader sees the boot ready, then the engine dead, and the
    API server exits 0 behind it."""
    model = tiny_model(HEAD16_MODEL)
    predicted = kv_budget(json.loads((model / "config.json").read_text()), 2048, 16 << 20, gpu="cpu",
                          vllm_version="0.32.0", enforce_eager=True)
    assert predicted["boot_ok"] and predicted["first_request_error"]
    boot = serve(model, _flags(2048, 16 << 20, {}), until="ready", log_dir=tmp_path)
    try:
        ready = parse_boot_log(boot.log)
        assert ready["ready"] and ready["version"] == "0.32.0" and ready["model"] == str(model), boot.log[-3000:]
        assert ready["kv_cache_tokens"] == predicted["kv_cache_tokens"]
        status = _chat_status(boot.url, str(model))
        exit_code = boot.proc.wait(timeout=120)  # the API server goes down with its engine
        dead = parse_boot_log(boot.log)
    finally:
        stop_engine(boot)
    assert status >= 500
    # a clean exit: why a vLLM seat's restart policy must be one that restarts one (the plan
    # refuses on-failure), or nothing brings the seat back
    assert exit_code == 0, boot.log[-3000:]
    assert dead["engine_dead"] and not dead["ready"], boot.log[-3000:]
    assert any(predicted["first_request_error"] in error for error in dead["errors"]), dead["errors"]


def _chat_status(url, model):
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, ConnectionError):
        return 599  # the server closed the connection as it went down
