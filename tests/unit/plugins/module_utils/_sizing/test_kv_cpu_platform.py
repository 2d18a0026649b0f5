"""kv_budget's CPU platform (``gpu: cpu``): vLLM 0.32's CPU build, which the realengine tests
boot for every case here that they can (tests/integration/test_real_vllm_kv.py). These hold its
rules without the engine: the block of 128, one batch in flight, its serving batch defaults, the
pool's name, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import KVSizingError, kv_budget

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "model_configs"
# the realengine tests' GQA model: 2 layers, 1 KV head of 64, bf16 (512 bytes a token)
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64,
        "max_position_embeddings": 4096, "vocab_size": 322, "dtype": "bfloat16"}


def cpu(config, max_model_len, budget, **options):
    return kv_budget(config, max_model_len, budget, gpu="cpu", vllm_version="0.32.0", enforce_eager=True, **options)


def test_the_pool_is_the_cpus_in_blocks_of_128_with_the_cpu_batch_defaults():
    sized = cpu(TINY, 2048, 64 << 20)
    assert sized["capacity_line"] == ("CPU KV cache size: 131,072 tokens, Maximum concurrency for 2,048 "
                                      "tokens per request: 64.00x")
    assert (sized["block_size"], sized["bytes_per_block"], sized["attention_backend"]) == (128, 65536, "CPU_ATTN")
    assert (sized["max_num_batched_tokens"], sized["max_num_seqs"]) == (2048, 128)
    assert sized["first_request_error"] is None


def test_a_sliding_window_holds_one_batch_in_flight_on_the_cpu():
    """The CPU platform turns asynchronous scheduling off: a sliding layer keeps its window and one
    batch (2,048 tokens), not two as on a GPU; the same budget serves more requests."""
    sliding = dict(TINY, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=256)
    on_cpu = cpu(sliding, 4096, 8 << 20)
    assert on_cpu["groups"][0]["pages_per_request"] == -(-(255 + 2048) // 128) + 1
    same_blocks = kv_budget(sliding, 4096, 8 << 20, gpu="h100", vllm_version="0.32.0", block_size=128,
                            max_num_batched_tokens=2048)
    assert on_cpu["max_concurrency"] > same_blocks["max_concurrency"]


def test_heads_the_cpu_kernel_does_not_compute_boot_and_fail_at_the_first_request():
    sized = cpu(dict(TINY, head_dim=16), 2048, 16 << 20)
    assert sized["boot_ok"]
    assert sized["first_request_error"] == "Unsupported CPU attention configuration: head_dim=16"


@pytest.mark.parametrize("options,expected", [
    ({"vllm_version": "0.33.0"}, "vllm_version: expected 0.32.0: vLLM's CPU platform is modelled for that release"),
    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype: expected auto on vLLM's CPU platform (an fp8 cache there needs AVX-512"),
    ({"gpu": "tpu"}, "gpu: expected one of a100, b200, h100, h200, l40s, rtx-pro-6000, cpu"),
])
def test_what_the_cpu_platform_refuses_is_one_line(options, expected):
    arguments = dict({"gpu": "cpu", "vllm_version": "0.32.0"}, **options)
    with pytest.raises(KVSizingError) as refused:
        kv_budget(TINY, 2048, 64 << 20, **arguments)
    assert str(refused.value).startswith(expected), str(refused.value)


def test_mla_models_are_not_modelled_on_the_cpu():
    config = json.loads((FIXTURES / "deepseek-v2-lite.json").read_text())
    with pytest.raises(KVSizingError, match="gpu: expected a GPU profile: MLA and Mamba models on vLLM's CPU"):
        cpu(config, 2048, 1 << 30)
