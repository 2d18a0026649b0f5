"""vLLM 0.33 KV arithmetic: the 8 GiB vectors, vLLM's error texts, options, and the
sizing rule's minimality and monotonicity."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import (
    KVSizingError,
    evaluate_kv_budget,
    format_gib,
    size_kv_budget,
    size_kv_for_demand,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    ModelConfigError,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "model_configs"
GIB = 1 << 30
EIGHT_G = "8G"  # vLLM's own spelling: 8 * 2**30


def config(name):
    return json.loads((FIXTURES / (name + ".json")).read_text())


def evaluate(name, max_model_len, budget=EIGHT_G, **options):
    options.setdefault("allow_long_max_model_len", True)  # the vectors run 131072 past some windows
    return evaluate_kv_budget(config(name), max_model_len, budget, **options)


# The 8 GiB vectors: what vLLM 0.33 computes with --kv-cache-memory-bytes 8G, TP=1, H100/H200 defaults.
# (model, kv dtype, block, KV B/token, bytes/block, blocks, L=32768, L=131072); a row entry is
# (tokens, concurrency) when it boots, ("FAIL", estimated length) when the admission check fails.
EIGHT_GIB_VECTORS = [
    ("qwen3-8b", "auto", 16, 147456, 2359296, 3640, (58240, 1.78), ("FAIL", 58224)),
    ("qwen3-8b", "fp8", 16, 73728, 1179648, 7281, (116496, 3.56), ("FAIL", 116480)),
    ("qwen3-30b-a3b", "auto", 16, 98304, 1572864, 5461, (87376, 2.67), ("FAIL", 87360)),
    ("qwen3-30b-a3b", "fp8", 16, 49152, 786432, 10922, (174752, 5.33), (174752, 1.33)),
    ("qwen3-32b", "auto", 16, 262144, 4194304, 2048, ("FAIL", 32752), ("FAIL", 32752)),
    ("qwen3-32b", "fp8", 16, 131072, 2097152, 4096, (65536, 2.00), ("FAIL", 65520)),
    ("llama-3.1-8b-instruct", "auto", 16, 131072, 2097152, 4096, (65536, 2.00), ("FAIL", 65520)),
    ("llama-3.1-8b-instruct", "fp8", 16, 65536, 1048576, 8192, (131072, 4.00),
     ("FAIL", 131056)),
    ("mistral-small-24b-instruct-2501", "auto", 16, 163840, 2621440, 3276, (52416, 1.60),
     ("FAIL", 52400)),
    ("mistral-small-24b-instruct-2501", "fp8", 16, 81920, 1310720, 6553, (104848, 3.20),
     ("FAIL", 104832)),
    ("glm-4.5-air", "auto", 16, 188416, 3014656, 2849, (45584, 1.39), ("FAIL", 45568)),
    ("glm-4.5-air", "fp8", 16, 94208, 1507328, 5698, (91168, 2.78), ("FAIL", 91152)),
    ("gemma-3-27b-it", "auto", 16, 507904, 1310720, 6553, ("FAIL", 14960), ("FAIL", 14960)),
    ("gemma-3-27b-it", "fp8", 16, 253952, 655360, 13107, (50045, 1.53), ("FAIL", 105152)),
    ("gpt-oss-20b", "auto", 16, 49152, 393216, 21845, (232332, 7.09), (310381, 2.37)),
    ("gpt-oss-20b", "fp8", 16, 24576, 196608, 43690, (464665, 14.18), (620762, 4.74)),
    ("deepseek-v2-lite", "auto", 16, 31104, 497664, 17260, (276160, 8.43), (276160, 2.11)),
    ("deepseek-v2-lite", "fp8", 64, 15552, 995328, 8630, (552320, 16.86), (552320, 4.21)),
    ("gemma-4-31b-it", "auto", 16, 901120, 2621440, 3276, ("FAIL", None), ("FAIL", None)),
]


@pytest.mark.parametrize("name, kv_dtype, block, per_token, per_block, blocks, short, long",
                         EIGHT_GIB_VECTORS, ids=["%s-%s" % (row[0], row[1]) for row in EIGHT_GIB_VECTORS])
def test_reference_section_8_vectors(name, kv_dtype, block, per_token, per_block, blocks,
                                     short, long):
    for length, expected in ((32768, short), (131072, long)):
        result = evaluate(name, length, kv_cache_dtype=kv_dtype)
        assert (result["block_size"], result["per_token_kv_bytes"], result["bytes_per_block"],
                result["num_blocks"]) == (block, per_token, per_block, blocks)
        if expected[0] == "FAIL":
            assert not result["boot_ok"]
            assert result["boot_error"].startswith(
                "To serve at least one request with the model's max seq len (%d)" % length)
            if expected[1] is not None:
                assert result["estimated_max_model_len"] == expected[1]
        else:
            assert result["boot_ok"], result["boot_error"]
            assert (result["kv_cache_tokens"], result["max_concurrency"]) == expected


# The hybrid 8 GiB vectors: (model, kv dtype, block, bytes/block, blocks, L=32768, L=131072); they boot
# only with max_num_seqs <= blocks, so the check runs with and without that limit.
EIGHT_GIB_HYBRID_VECTORS = [
    ("qwen3-next-80b-a3b", "auto", 576, 14155776, 606, (300869, 9.18), (335146, 2.56)),
    ("qwen3-next-80b-a3b", "fp8", 1088, 13369344, 642, (525926, 16.05), (647294, 4.94)),
    ("qwen3.5-9b", "auto", 576, 18874368, 455, (225900, 6.89), (251636, 1.92)),
    ("qwen3.5-9b", "fp8", 1088, 17825792, 481, (394035, 12.03), (484966, 3.70)),
]


@pytest.mark.parametrize("name, kv_dtype, block, per_block, blocks, short, long",
                         EIGHT_GIB_HYBRID_VECTORS, ids=["%s-%s" % (r[0], r[1]) for r in EIGHT_GIB_HYBRID_VECTORS])
def test_reference_section_8_hybrid_vectors(name, kv_dtype, block, per_block, blocks, short,
                                            long):
    for length, expected in ((32768, short), (131072, long)):
        result = evaluate(name, length, kv_cache_dtype=kv_dtype)
        assert (result["block_size"], result["bytes_per_block"], result["num_blocks"]) == \
            (block, per_block, blocks)
        assert (result["kv_cache_tokens"], result["max_concurrency"]) == expected
        assert not result["boot_ok"]
        assert result["boot_error"] == (
            "max_num_seqs (1024) exceeds available Mamba cache blocks (%d). Each decode sequence "
            "requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower "
            "max_num_seqs to at most %d or increase gpu_memory_utilization."
            % (blocks, blocks))
        assert evaluate(name, length, kv_cache_dtype=kv_dtype, max_num_seqs=blocks)["boot_ok"]
        assert evaluate(name, length, kv_cache_dtype=kv_dtype, enforce_eager=True)["boot_ok"]


def test_qwen3_next_groups_three_gdn_groups_and_one_full_group():
    groups = evaluate("qwen3-next-80b-a3b", 32768)["groups"]
    assert [(g["kind"], g["layers"], g["pages_per_request"]) for g in groups] == \
        [("mamba", 12, 3)] * 3 + [("full_attention", 12, 57)]


def test_gemma_3_groups_are_six_sliding_and_one_full():
    groups = evaluate("gemma-3-27b-it", 32768, kv_cache_dtype="fp8")["groups"]
    assert [g["layers"] for g in groups] == [9, 9, 9, 9, 8, 8, 10]
    assert [g["kind"] for g in groups] == ["sliding_window"] * 6 + ["full_attention"]
    # a sliding layer keeps window - 1 + 2 x 8192 in-flight tokens, plus one block
    assert groups[0]["pages_per_request"] == -(-(1023 + 16384) // 16) + 1


def test_gemma_4_global_layers_double_their_block_to_match_the_sliding_page():
    groups = evaluate("gemma-4-31b-it", 32768)["groups"]
    assert [(g["kind"], g["layers"], g["block_size"]) for g in groups] == \
        [("sliding_window", 10, 16)] * 5 + [("full_attention", 10, 32)]


def test_kv_sharing_layers_cost_nothing():
    # Gemma-4-E4B: 42 layers, the last 18 read earlier layers' caches: 24 layers own one.
    result = evaluate("gemma-4-e4b-it", 32768)
    assert sum(g["layers"] for g in result["groups"]) == 24
    assert result["per_token_kv_bytes"] == 20 * 2 * 2 * 256 * 2 + 4 * 2 * 2 * 512 * 2


def test_the_null_block_makes_an_exact_fit_fail_with_vllms_text():
    result = evaluate("qwen3-32b", 32768)
    assert result["num_blocks"] == 2048 == result["blocks_per_request"]
    assert result["boot_error"] == (
        "To serve at least one request with the model's max seq len (32768), (8.0 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (8.0 GiB). Based on the "
        "available memory, the estimated maximum model length is 32752. Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
        "decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    one_more_block = 8 * GIB + result["bytes_per_block"]
    assert evaluate("qwen3-32b", 32768, one_more_block)["boot_ok"]


def test_a_budget_below_one_block_has_no_memory_for_the_cache():
    result = evaluate("qwen3-8b", 4096, 1000)
    assert result["boot_error"].startswith("No available memory for the cache blocks.")
    assert result["num_blocks"] == 0


def test_tensor_parallel_divides_kv_heads_but_not_mla():
    assert evaluate("qwen3-32b", 32768, tensor_parallel_size=2)["kv_cache_tokens"] == 65536
    assert evaluate("qwen3-32b", 32768, tensor_parallel_size=8)["kv_cache_tokens"] == 262144
    assert evaluate("llama-3.1-8b-instruct", 32768, tensor_parallel_size=4)["kv_cache_tokens"] \
        == 262144
    assert evaluate("gpt-oss-20b", 32768, tensor_parallel_size=2)["kv_cache_tokens"] == 464665
    assert evaluate("deepseek-v2-lite", 32768, tensor_parallel_size=2)["kv_cache_tokens"] == \
        276160


@pytest.mark.parametrize("name, fitted", [("llama-3.1-8b-instruct", 65520), ("qwen3-8b", 40960),
                                          ("gemma-3-27b-it", 14960), ("gpt-oss-20b", 131072)])
def test_auto_fit_max_model_len(name, fitted):
    result = evaluate(name, "auto")
    assert result["max_model_len"] == fitted
    assert result["vllm_args"] == ["--kv-cache-memory-bytes", str(8 * GIB), "--max-model-len",
                                   str(fitted)]


def test_qwen3_next_boots_with_256_seqs():
    assert evaluate("qwen3-next-80b-a3b", 32768, max_num_seqs=256)["boot_ok"]


def test_block_sizes_follow_the_gpu_and_the_override():
    assert evaluate("deepseek-v2-lite", 32768, kv_cache_dtype="fp8")["block_size"] == 64
    assert evaluate("deepseek-v2-lite", 32768, gpu="b200")["block_size"] == 32
    assert evaluate("deepseek-v2-lite", 32768, gpu="rtx-pro-6000")["block_size"] == 16
    assert evaluate("qwen3-8b", 32768, block_size=32)["block_size"] == 32
    # the hybrid alignment overrides a user block size that cannot hold the Mamba state
    assert evaluate("qwen3-next-80b-a3b", 32768, block_size=16)["block_size"] == 576
    # without prefix caching there is no 64-token checkpoint grid: 544, and 2 state pages
    no_cache = evaluate("qwen3-next-80b-a3b", 32768, enable_prefix_caching=False)
    assert no_cache["block_size"] == 544
    assert no_cache["groups"][0]["pages_per_request"] == 1


def test_gpu_batch_defaults_change_sliding_pages():
    h100 = evaluate("gpt-oss-20b", 32768)
    a100 = evaluate("gpt-oss-20b", 32768, gpu="a100")
    assert (h100["max_num_batched_tokens"], h100["max_num_seqs"]) == (8192, 1024)
    assert (a100["max_num_batched_tokens"], a100["max_num_seqs"]) == (2048, 256)
    assert a100["kv_cache_tokens"] > h100["kv_cache_tokens"]
    assert evaluate("gpt-oss-20b", 32768, gpu="b200")["max_num_batched_tokens"] == 16384


def test_mtp_adds_a_draft_layer_and_state_pages():
    plain = evaluate("qwen3.5-9b", 262144, kv_cache_dtype="fp8", max_num_seqs=64)
    mtp = evaluate("qwen3.5-9b", 262144, kv_cache_dtype="fp8", max_num_seqs=64,
                   num_speculative_tokens=4)
    assert mtp["groups"][-1]["layers"] == 9 and plain["groups"][-1]["layers"] == 8
    assert mtp["groups"][0]["pages_per_request"] == 2 + 4 + 1
    assert mtp["bytes_per_block"] * 8 == plain["bytes_per_block"] * 9  # 9 layers to a group


def test_long_lengths_need_vllms_env_var():
    result = evaluate("qwen3-8b", 131072, allow_long_max_model_len=False)
    assert not result["boot_ok"]
    assert result["boot_error"].startswith(
        "User-specified max_model_len (131072) is greater than the derived max_model_len "
        "(max_position_embeddings=40960.0 or model_max_length=None in model's config.json). "
        "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")


def test_format_gib_is_vllms():
    assert format_gib(8 * GIB) == "8.0"
    assert format_gib(8 * GIB - 4194304) == "8.0"
    assert format_gib(5905580032) == "5.5"
    assert format_gib(1) == "0.0"


def test_the_capacity_line_is_printed_like_vllm():
    assert evaluate("gpt-oss-20b", 32768)["capacity_line"] == (
        "GPU KV cache size: 232,332 tokens, Maximum concurrency for 32,768 tokens per request: "
        "7.09x")


@pytest.mark.parametrize("options, field", [
    ({"kv_cache_dtype": "fp4"}, "kv_cache_dtype"),
    ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
    ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
    ({"gpu": "tpu"}, "gpu"),
    ({"block_size": 8}, "block_size"),
    ({"max_num_seqs": -1}, "max_num_seqs"),
    ({"enforce_eager": "yes"}, "enforce_eager"),
    ({"num_speculative_tokens": 2}, "num_speculative_tokens"),
])
def test_bad_options_name_the_option_and_the_seat(options, field):
    with pytest.raises(KVSizingError) as error:
        evaluate_kv_budget(config("qwen3-8b"), 4096, EIGHT_G, seat="coder", **options)
    assert str(error.value).startswith("seat coder: %s: expected" % field)


@pytest.mark.parametrize("length, budget, message", [
    (0, EIGHT_G, "max_model_len: expected a positive integer"),
    ("long", EIGHT_G, "max_model_len: expected a positive integer"),
    (4096, "8.5G", "kv_cache_memory_bytes: '8.5G' mixes decimals"),
    (4096, "lots", "kv_cache_memory_bytes: cannot read 'lots'"),
])
def test_bad_lengths_and_budgets_are_named(length, budget, message):
    with pytest.raises(KVSizingError, match="seat voices: " + message):
        evaluate_kv_budget(config("qwen3-8b"), length, budget, seat="voices")


def test_a_bad_config_surfaces_as_a_model_config_error():
    with pytest.raises(ModelConfigError, match="num_hidden_layers"):
        evaluate_kv_budget({"model_type": "llama", "num_attention_heads": 8}, 4096, EIGHT_G)


# --- the sizing rule -----------------------------------------------------------------------

def test_sizing_rounds_up_the_smallest_budget_with_the_factor():
    sized = size_kv_budget(config("qwen3-8b"), "published")
    # 40,960 tokens = 2,560 blocks; 1.25x = 3,200 blocks of 2,359,296 bytes = 7.03 GiB -> 7.5 GiB
    assert sized["min_kv_cache_memory_bytes"] == 3200 * 2359296
    assert sized["kv_cache_memory_bytes"] == 15 * GIB // 2
    assert sized["boot_ok"] and sized["max_concurrency_exact"] >= 1.25
    assert sized["vllm_args"] == ["--kv-cache-memory-bytes", "8053063680", "--max-model-len",
                                  "40960"]


def test_sizing_respects_the_admission_check_below_factor_one():
    sized = size_kv_budget(config("qwen3-8b"), 32768, kv_factor=0.5, kv_round_to=1)
    assert sized["num_blocks"] == 2048 + 1  # one request plus the null block
    assert sized["boot_ok"]


def test_sizing_a_hybrid_covers_max_num_seqs():
    sized = size_kv_budget(config("qwen3.5-9b"), 32768, kv_round_to=1)
    assert sized["num_blocks"] == 1024 and sized["boot_ok"]
    smaller = size_kv_budget(config("qwen3.5-9b"), 32768, kv_round_to=1, max_num_seqs=8)
    assert smaller["blocks_per_request"] == 57 + 3 * 3  # 57 attention blocks, 3 per GDN group
    assert smaller["num_blocks"] == -(-5 * 66 // 4)  # 1.25 x 66, rounded up


# --- sizing from measured demand ----------------------------------------------------------

@pytest.mark.parametrize("name, length", [("qwen3-8b", 32768), ("qwen3-8b", "published")])
def test_demand_sizing_is_the_smallest_budget_whose_pool_holds_the_demand(name, length):
    demand = 100_000
    sized = size_kv_for_demand(config(name), length, demand, kv_round_to=1)
    assert sized["boot_ok"] and sized["demand_tokens"] == demand and sized["kv_factor"] is None
    assert sized["kv_cache_tokens"] >= demand
    # a block for every token in use, as a seat's usage counts them, and the null block: not one more
    blocks = sized["num_blocks"]
    assert (blocks - 1) * sized["block_size"] >= demand > (blocks - 2) * sized["block_size"]


def test_a_sliding_window_models_demand_is_its_blocks_in_use_not_its_requests():
    # gemma-3's sliding layers hold a window per request: the pool's tokens at the context say
    # little of the blocks a measured peak used, which is what the demand is counted in
    gemma = config("gemma-3-27b-it")
    sized = size_kv_for_demand(gemma, 32768, 400_000, kv_round_to=1)
    assert (sized["num_blocks"] - 1) * sized["block_size"] >= 400_000


def test_a_hybrids_demand_budget_still_covers_its_mamba_blocks():
    # qwen3.5-9b's GDN layers need a block per sequence: that floor, not the demand, binds here
    sized = size_kv_for_demand(config("qwen3.5-9b"), 32768, 100_000, kv_round_to=1)
    assert sized["kv_cache_tokens"] >= 100_000 and sized["boot_ok"]
    assert sized["num_blocks"] == size_kv_budget(config("qwen3.5-9b"), 32768, kv_round_to=1)["num_blocks"]


def test_a_demand_below_one_request_is_sized_to_what_boots():
    # 24,385 tokens at the peak x 1.25 is less than one 32,768-token request: vLLM needs that much to boot
    sized = size_kv_for_demand(config("qwen3-8b"), 32768, int(24_385 * 1.25))
    assert sized["kv_cache_memory_bytes"] == size_kv_budget(config("qwen3-8b"), 32768, kv_factor=1.0)[
        "kv_cache_memory_bytes"]
    assert sized["boot_ok"] and sized["kv_cache_tokens"] >= 32768


@pytest.mark.parametrize("demand, message", [
    (-1, "seat coder: demand_tokens: expected a count of tokens >= 0, got -1"),
    (True, "seat coder: demand_tokens: expected a count of tokens >= 0, got True"),
])
def test_a_demand_that_cannot_be_sized_is_refused_naming_the_seat(demand, message):
    with pytest.raises(KVSizingError, match="^" + re.escape(message)):
        size_kv_for_demand(config("qwen3-8b"), 4096, demand, seat="coder")


@pytest.mark.parametrize("kwargs, message", [
    ({"kv_factor": 0}, "kv_factor: expected a finite number > 0 and <= 1024, got 0"),
    ({"kv_factor": float("inf")}, "kv_factor: expected a finite number > 0 and <= 1024, got inf"),
    ({"kv_factor": float("nan")}, "kv_factor: expected a finite number > 0 and <= 1024, got nan"),
    ({"kv_round_to": "0B"}, "kv_round_to: expected a positive size"),
    ({"max_model_len": "auto"}, "max_model_len: \"auto\" fits"),
    ({"max_model_len": 131072}, "max_model_len: User-specified max_model_len (131072)"),
])
def test_sizing_errors(kwargs, message):
    options = dict(kwargs)
    length = options.pop("max_model_len", 32768)
    with pytest.raises(KVSizingError) as error:
        size_kv_budget(config("qwen3-8b"), length, seat="coder", **options)
    assert str(error.value).startswith("seat coder: " + message)


MODELS = ["qwen3-8b", "gemma-3-27b-it", "gpt-oss-20b", "deepseek-v2-lite", "qwen3.5-0.8b",
          "gemma-4-26b-a4b-it"]
PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _meets_rule(name, length, budget, factor, **options):
    result = evaluate_kv_budget(config(name), length, budget, **options)
    return result["boot_ok"] and result["max_concurrency_exact"] >= factor


@PROPERTY
@given(name=st.sampled_from(MODELS), length=st.integers(1, 131072),
       factor=st.floats(0.05, 8.0), dtype=st.sampled_from(["auto", "fp8"]),
       seqs=st.sampled_from([None, 4, 64]))
def test_sizing_is_minimal(name, length, factor, dtype, seqs):
    options = {"kv_cache_dtype": dtype, "max_num_seqs": seqs, "allow_long_max_model_len": True}
    sized = size_kv_budget(config(name), length, kv_factor=factor, kv_round_to=1, **options)
    budget = sized["kv_cache_memory_bytes"]
    assert _meets_rule(name, length, budget, factor, **options)
    assert not _meets_rule(name, length, budget - 1, factor, **options)


@PROPERTY
@given(name=st.sampled_from(MODELS), length=st.integers(1, 131072),
       factors=st.tuples(st.floats(0.05, 8.0), st.floats(0.05, 8.0)),
       longer=st.integers(0, 65536), round_to=st.sampled_from([1, "256MiB", "0.5GiB"]))
def test_sizing_is_monotonic(name, length, factors, longer, round_to):
    low, high = sorted(factors)

    def budget(factor, max_model_len):
        return size_kv_budget(config(name), max_model_len, kv_factor=factor,
                              kv_round_to=round_to, allow_long_max_model_len=True,
                              max_num_seqs=4)["kv_cache_memory_bytes"]

    assert budget(low, length) <= budget(high, length)
    assert budget(low, length) <= budget(low, length + longer)


# --- field vectors ---------------------------------------------------------------------------

def test_seed_001_gemma_4_26b_boot_line():
    # Seed 001: google/gemma-4-26B-A4B-it (RedHatAI NVFP4 weights, same attention geometry) on
    # an RTX PRO 6000 logged "27.37 GiB and 1,724,110 tokens ... 6.5 full-length 262K
    # sequences". With FP8 KV, the only block count whose budget vLLM prints as 27.37 GiB and
    # that yields exactly 1,724,110 tokens is 89,690 blocks of 327,680 bytes.
    budget = 89690 * 327680
    assert format_gib(budget) == "27.37"
    result = evaluate("gemma-4-26b-a4b-it", 262144, budget, kv_cache_dtype="fp8",
                      gpu="rtx-pro-6000")
    assert (result["bytes_per_block"], result["num_blocks"]) == (327680, 89690)
    assert (result["kv_cache_tokens"], result["max_concurrency"]) == (1724110, 6.58)
    assert evaluate("gemma-4-26b-a4b-it", 262144, budget - 327680, kv_cache_dtype="fp8",
                    gpu="rtx-pro-6000")["kv_cache_tokens"] != 1724110


# Per release (docs/kv-sizing.md "Per release"); each switch checked at the release it changed.
def test_the_exact_fit_boots_before_0_29_which_holds_the_null_block_back():
    assert evaluate("qwen3-32b", 32768, vllm_version="0.28.0")["boot_ok"]
    assert not evaluate("qwen3-32b", 32768, vllm_version="0.29.0")["boot_ok"]
    sized = size_kv_budget(config("qwen3-32b"), 32768, kv_factor=1.0, kv_round_to=1, vllm_version="0.28.0")
    assert sized["min_kv_cache_memory_bytes"] == 2048 * sized["bytes_per_block"], "no block held back"


def test_before_0_20_the_capacity_line_counts_blocks_per_group():
    old, new = (evaluate("qwen3-8b", 30001, vllm_version=version) for version in ("0.19.1", "0.20.2"))
    assert old["num_blocks"] == new["num_blocks"]
    assert old["kv_cache_tokens"] == old["num_blocks"] * 16
    assert new["kv_cache_tokens"] == int(new["num_blocks"] / 1876 * 30001) != old["kv_cache_tokens"]
    gemma = evaluate("gemma-3-27b-it", 8192, vllm_version="0.19.1")
    assert gemma["kv_cache_tokens"] == gemma["num_blocks"] // len(gemma["groups"]) * 16


def test_a_sliding_window_keeps_two_batches_in_flight_from_0_26():
    old, new = (evaluate("gpt-oss-20b", 131072, vllm_version=version) for version in ("0.25.1", "0.26.0"))
    sliding = [group for group in new["groups"] if group["kind"] == "sliding_window"]
    assert sliding, new["groups"]
    assert new["blocks_per_request"] - old["blocks_per_request"] == len(sliding) * 8192 // 16


def test_the_admission_errors_are_each_releases_words():
    for version, phrase in (("0.12.0", "models's max seq len (32768), (8.00 GiB KV cache"),
                            ("0.14.1", "models's max seq len (32768), (8.0 GiB KV cache"),
                            ("0.29.0", "model's max seq len (32768), (8.0 GiB KV cache")):
        failed = evaluate("qwen3-32b", 32769, vllm_version=version)
        assert phrase.replace("32768)", "32769)") in failed["boot_error"], (version, failed["boot_error"])
    assert "conserving_memory" not in evaluate("qwen3-32b", 32769, vllm_version="0.12.0")["boot_error"]
    assert "conserving_memory" in evaluate("qwen3-32b", 32769, vllm_version="0.13.0")["boot_error"]


def test_layers_of_different_page_sizes_do_not_group_before_0_12():
    old = evaluate("gemma-4-31b-it", 8192, vllm_version="0.11.2")
    assert not old["boot_ok"] and old["boot_error"].startswith("NotImplementedError (vLLM 0.11.2 groups")
    assert evaluate("gemma-4-31b-it", 8192, vllm_version="0.12.0")["boot_ok"]
    with pytest.raises(KVSizingError, match="vllm_version: vLLM 0.11.2 cannot run this model at any budget"):
        size_kv_budget(config("gemma-4-31b-it"), 8192, vllm_version="0.11.2")


def yarn_qwen3(**rope):
    """Qwen3-8B with the YaRN its model card gives for 131072 tokens."""
    rope_scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    return dict(config("qwen3-8b"), max_position_embeddings=32768,
                rope_scaling={key: value for key, value in dict(rope_scaling, **rope).items() if value != "-"})


def limit(model_config, version):
    """The longest max_model_len the release boots without VLLM_ALLOW_LONG_MAX_MODEL_LEN."""
    def refused(length):
        error = evaluate_kv_budget(model_config, length, "40G", vllm_version=version)["boot_error"] or ""
        return error.startswith("User-specified max_model_len (%d)" % length)
    lengths = [length for length in (8192 * 4, 32768, 40960, 81920, 131072) if not refused(length)]
    assert lengths and refused(lengths[-1] + 1), version
    return lengths[-1]


def test_before_0_30_a_yarn_window_is_its_original_length_times_the_factor():
    for version, longest in (("0.10.2", 131072), ("0.18.1", 131072), ("0.29.0", 131072), ("0.30.0", 32768),
                             ("0.33.0", 32768)):
        assert limit(yarn_qwen3(), version) == longest, version
    assert evaluate_kv_budget(yarn_qwen3(), "auto", "40G", vllm_version="0.26.0")["max_model_len"] == 131072
    refused = evaluate_kv_budget(yarn_qwen3(), 131072, EIGHT_G, vllm_version="0.33.0")
    assert "(max_position_embeddings=32768.0 or model_max_length=None" in refused["boot_error"]


def test_a_top_level_original_length_wins_from_0_12_and_a_missing_one_fails_the_boot_until_0_19():
    outer = dict(yarn_qwen3(), original_max_position_embeddings=8192)
    assert (limit(outer, "0.11.2"), limit(outer, "0.12.0")) == (32768 * 4, 8192 * 4)
    missing = yarn_qwen3(original_max_position_embeddings="-")
    for version in ("0.10.2", "0.14.1", "0.18.1"):
        with pytest.raises(KVSizingError, match=r"^seat s: model config field rope_scaling\.original_max_position_"
                                                r"embeddings: expected a positive integer .*got null; vLLM %s "
                                                r"cannot boot it$" % version):
            evaluate_kv_budget(missing, 32768, EIGHT_G, seat="s", vllm_version=version)
    assert limit(missing, "0.19.1") == 131072


def test_a_null_rope_factor_fails_the_boot_until_0_18_takes_it_for_one():
    null = dict(config("qwen3-8b"), rope_scaling={"rope_type": "linear", "factor": None})
    with pytest.raises(KVSizingError, match=r"rope_scaling\.factor: expected a number .* vLLM 0\.17\.1 cannot"):
        evaluate_kv_budget(null, 32768, EIGHT_G, vllm_version="0.17.1")
    assert limit(null, "0.18.1") == 40960


@pytest.mark.parametrize("rope, expected", [
    ({"rope_type": "linear", "factor": float("inf")}, "rope_scaling.factor: expected a positive finite number, got inf"),
    ({"rope_type": "linear", "factor": float("nan")}, "rope_scaling.factor: expected a positive finite number, got nan"),
    ({"rope_type": "linear", "factor": -2.0}, "rope_scaling.factor: expected a positive finite number, got -2.0"),
    ({"rope_type": "linear", "factor": True}, "rope_scaling.factor: expected a positive finite number, got true"),
    ({"rope_type": "linear", "factor": "4"}, 'rope_scaling.factor: expected a positive finite number, got "4"'),
    ({"rope_type": "linear", "factor": 1e308}, "rope_scaling.factor: expected a factor that keeps the window finite"),
])
def test_a_rope_factor_that_is_no_scale_is_refused_for_every_release(rope, expected):
    for version in ("0.10.2", "0.33.0"):
        with pytest.raises(ModelConfigError) as refused:
            evaluate_kv_budget(dict(config("qwen3-8b"), rope_scaling=rope), 32768, EIGHT_G, seat="s",
                               vllm_version=version)
        assert str(refused.value).startswith("seat s: model config field " + expected), str(refused.value)
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("original, shown", [
    (float("inf"), "inf"), (0, "0"), (-32768, "-32768"), (True, "true"), ("32768\x1b[2J", '"32768\\u001b[2J"'),
])
def test_a_yarn_original_length_that_is_no_length_cannot_boot_before_0_30(original, shown):
    bad = yarn_qwen3(original_max_position_embeddings=original)
    with pytest.raises(KVSizingError, match=r"^seat s: model config field rope_scaling\.original_max_position_"
                                            r"embeddings: expected a positive integer .*got %s; vLLM 0\.26\.0 "
                                            r"cannot boot it$" % re.escape(shown)):
        evaluate_kv_budget(bad, 32768, EIGHT_G, seat="s", vllm_version="0.26.0")
    assert evaluate_kv_budget(bad, 32768, EIGHT_G, vllm_version="0.33.0")["boot_ok"], "0.30 on reads no original"


def test_auto_fit_came_in_0_14():
    with pytest.raises(KVSizingError, match=r"^seat s: max_model_len: \"auto\" is vLLM's auto-fit, which came "
                                            r"in 0\.14; vLLM 0\.13\.0 needs a length$"):
        evaluate_kv_budget(config("qwen3-8b"), "auto", EIGHT_G, seat="s", vllm_version="0.13.0")
    assert evaluate_kv_budget(config("qwen3-8b"), "auto", EIGHT_G, vllm_version="0.14.1")["boot_ok"]


def test_the_limit_is_printed_as_vllms_int_or_float():
    """vLLM multiplies the limit by the config's factor, or by a float 1.0; before 0.12 only by
    a factor that applies."""
    def error(rope, version):
        rescaled = dict(config("qwen3-8b"), rope_scaling=rope)
        return evaluate_kv_budget(rescaled, 131072, EIGHT_G, vllm_version=version)["boot_error"]
    assert "(max_position_embeddings=81920 or" in error({"rope_type": "linear", "factor": 2}, "0.33.0")
    assert "(max_position_embeddings=81920.0 or" in error({"rope_type": "linear", "factor": 2.0}, "0.33.0")
    assert "(max_position_embeddings=40960 or" in error({"rope_type": "llama3", "factor": 8.0}, "0.11.2")
    assert "(max_position_embeddings=40960.0 or" in error({"rope_type": "llama3", "factor": 8.0}, "0.12.0")


def test_deepseek_yarn_windows_are_scaled_before_0_30():
    scaled = dict(config("qwen3-8b"), rope_scaling={"rope_type": "deepseek_yarn", "factor": 2.0})
    assert (limit(scaled, "0.29.0"), limit(scaled, "0.30.0")) == (81920, 40960)


def test_a_release_outside_the_modelled_ones_is_refused_unless_the_nearest_is_asked_for():
    with pytest.raises(KVSizingError, match=r"seat s: vllm_version: expected a vLLM release whose KV arithmetic "
                                            r"is modelled .* got '0.34.0'"):
        evaluate("qwen3-8b", 4096, seat="s", vllm_version="0.34.0")
    nearest = evaluate("qwen3-8b", 4096, vllm_version="0.34.0", allow_nearest_vllm_release=True)
    assert (nearest["vllm_version"], nearest["vllm_release"]) == ("0.34.0", "0.33.0")


def gdn_groups(version, **options):
    result = evaluate("qwen3-next-80b-a3b", 32768, vllm_version=version, **options)
    mamba = result["groups"][0]
    assert mamba["kind"] == "mamba", result["groups"]
    return result["block_size"], mamba["block_size"], mamba["pages_per_request"]


def test_a_gdn_hybrid_caches_prefixes_from_0_15_and_checkpoints_them_from_0_33():
    # before 0.15 prefix caching is off for Qwen3-Next: one state per request, draft tokens or not
    assert gdn_groups("0.14.1") == (544, 32768, 1)
    assert gdn_groups("0.14.1", num_speculative_tokens=2) == (560, 32768, 1)
    # 'align' mode: two states, one more per draft token (0.17; 0.15 and 0.16 refuse the pair)
    assert gdn_groups("0.15.1") == (544, 544, 2)
    assert gdn_groups("0.17.1", num_speculative_tokens=2) == (560, 560, 4)
    with pytest.raises(KVSizingError, match=r"^seat s: num_speculative_tokens: vLLM 0\.16\.0 refuses speculative "
                                            r"decoding with prefix caching on a GDN hybrid"):
        evaluate("qwen3-next-80b-a3b", 32768, vllm_version="0.16.0", num_speculative_tokens=1, seat="s")
    # 0.33's FlashInfer prefill checkpoints every 64 tokens: a 576-token block and a third state
    assert (gdn_groups("0.32.0"), gdn_groups("0.33.0")) == ((544, 544, 2), (576, 576, 3))


def test_the_mamba_ssm_cache_dtype_counts_from_0_17():
    assert gdn_groups("0.16.0", mamba_ssm_cache_dtype="float32") == gdn_groups("0.16.0")
    assert gdn_groups("0.17.1", mamba_ssm_cache_dtype="float32")[0] == 1056 != gdn_groups("0.17.1")[0]


def test_more_sequences_than_mamba_blocks_fail_the_boot_from_0_20():
    assert evaluate("qwen3-next-80b-a3b", 32768, vllm_version="0.19.1", max_num_seqs=1024)["boot_ok"]
    refused = evaluate("qwen3-next-80b-a3b", 32768, vllm_version="0.20.2", max_num_seqs=1024)
    assert refused["boot_error"].startswith("max_num_seqs (1024) exceeds available Mamba cache blocks (642).")


def test_qwen3_5_is_refused_by_the_releases_that_do_not_serve_it():
    wrapper = config("qwen3.5-9b")
    text_only = dict(wrapper["text_config"], architectures=["Qwen3_5ForCausalLM"])
    cases = ((wrapper, "qwen3_5", "0.16.0", "0.17.1"), (text_only, "qwen3_5_text", "0.26.0", "0.27.1"))
    for model_config, model_type, last_without, first_with in cases:
        with pytest.raises(KVSizingError) as refused:
            evaluate_kv_budget(model_config, 32768, EIGHT_G, seat="s", vllm_version=last_without)
        assert str(refused.value) == "seat s: model_type: expected a model vLLM %s serves (%s came in %s), got %r" % (
            last_without, model_type, first_with[:4], model_type)
        assert evaluate_kv_budget(model_config, 32768, EIGHT_G, vllm_version=first_with)["block_size"] == 528
