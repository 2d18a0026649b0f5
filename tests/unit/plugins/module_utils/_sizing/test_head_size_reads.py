"""A config whose head_dim disagrees with hidden_size / num_attention_heads, per architecture and
release: sized with the head each release's model file builds, or refused where that file cannot
load the weights such a config implies.

What each release does was read from its wheel (model_executor/models/registry.py and the file it
names; tests/integration/test_kv_head_size_provenance.py reads them again): qwen2.py,
qwen2_moe.py and granitemoe.py size heads as hidden_size // num_attention_heads in every modelled
release, olmo2.py until 0.26 and starcoder2.py until 0.25 (the Transformers backend runs them
after), Olmo3 with olmo2.py and olmo3.py from 0.11 to 0.28, Qwen2.5-VL's language model with
qwen2.py; every other modelled architecture reads head_dim. Transformers 5.20.2 shapes the
weights by head_dim for all of those but Qwen2.5-VL's language model, which it sizes by the
quotient too.
"""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import KVSizingError, evaluate_kv_budget
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    _FAMILIES,
    _HEAD_SIZE_READS,
    _TEXT_MODEL_TYPE,
    describe_model,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import MODELLED

RELEASES = sorted(MODELLED.values(), key=lambda release: tuple(int(part) for part in release.split(".")))
HEADS, HEAD_DIM, QUOTIENT = 8, 128, 64        # hidden_size 512: the quotient is 64, head_dim says 128
WRAPPER = {text: outer for outer, text in _TEXT_MODEL_TYPE.items()}
# what each architecture's model file does with that config, from the first release named on:
# "head_dim" (it reads it), "quotient" (hidden_size // heads, and Transformers shapes the weights so
# too), "refused" (hidden_size // heads, into which weights shaped by head_dim do not load)
EXPECTED = {
    "qwen2": (("0.10.2", "refused"),),
    "qwen2_moe": (("0.10.2", "refused"),),
    "granitemoe": (("0.10.2", "refused"),),
    "qwen2_5_vl_text": (("0.10.2", "quotient"),),
    "olmo2": (("0.10.2", "refused"), ("0.26.0", "head_dim")),
    "olmo3": (("0.10.2", "head_dim"), ("0.11.2", "refused"), ("0.29.0", "head_dim")),
    "starcoder2": (("0.10.2", "refused"), ("0.25.1", "head_dim")),
}
ARCHITECTURES = sorted(_HEAD_SIZE_READS)
FIGURES = ("block_size", "bytes_per_block", "num_blocks", "kv_cache_tokens", "max_concurrency", "per_token_kv_bytes",
           "boot_ok", "attention_backend")


def expected(model_type, release):
    rules = EXPECTED.get(model_type, (("0.10.2", "head_dim"),))
    return [how for first, how in rules if RELEASES.index(first) <= RELEASES.index(release)][-1]


def config(model_type, hidden_size, head_dim):
    """A small config of the model type (wrapped the way its checkpoints are), head_dim None = absent."""
    text = {"model_type": model_type, "num_hidden_layers": 8, "num_attention_heads": HEADS,
            "num_key_value_heads": 2, "hidden_size": hidden_size, "max_position_embeddings": 8192,
            "torch_dtype": "bfloat16"}
    if head_dim is not None:
        text["head_dim"] = head_dim
    if model_type == "gemma3n_text":
        text["num_kv_shared_layers"] = 2
    if model_type == "gemma4_text":
        text["global_head_dim"] = 256
    if model_type in WRAPPER:
        return {"model_type": WRAPPER[model_type], "text_config": text, "torch_dtype": "bfloat16"}
    return text


def outcome(cfg, release):
    try:
        result = evaluate_kv_budget(cfg, 8192, "4GiB", seat="s", vllm_version=release)
    except KVSizingError as exc:
        return str(exc)
    return {figure: result[figure] for figure in FIGURES}


def test_every_modelled_family_but_mla_says_how_its_heads_are_sized():
    mla = {model_type for model_type, family in _FAMILIES.items() if family["kind"] == "mla"}
    assert set(_HEAD_SIZE_READS) == set(_FAMILIES) - mla
    assert set(EXPECTED) <= set(_HEAD_SIZE_READS)


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_a_head_dim_that_disagrees_is_sized_as_each_release_builds_it(model_type):
    disagreeing = config(model_type, HEADS * QUOTIENT, HEAD_DIM)
    built = {"head_dim": config(model_type, HEADS * HEAD_DIM, HEAD_DIM),
             "quotient": config(model_type, HEADS * QUOTIENT, None)}
    for release in RELEASES:
        how = expected(model_type, release)
        got = outcome(disagreeing, release)
        if how == "refused":
            architecture = _HEAD_SIZE_READS[model_type][0]
            assert got == ("seat s: model config field head_dim: expected no head_dim or hidden_size // "
                           "num_attention_heads (64), the size %s gives its heads (weights shaped by a head_dim "
                           "of 128 do not load into it), got 128; vLLM %s cannot load it" % (architecture, release))
        else:
            # the figures of the same model whose head_dim is the one the release builds
            assert got == outcome(built[how], release), (model_type, release, how)


@pytest.mark.parametrize("release, per_token", [(release, 8 * 2 * 2 * 64 * 2) for release in ("0.10.2", "0.26.0", "0.33.0")])
def test_qwen2_5_vl_allocates_the_quotient_it_was_trained_with(release, per_token):
    result = evaluate_kv_budget(config("qwen2_5_vl_text", HEADS * QUOTIENT, HEAD_DIM), 8192, "4GiB",
                                vllm_version=release)
    assert result["per_token_kv_bytes"] == per_token   # 8 layers x 2 KV heads x (K + V) x 64 x bf16


@pytest.mark.parametrize("release, per_token", [("0.26.0", 8 * 2 * 2 * 128 * 2), ("0.33.0", 8 * 2 * 2 * 128 * 2)])
def test_olmo2_on_the_transformers_backend_reads_head_dim(release, per_token):
    result = evaluate_kv_budget(config("olmo2", HEADS * QUOTIENT, HEAD_DIM), 8192, "4GiB", vllm_version=release)
    assert result["per_token_kv_bytes"] == per_token


def test_the_description_is_the_newest_releases_and_names_each_rule():
    olmo3 = describe_model(config("olmo3", HEADS * QUOTIENT, HEAD_DIM))
    assert [(read["from"], read.get("head_size")) for read in olmo3["head_size_reads"]] == [
        ("0.10.2", 128), ("0.11.0", None), ("0.29.0", 128)]
    assert {layer["head_size"] for layer in olmo3["layers"]} == {128}
    vision = describe_model(config("qwen2_5_vl_text", HEADS * QUOTIENT, HEAD_DIM))
    assert vision["head_size_reads"] == [{"from": "0.10.2", "head_size": 64}]
    assert {(layer["head_size"], layer["head_size_v"]) for layer in vision["layers"]} == {(64, 64)}
    # no release loads it: the layers keep the checkpoint's size
    qwen2 = describe_model(config("qwen2", HEADS * QUOTIENT, HEAD_DIM))
    assert qwen2["head_size_reads"][0]["error"].startswith("head_dim: expected no head_dim")
    assert {layer["head_size"] for layer in qwen2["layers"]} == {128}
    # a head_dim that agrees, or none, is the same model in every release
    assert describe_model(config("qwen2", HEADS * HEAD_DIM, HEAD_DIM))["head_size_reads"] == [
        {"from": "0.10.2", "head_size": 128}]
    assert describe_model(config("qwen2", HEADS * QUOTIENT, None))["head_size_reads"] == [
        {"from": "0.10.2", "head_size": 64}]
