"""The attention backend each modelled vLLM release runs a model with (attention.py), as
kv_budget reports it: the first backend of the card's priority list that serves the model, the
block an MLA backend forces before 0.18, and the refusals in vLLM's terms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import (
    KVSizingError,
    evaluate_kv_budget,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "model_configs"
EIGHT_G = "8G"  # vLLM's own spelling: 8 * 2**30


def config(name):
    return json.loads((FIXTURES / (name + ".json")).read_text())


def test_before_0_18_the_mla_backend_forces_its_block_size():
    def block(version, gpu, **options):
        return evaluate_kv_budget(config("deepseek-v2-lite"), 8192, EIGHT_G, vllm_version=version, gpu=gpu,
                                  **options)["block_size"]
    assert (block("0.17.1", "h100"), block("0.18.1", "h100")) == (64, 16), "FlashMLA, then FlashAttention MLA"
    assert block("0.17.1", "b200") == 64 and block("0.14.1", "b200") == 128, "FlashInfer MLA from 0.15, CUTLASS before"
    assert block("0.17.1", "a100") == 16
    assert block("0.11.2", "h100", block_size=128) == 128 and block("0.10.2", "h100", block_size=128) == 64


def mla_pick(model_config, version, **options):
    result = evaluate_kv_budget(model_config, 32768, EIGHT_G, vllm_version=version, **options)
    return result["attention_backend"], result["block_size"]


def test_from_0_18_an_mla_model_takes_the_first_backend_that_serves_it():
    wide = config("deepseek-v2-lite")  # 512 + 64: the 576-wide latent heads the fast kernels need
    narrow = dict(wide, kv_lora_rank=256, qk_rope_head_dim=32)
    for version in ("0.18.1", "0.26.0", "0.33.0"):
        assert mla_pick(wide, version) == ("FLASH_ATTN_MLA", 16)
        assert mla_pick(wide, version, kv_cache_dtype="fp8") == ("FLASHMLA", 64)
        # a --block-size FlashMLA cannot split, or heads it has no kernel for: Triton MLA
        assert mla_pick(wide, version, kv_cache_dtype="fp8", block_size=16) == ("TRITON_MLA", 16)
        assert mla_pick(narrow, version) == mla_pick(narrow, version, gpu="b200") == ("TRITON_MLA", 16)
    # FlashInfer MLA takes 192-wide nope heads from 0.19; before, B200 falls to CUTLASS MLA
    nope_192 = dict(wide, qk_nope_head_dim=192)
    assert mla_pick(nope_192, "0.18.1", gpu="b200") == ("CUTLASS_MLA", 128)
    assert mla_pick(nope_192, "0.19.1", gpu="b200") == ("FLASHINFER_MLA", 32)


def test_from_0_11_to_0_17_an_mla_model_runs_the_preselected_or_first_valid_backend_at_the_forced_block():
    wide = config("deepseek-v2-lite")  # 128-wide nope heads
    # Hopper: FlashAttention MLA (FlashMLA for an fp8 cache), in the 64-token blocks forced for FlashMLA
    assert mla_pick(wide, "0.17.1") == ("FLASH_ATTN_MLA", 64)
    assert mla_pick(wide, "0.11.2", kv_cache_dtype="fp8") == ("FLASHMLA", 64)
    # Blackwell: CUTLASS MLA preselected to 0.14; from 0.15 FlashInfer MLA for 128-wide nope heads
    assert mla_pick(wide, "0.14.1", gpu="b200") == ("CUTLASS_MLA", 128)
    assert mla_pick(wide, "0.15.1", gpu="b200") == ("FLASHINFER_MLA", 64)
    assert mla_pick(dict(wide, qk_nope_head_dim=192), "0.15.1", gpu="b200") == ("CUTLASS_MLA", 128)
    assert mla_pick(wide, "0.17.1", gpu="a100") == ("TRITON_MLA", 16)
    # every MLA backend takes only 576-wide latent heads; Triton MLA, Ampere's, no fp8 cache
    with pytest.raises(KVSizingError) as refused:
        evaluate_kv_budget(dict(wide, kv_lora_rank=256, qk_rope_head_dim=32), 32768, EIGHT_G, seat="s",
                           vllm_version="0.17.1")
    assert str(refused.value) == ("seat s: kv_lora_rank + qk_rope_head_dim: expected the 576-wide latent heads "
                                  "every MLA attention backend of vLLM 0.17.1 takes, got 288")
    with pytest.raises(KVSizingError) as refused:
        evaluate_kv_budget(wide, 32768, EIGHT_G, seat="s", vllm_version="0.17.1", gpu="a100", kv_cache_dtype="fp8")
    assert str(refused.value) == ("seat s: kv_cache_dtype: expected a KV cache dtype an MLA attention backend of "
                                  "vLLM 0.17.1 takes on this card (auto, bfloat16), got 'fp8'")


def test_0_10_picks_backends_case_by_case_and_its_kernels_refuse_what_they_cannot_run():
    eighty = dict(config("qwen3-8b"), head_dim=80)
    assert backend("qwen3-8b", "0.10.2", gpu="b200") == "FLASHINFER"
    assert backend("qwen3-8b", "0.10.2", gpu="a100") == "FLASH_ATTN"
    assert backend(eighty, "0.10.2", gpu="a100") == "FLEX_ATTENTION", "no FlashAttention kernel for 80-wide heads"
    assert backend("gpt-oss-20b", "0.10.2", gpu="a100", kv_cache_dtype="fp8") == "TRITON_ATTN"
    assert backend("qwen3-8b", "0.10.2", kv_cache_dtype="fp8") == "FLASH_ATTN", "FA3 on Hopper"
    with pytest.raises(KVSizingError) as refused:
        evaluate_kv_budget(config("qwen3-8b"), 8192, EIGHT_G, seat="s", vllm_version="0.10.2", gpu="a100",
                           kv_cache_dtype="fp8")
    assert str(refused.value) == ("seat s: kv_cache_dtype: expected a KV cache dtype FLASH_ATTN, the backend vLLM "
                                  "0.10.2 runs this model with on this card, takes (auto), got 'fp8'")
    with pytest.raises(KVSizingError) as refused:
        evaluate_kv_budget(eighty, 8192, EIGHT_G, seat="s", vllm_version="0.10.2", gpu="a100", block_size=32)
    assert str(refused.value) == ("seat s: block_size: expected 16, the one block FLEX_ATTENTION (the backend vLLM "
                                  "0.10.2 runs this model with) takes, got 32")


def test_each_release_takes_the_cache_dtypes_its_cli_offers_and_a_backend_serves():
    def refusal(version, **options):
        with pytest.raises(KVSizingError) as refused:
            evaluate_kv_budget(config("qwen3-8b"), 8192, EIGHT_G, seat="s", vllm_version=version, **options)
        return str(refused.value)
    assert refusal("0.10.2", kv_cache_dtype="bfloat16") == (
        "seat s: kv_cache_dtype: expected one of auto, fp8, fp8_e4m3, fp8_e5m2 (vLLM 0.10.2's choices), got 'bfloat16'")
    assert refusal("0.17.1", kv_cache_dtype="float16").startswith(
        "seat s: kv_cache_dtype: expected one of auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2 (vLLM 0.17.1's choices)")
    assert refusal("0.12.0", mamba_ssm_cache_dtype="float16") == (
        "seat s: mamba_ssm_cache_dtype: expected one of auto, float32 (vLLM 0.12.0's choices), got 'float16'")
    # the CLI offers bfloat16 from 0.11, but no attention backend lists it before 0.15
    assert refusal("0.14.1", kv_cache_dtype="bfloat16") == (
        "seat s: kv_cache_dtype: expected a KV cache dtype an attention backend of vLLM 0.14.1 takes (bfloat16 "
        "comes in 0.15), got 'bfloat16'")
    assert backend("qwen3-8b", "0.15.1", kv_cache_dtype="bfloat16") == "FLASH_ATTN"
    assert backend("qwen3-8b", "0.18.1", kv_cache_dtype="float16") == "FLASH_ATTN"


def test_no_mla_backend_takes_an_fp8_e5m2_cache_from_0_18():
    with pytest.raises(KVSizingError) as refused:
        evaluate_kv_budget(config("deepseek-v2-lite"), 32768, EIGHT_G, seat="s", vllm_version="0.26.0",
                           kv_cache_dtype="fp8_e5m2")
    assert str(refused.value) == ("seat s: kv_cache_dtype: expected a KV cache dtype an MLA attention backend of "
                                  "vLLM 0.26.0 takes (auto, bfloat16, fp8, fp8_e4m3), got 'fp8_e5m2'")


def backend(model_config, version, **options):
    model_config = config(model_config) if isinstance(model_config, str) else model_config
    return evaluate_kv_budget(model_config, 8192, EIGHT_G, vllm_version=version, **options)["attention_backend"]


def test_from_0_11_the_backend_is_the_first_of_the_cards_priority_list_that_serves_the_model():
    # gpt-oss's attention sinks: FlashAttention has them on Hopper only, FlashInfer on RTX PRO
    # (SM120) from 0.28 and on Hopper from 0.30, Triton everywhere
    assert [backend("gpt-oss-20b", version, gpu="rtx-pro-6000") for version in ("0.27.1", "0.28.0")] == \
        ["TRITON_ATTN", "FLASHINFER"]
    assert [backend("gpt-oss-20b", version, kv_cache_dtype="fp8_e5m2") for version in ("0.17.1", "0.22.1", "0.30.0")] \
        == ["FLASH_ATTN", "TRITON_ATTN", "FLASHINFER"], "FA3 takes no e5m2 cache from 0.22"
    assert [backend("gpt-oss-20b", version, gpu="a100", kv_cache_dtype="fp8") for version in ("0.11.2", "0.18.1")] \
        == ["TRITON_ATTN", "TRITON_ATTN"], "FlashInfer has no sinks on Ampere, FlashAttention none off Hopper"
    # FlashInfer serves heads of 64, 128, 256 (512 from 0.22): an 80-wide head on B200 is FlashAttention's,
    # from 0.12 (before, its heads are a list without 80)
    eighty = dict(config("qwen3-8b"), head_dim=80)
    assert [backend(eighty, version, gpu="b200") for version in ("0.11.2", "0.12.0")] == ["TRITON_ATTN", "FLASH_ATTN"]
    assert backend("qwen3-8b", "0.33.0", gpu="b200", kv_cache_dtype="fp8") == "FLASHINFER"
