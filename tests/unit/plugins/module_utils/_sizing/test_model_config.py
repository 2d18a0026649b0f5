"""Reading config.json as vLLM 0.33 (through transformers 5.20) sees it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    ModelConfigError,
    describe_model,
    load_model_config,
    published_max_model_len,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "model_configs"


def fixture(name):
    return json.loads((FIXTURES / (name + ".json")).read_text())


def kinds(model):
    return [layer["kind"] for layer in model["layers"]]


def test_load_from_dict_file_and_directory(tmp_path):
    raw = fixture("qwen3-8b")
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert load_model_config(raw) == raw and load_model_config(raw) is not raw
    assert load_model_config(str(tmp_path / "config.json")) == raw
    assert load_model_config(str(tmp_path)) == raw


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
])
def test_load_errors_name_the_seat_and_file(tmp_path, content, message):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelConfigError) as error:
        load_model_config(str(path), seat="voices")
    assert str(error.value).startswith("seat voices: model config %s: " % path)
    assert message in str(error.value)


def test_load_rejects_other_types():
    with pytest.raises(ModelConfigError, match="expected a dict, a config.json path"):
        load_model_config(42)


def test_dense_gqa_model():
    model = describe_model(fixture("qwen3-8b"))
    assert model["attention"] == "standard" and model["dtype"] == "bfloat16"
    assert {(layer["kind"], layer["num_kv_heads"], layer["head_size"])
            for layer in model["layers"]} == {("full_attention", 8, 128)}
    assert len(model["layers"]) == 36
    assert (model["published_max_model_len"], model["derived_max_model_len"]) == (40960, 40960)


def test_head_dim_and_kv_heads_fall_back_like_transformers():
    llama = describe_model({"model_type": "llama", "num_hidden_layers": 2,
                            "num_attention_heads": 32, "hidden_size": 4096})
    assert llama["layers"][0]["num_kv_heads"] == 32  # MHA: kv heads default to heads
    assert llama["layers"][0]["head_size"] == 128  # hidden_size / heads
    qwen3 = describe_model({"model_type": "qwen3", "num_hidden_layers": 2,
                            "num_attention_heads": 32, "hidden_size": 2048})
    assert (qwen3["layers"][0]["num_kv_heads"], qwen3["layers"][0]["head_size"]) == (32, 128)
    assert qwen3["published_max_model_len"] == 32768  # Qwen3Config's default


def test_float32_checkpoints_run_as_bfloat16_and_float16_stays():
    base = {"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 8,
            "hidden_size": 1024}
    assert describe_model(dict(base, torch_dtype="float32"))["dtype"] == "bfloat16"
    assert describe_model(dict(base, dtype="float16"))["dtype"] == "float16"
    assert describe_model(base)["dtype"] == "bfloat16"


def test_gemma3_text_config_and_class_defaults():
    model = describe_model(fixture("gemma-3-27b-it"))
    assert model["text_model_type"] == "gemma3_text"
    assert kinds(model).count("sliding_attention") == 52
    assert [index for index, kind in enumerate(kinds(model)) if kind == "full_attention"] == \
        list(range(5, 62, 6))
    assert {layer["sliding_window"] for layer in model["layers"]} == {1024, None}
    # 131072 is Gemma3TextConfig's default, and vLLM does not scale Gemma 3 by its rope factor
    assert (model["published_max_model_len"], model["derived_max_model_len"]) == (131072, 131072)


def test_gemma3_honours_the_old_sliding_window_pattern_key():
    text = {"model_type": "gemma3_text", "num_hidden_layers": 8, "num_attention_heads": 8,
            "sliding_window_pattern": 4}
    assert kinds(describe_model(text)) == (["sliding_attention"] * 3 + ["full_attention"]) * 2


def test_gpt_oss_alternates_by_layer_index():
    config = fixture("gpt-oss-20b")
    config["layer_types"] = ["full_attention"] * 24  # vLLM's gpt_oss.py ignores layer_types
    model = describe_model(config)
    assert kinds(model) == ["sliding_attention", "full_attention"] * 12
    assert model["sinks"]


def test_mla_geometry():
    model = describe_model(fixture("deepseek-v2-lite"))
    assert model["attention"] == "mla"
    assert model["mla"] == {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128}
    assert {(layer["num_kv_heads"], layer["head_size"], layer["head_size_v"])
            for layer in model["layers"]} == {(1, 576, 0)}
    # YaRN leaves max_position_embeddings as the extended window: no further factor
    assert model["derived_max_model_len"] == 163840


def test_qwen3_next_hybrid_and_its_defaults():
    model = describe_model(fixture("qwen3-next-80b-a3b"))
    assert model["attention"] == "gated_delta_net"
    assert kinds(model) == (["linear_attention"] * 3 + ["full_attention"]) * 12
    assert model["linear_attention"] == {"num_key_heads": 16, "num_value_heads": 32,
                                         "key_head_dim": 128, "value_head_dim": 128,
                                         "conv_kernel": 4}
    assert model["mamba_ssm_dtype"] is None and model["mtp_layers"] == 1


def test_qwen3_5_reads_mamba_ssm_dtype_and_layer_types():
    model = describe_model(fixture("qwen3.5-0.8b"))
    assert model["mamba_ssm_dtype"] == "float32"
    assert kinds(model).count("full_attention") == 6
    assert model["published_max_model_len"] == 262144


def test_full_attention_interval_builds_layer_types():
    text = {"model_type": "qwen3_5_text", "num_hidden_layers": 6, "num_attention_heads": 16,
            "full_attention_interval": 3}
    assert kinds(describe_model(text)) == ["linear_attention", "linear_attention",
                                           "full_attention"] * 2


def test_legacy_layer_type_names_are_remapped():
    text = {"model_type": "qwen3_next", "num_hidden_layers": 4, "num_attention_heads": 16,
            "layer_types": ["mamba", "mamba", "mamba", "attention"]}
    assert kinds(describe_model(text)) == ["linear_attention"] * 3 + ["full_attention"]


def test_gemma4_global_layers_and_kv_sharing():
    big = describe_model(fixture("gemma-4-31b-it"))
    full = [layer for layer in big["layers"] if layer["kind"] == "full_attention"]
    assert {(layer["num_kv_heads"], layer["head_size"]) for layer in full} == {(4, 512)}
    small = describe_model(fixture("gemma-4-e4b-it"))
    shared = {index: layer["kv_shared_with"] for index, layer in enumerate(small["layers"])
              if "kv_shared_with" in layer}
    assert sorted(shared) == list(range(24, 42))
    assert shared[24] == 22 and shared[29] == 23  # last earlier layer of the same kind


def test_gemma4_forces_the_last_layer_to_full_attention():
    text = {"model_type": "gemma4_text", "num_hidden_layers": 4, "num_attention_heads": 8,
            "layer_types": ["sliding_attention"] * 4}
    assert kinds(describe_model(text))[-1] == "full_attention"


def test_mistral_window_default_covers_every_layer():
    config = {"model_type": "mistral", "num_hidden_layers": 4, "num_attention_heads": 32,
              "hidden_size": 4096}
    assert {layer["sliding_window"] for layer in describe_model(config)["layers"]} == {4096}
    config["sliding_window"] = None
    assert {layer["sliding_window"] for layer in describe_model(config)["layers"]} == {None}


def test_qwen2_drops_the_window_unless_enabled():
    config = {"model_type": "qwen2", "num_hidden_layers": 4, "num_attention_heads": 8,
              "num_key_value_heads": 2, "hidden_size": 1024, "sliding_window": 131072,
              "use_sliding_window": False}
    assert {layer["sliding_window"] for layer in describe_model(config)["layers"]} == {None}


def test_linear_rope_scaling_extends_vllms_limit_but_not_the_published_window():
    config = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8,
              "hidden_size": 1024, "max_position_embeddings": 4096,
              "rope_scaling": {"type": "linear", "factor": 4.0}}
    model = describe_model(config)
    assert (model["published_max_model_len"], model["derived_max_model_len"]) == (4096, 16384)
    assert published_max_model_len(config) == 4096


def test_modelopt_fp8_kv_scheme_resolves_auto_to_fp8():
    config = dict(fixture("qwen3-8b"), quantization_config={
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"})
    assert describe_model(config)["checkpoint_kv_cache_dtype"] == "fp8_e4m3"


@pytest.mark.parametrize("change, field", [
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"num_hidden_layers": True}, "num_hidden_layers"),
    ({"num_attention_heads": "32"}, "num_attention_heads"),
    ({"num_key_value_heads": 5}, "num_key_value_heads"),
    ({"layer_types": ["full_attention"]}, "layer_types"),
    ({"layer_types": ["full_attention"] * 35 + ["chunked_attention"]}, "layer_types[35]"),
    ({"torch_dtype": "int4"}, "torch_dtype"),
    ({"model_type": None}, "model_type"),
    ({"layers_block_type": ["mamba"]}, "layers_block_type"),
    ({"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 10},
     "max_window_layers"),
])
def test_bad_fields_are_named(change, field):
    config = dict(fixture("qwen3-8b"), **change)
    with pytest.raises(ModelConfigError) as error:
        describe_model(config, seat="coder")
    assert str(error.value).startswith("seat coder: model config field %s: expected" % field)


def test_contradictory_interval_and_layer_types():
    text = dict(fixture("qwen3.5-0.8b")["text_config"], full_attention_interval=3)
    with pytest.raises(ModelConfigError, match="full_attention_interval: expected a value "
                                               "consistent with layer_types"):
        describe_model({"model_type": "qwen3_5", "text_config": text})


def test_sliding_layers_need_a_window():
    config = {"model_type": "gemma2", "num_hidden_layers": 2, "num_attention_heads": 8,
              "sliding_window": None}
    with pytest.raises(ModelConfigError, match="sliding_window: expected a window size"):
        describe_model(config)


def test_unknown_model_types_pass_only_as_plain_decoders():
    plain = {"model_type": "newlm", "num_hidden_layers": 2, "num_attention_heads": 4,
             "hidden_size": 256, "max_position_embeddings": 2048}
    assert kinds(describe_model(plain)) == ["full_attention"] * 2
    with pytest.raises(ModelConfigError, match="model config field kv_lora_rank: expected a "
                                               "supported model_type for MLA"):
        describe_model(dict(plain, kv_lora_rank=512))


def test_text_config_errors_carry_their_path():
    with pytest.raises(ModelConfigError, match="text_config.num_attention_heads"):
        describe_model({"model_type": "gemma3", "text_config": {"num_hidden_layers": 2,
                                                                "num_attention_heads": -1}})


def test_published_window_missing():
    with pytest.raises(ModelConfigError, match="max_position_embeddings: expected the model's "
                                               "context window"):
        published_max_model_len({"model_type": "newlm", "num_hidden_layers": 1,
                                 "num_attention_heads": 1, "hidden_size": 8})
