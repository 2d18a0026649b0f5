# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Read a model's config.json the way vLLM 0.33 sees it, and describe its attention geometry.

vLLM does not read config.json directly: transformers (5.16-5.20 for vLLM 0.33) first builds a
config object, filling class defaults and normalising a few fields (Qwen2/3 drop
``sliding_window`` unless ``use_sliding_window``; Gemma derives ``layer_types`` from a pattern;
Qwen3-Next/3.5 derive it from ``full_attention_interval``). This module reproduces exactly
those steps for the model families it knows, from the transformers 5.20.2 and vLLM 0.33.0
sources, and fails, naming the field, on anything it cannot describe faithfully.

Pure standard library: the module and the filters share it.
"""

from __future__ import annotations

import json
import math
import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import ReadCapError, load_json

# The keys vLLM's ModelArchConfigConvertorBase.derive_max_model_len_and_key reads, smallest wins.
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len")
# vLLM's CONFIG_FIELD_ALIASES["total_num_kv_heads"], in lookup order.
_KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                 "num_attention_groups")
# How vLLM's max-length check (config/model.py _get_and_verify_max_len), and the loading of the
# RoPE parameters before it, limit max_model_len: one rule per release that changed it.
#   prescaled: rope types whose max_position_embeddings is taken as the extended window already
#   yarn_original: a yarn window is its original_max_position_embeddings times the factor
#   rope_key: the config field read first for the RoPE parameters
#   outer_original: a top-level original_max_position_embeddings replaces the parameters' own
#   original_default: a missing original_max_position_embeddings is max_position_embeddings
#   null_factor_ok: a null factor counts as 1.0 (before, the boot fails on it)
#   rope_always: every RoPE family has RoPE parameters, so the limit is multiplied (by 1.0 at
#     least, a float) even without scaling
_MAX_LEN_RULE_CHANGES = (
    # Transformers 4 keeps rope_scaling as config.json writes it
    ("0.10.2", {"prescaled": ("su", "longrope", "llama3"), "yarn_original": True,
                "rope_key": "rope_scaling", "outer_original": False, "original_default": False,
                "null_factor_ok": False, "rope_always": False}),
    # vLLM moves rope_scaling into rope_parameters, with rope_theta and a top-level
    # original_max_position_embeddings (transformers_utils/config.py patch_rope_parameters)
    ("0.12.0", {"outer_original": True, "rope_always": True}),
    ("0.18.0", {"null_factor_ok": True}),
    # Transformers 5, the newest these releases accept, standardises the parameters and fills
    # original_max_position_embeddings in
    ("0.19.0", {"rope_key": "rope_parameters", "original_default": True}),
    ("0.30.0", {"prescaled": ("su", "longrope", "llama3", "yarn", "deepseek_yarn",
                              "deepseek_llama_scaling"), "yarn_original": False}),
)


def _cumulative(changes):
    rules, rule = [], {}
    for release, change in changes:
        rule = dict(rule, **change)
        rules.append((release, rule))
    return tuple(rules)


_MAX_LEN_RULES = _cumulative(_MAX_LEN_RULE_CHANGES)
_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16",
           "float32": "float32", "float": "float32"}
# Fields that mean an attention mechanism this module does not model; failing beats a wrong number.
_UNSUPPORTED_FIELDS = {
    "layers_block_type": "Mamba/attention hybrids such as Jamba or Nemotron-H",
    "hybrid_override_pattern": "Nemotron-H style hybrids",
    "attn_type_list": "MiniMax linear-attention hybrids",
    "block_configs": "heterogeneous (NAS) layer stacks",
    "per_layer_config": "per-layer config overrides",
    "index_topk": "sparse MLA with an indexer (DeepSeek-V3.2 style)",
    "compress_ratios": "compressed sparse attention (DeepSeek-V4 style)",
    "rswa_window": "reference sliding-window attention",
}

# Wrapper (multimodal) model types and the text model type of their text_config.
_TEXT_MODEL_TYPE = {
    "gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "gemma4": "gemma4_text",
    "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text", "llama4": "llama4_text",
    "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
}

_STANDARD, _MLA, _GDN = "standard", "mla", "gated_delta_net"
# transformers' remap_legacy_layer_types, applied to every config.
_LEGACY_LAYER_TYPES = {"attention": "full_attention", "mamba": "linear_attention"}


def _family(kind, defaults, **rules):
    return dict(kind=kind, defaults=defaults, **rules)


# Class defaults of the transformers 5.20.2 config classes (fields this module reads), and how
# vLLM 0.33's model implementation places sliding windows. ``sliding`` is one of:
#   "layer_types"  the model reads layer_types per layer (llama, gemma, olmo3, ...);
#   "uniform"      the model code takes one model-wide window, so only all-sliding works;
#   "parity"       gpt-oss: even layers slide, whatever layer_types says (gpt_oss.py);
#   "none"         the model has no sliding windows.
# ``layer_types`` generates the default layer_types like the config class' __post_init__.
_FAMILIES = {
    "llama": _family(_STANDARD, {"num_key_value_heads": None, "max_position_embeddings": 2048},
                     sliding="layer_types"),
    "mistral": _family(_STANDARD, {"num_key_value_heads": 8, "max_position_embeddings": 131072,
                                   "sliding_window": 4096}, sliding="layer_types"),
    "ministral": _family(_STANDARD, {"num_key_value_heads": 8, "max_position_embeddings": 131072,
                                     "sliding_window": 4096}, sliding="layer_types",
                         layer_types="ministral"),
    "ministral3": _family(_STANDARD, {"num_key_value_heads": 8, "head_dim": 128,
                                      "max_position_embeddings": 262144,
                                      "sliding_window": None}, sliding="layer_types"),
    "mixtral": _family(_STANDARD, {"num_key_value_heads": 8, "max_position_embeddings": 131072,
                                   "sliding_window": None}, sliding="uniform"),
    "qwen2": _family(_STANDARD, {"num_key_value_heads": 32, "max_position_embeddings": 32768,
                                 "use_sliding_window": False, "sliding_window": 4096,
                                 "max_window_layers": 28}, sliding="qwen2"),
    "qwen2_moe": _family(_STANDARD, {"num_key_value_heads": 16, "max_position_embeddings": 32768,
                                     "use_sliding_window": False, "sliding_window": 4096,
                                     "max_window_layers": 28}, sliding="qwen2"),
    "qwen2_5_vl_text": _family(_STANDARD, {"num_key_value_heads": 8,
                                           "max_position_embeddings": 32768,
                                           "use_sliding_window": False, "sliding_window": 4096,
                                           "max_window_layers": 80}, sliding="qwen2"),
    "qwen3": _family(_STANDARD, {"num_key_value_heads": 32, "head_dim": 128,
                                 "max_position_embeddings": 32768, "use_sliding_window": False,
                                 "sliding_window": 4096, "max_window_layers": 28},
                     sliding="qwen2"),
    "qwen3_moe": _family(_STANDARD, {"num_key_value_heads": 4, "max_position_embeddings": 32768,
                                     "use_sliding_window": False, "sliding_window": 4096,
                                     "max_window_layers": 28}, sliding="qwen2"),
    "qwen3_vl_text": _family(_STANDARD, {"num_key_value_heads": 32, "head_dim": 128,
                                         "max_position_embeddings": 128000}, sliding="none"),
    "qwen3_vl_moe_text": _family(_STANDARD, {"num_key_value_heads": 16,
                                             "max_position_embeddings": 128000},
                                 sliding="none"),
    "glm4": _family(_STANDARD, {"num_key_value_heads": 2, "head_dim": 128,
                                "max_position_embeddings": 131072}, sliding="none"),
    "glm4_moe": _family(_STANDARD, {"num_key_value_heads": 8, "max_position_embeddings": 131072},
                        sliding="none"),
    "phi3": _family(_STANDARD, {"num_key_value_heads": None, "max_position_embeddings": 4096,
                                "sliding_window": None}, sliding="uniform"),
    "gemma": _family(_STANDARD, {"num_key_value_heads": 16, "head_dim": 256,
                                 "max_position_embeddings": 8192}, sliding="none"),
    "granite": _family(_STANDARD, {"num_key_value_heads": None, "max_position_embeddings": 2048},
                       sliding="none"),
    "granitemoe": _family(_STANDARD, {"num_key_value_heads": None,
                                      "max_position_embeddings": 2048}, sliding="none"),
    "olmo2": _family(_STANDARD, {"num_key_value_heads": None, "max_position_embeddings": 2048},
                     sliding="none"),
    "olmo3": _family(_STANDARD, {"num_key_value_heads": None, "max_position_embeddings": 2048,
                                 "sliding_window": 4096}, sliding="layer_types",
                     layer_types="olmo3"),
    "seed_oss": _family(_STANDARD, {"num_key_value_heads": 8, "head_dim": 128,
                                    "max_position_embeddings": 524288}, sliding="none"),
    "starcoder2": _family(_STANDARD, {"num_key_value_heads": 2, "max_position_embeddings": 4096,
                                      "sliding_window": None}, sliding="uniform"),
    "ernie4_5": _family(_STANDARD, {"num_key_value_heads": 2, "head_dim": 128,
                                    "max_position_embeddings": 131072}, sliding="none"),
    # Llama 4's chunked local attention switches vLLM's hybrid KV cache manager off
    # (config/vllm.py), so every layer is allocated as full attention.
    "llama4_text": _family(_STANDARD, {"num_key_value_heads": 8, "head_dim": 128,
                                       "max_position_embeddings": 131072}, sliding="none",
                           chunked_local=True),
    "gemma2": _family(_STANDARD, {"num_key_value_heads": 4, "head_dim": 256,
                                  "max_position_embeddings": 8192, "sliding_window": 4096},
                      sliding="layer_types", layer_types="gemma2"),
    "gemma3_text": _family(_STANDARD, {"num_key_value_heads": 4, "head_dim": 256,
                                       "max_position_embeddings": 131072,
                                       "sliding_window": 4096},
                           sliding="layer_types", layer_types="gemma3"),
    "gemma3n_text": _family(_STANDARD, {"num_key_value_heads": 2, "head_dim": 256,
                                        "max_position_embeddings": 32768, "sliding_window": 512,
                                        "num_kv_shared_layers": 15},
                            sliding="layer_types", layer_types="gemma3n", kv_sharing="gemma3n"),
    "gemma4_text": _family(_STANDARD, {"num_key_value_heads": 4, "head_dim": 256,
                                       "max_position_embeddings": 131072, "sliding_window": 512,
                                       "num_kv_shared_layers": 0, "attention_k_eq_v": False},
                           sliding="layer_types", layer_types="gemma4", kv_sharing="gemma4"),
    "gpt_oss": _family(_STANDARD, {"num_key_value_heads": 8, "head_dim": 64,
                                   "max_position_embeddings": 131072, "sliding_window": 128},
                       sliding="parity", sinks=True),
    "deepseek_v2": _family(_MLA, {"num_key_value_heads": None, "max_position_embeddings": 2048,
                                  "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                  "qk_nope_head_dim": 128}, sliding="none"),
    "deepseek_v3": _family(_MLA, {"num_key_value_heads": 128, "max_position_embeddings": 4096,
                                  "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                  "qk_nope_head_dim": 128}, sliding="none"),
    "kimi_k2": _family(_MLA, {}, sliding="none"),
    "glm4_moe_lite": _family(_MLA, {"num_key_value_heads": 20,
                                    "max_position_embeddings": 202752, "kv_lora_rank": 512,
                                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 192},
                             sliding="none"),
    "qwen3_next": _family(_GDN, {"num_key_value_heads": 2, "head_dim": 256,
                                 "max_position_embeddings": 32768, "linear_conv_kernel_dim": 4,
                                 "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                                 "linear_num_key_heads": 16, "linear_num_value_heads": 32},
                          mtp_key="num_nextn_predict_layers"),
    "qwen3_5_text": _family(_GDN, {"num_key_value_heads": 4, "head_dim": 256,
                                   "max_position_embeddings": 32768, "linear_conv_kernel_dim": 4,
                                   "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                                   "linear_num_key_heads": 16, "linear_num_value_heads": 32},
                            mtp_key="mtp_num_hidden_layers", ssm_dtype_from_config=True),
    "qwen3_5_moe_text": _family(_GDN, {"num_key_value_heads": 2, "head_dim": 256,
                                       "max_position_embeddings": 32768,
                                       "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                                       "linear_value_head_dim": 128, "linear_num_key_heads": 16,
                                       "linear_num_value_heads": 32},
                                mtp_key="mtp_num_hidden_layers", ssm_dtype_from_config=True),
}
SUPPORTED_MODEL_TYPES = tuple(sorted(set(_FAMILIES) | set(_TEXT_MODEL_TYPE)))

# How each release sizes the attention heads of a model type: the registry's class for the
# architecture named (for a multimodal wrapper, the language model it builds: qwen2_5_vl.py builds
# Qwen2ForCausalLM, qwen3_vl.py Qwen3's model, qwen3_5.py Qwen3NextAttention), and from each
# release on, how its model file reads the size. MLA models size their latent instead
# (kv_lora_rank + qk_rope_head_dim). Read from each modelled release's model_executor/models/
# (registry.py, then the file it names); tests/integration/test_kv_head_size_provenance.py reads
# them again.
#   "head_dim": config.head_dim when set (not null or 0), else hidden_size // num_attention_heads:
#     getattr(config, "head_dim", None) or the quotient, config.head_dim with the config class'
#     default, or ModelConfig.get_head_size where the Transformers backend runs the model (an
#     architecture the registry does not name, or maps to "transformers");
#   "hidden_size": hidden_size // num_attention_heads whatever head_dim says, as the Transformers
#     5.20.2 modeling code does too: a head_dim that disagrees is inert, the weights have the
#     quotient's shape, and vLLM allocates the quotient;
#   "unloadable": hidden_size // num_attention_heads, while the Transformers 5.20.2 modeling code
#     that writes the checkpoints shapes q/k/v/o by head_dim: with a head_dim that disagrees, the
#     weights have num_heads x head_dim rows, which the release's QKVParallelLinear weight loader
#     (model_executor/layers/linear.py, assert param_data.shape == loaded_weight.shape) refuses.
_HEAD_SIZE_READS = {
    "llama": ("LlamaForCausalLM", (("0.10.2", "head_dim"),)),
    "mistral": ("MistralForCausalLM", (("0.10.2", "head_dim"),)),   # llama.py, mistral.py from 0.15
    "ministral": ("MinistralForCausalLM", (("0.10.2", "head_dim"),)),   # the Transformers backend
    "ministral3": ("Ministral3ForCausalLM", (("0.10.2", "head_dim"),)),   # mistral.py from 0.20
    "mixtral": ("MixtralForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen2": ("Qwen2ForCausalLM", (("0.10.2", "unloadable"),)),
    "qwen2_moe": ("Qwen2MoeForCausalLM", (("0.10.2", "unloadable"),)),
    "qwen2_5_vl_text": ("Qwen2ForCausalLM", (("0.10.2", "hidden_size"),)),
    "qwen3": ("Qwen3ForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen3_moe": ("Qwen3MoeForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen3_vl_text": ("Qwen3ForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen3_vl_moe_text": ("Qwen3MoeForCausalLM", (("0.10.2", "head_dim"),)),
    "glm4": ("Glm4ForCausalLM", (("0.10.2", "head_dim"),)),
    "glm4_moe": ("Glm4MoeForCausalLM", (("0.10.2", "head_dim"),)),
    "phi3": ("Phi3ForCausalLM", (("0.10.2", "head_dim"),)),   # llama.py's attention
    "gemma": ("GemmaForCausalLM", (("0.10.2", "head_dim"),)),
    "granite": ("GraniteForCausalLM", (("0.10.2", "head_dim"),)),
    "granitemoe": ("GraniteMoeForCausalLM", (("0.10.2", "unloadable"),)),
    # olmo2.py, then the Transformers backend
    "olmo2": ("Olmo2ForCausalLM", (("0.10.2", "unloadable"), ("0.26.0", "head_dim"))),
    # not registered in 0.10 (the Transformers backend), olmo2.py, olmo3.py from 0.26, then the
    # Transformers backend
    "olmo3": ("Olmo3ForCausalLM", (("0.10.2", "head_dim"), ("0.11.0", "unloadable"), ("0.29.0", "head_dim"))),
    "seed_oss": ("SeedOssForCausalLM", (("0.10.2", "head_dim"),)),   # the Transformers backend from 0.32
    # starcoder2.py, then the Transformers backend
    "starcoder2": ("Starcoder2ForCausalLM", (("0.10.2", "unloadable"), ("0.25.0", "head_dim"))),
    "ernie4_5": ("Ernie4_5ForCausalLM", (("0.10.2", "head_dim"),)),   # llama.py's attention
    "llama4_text": ("Llama4ForCausalLM", (("0.10.2", "head_dim"),)),
    "gemma2": ("Gemma2ForCausalLM", (("0.10.2", "head_dim"),)),
    "gemma3_text": ("Gemma3ForCausalLM", (("0.10.2", "head_dim"),)),
    "gemma3n_text": ("Gemma3nForCausalLM", (("0.10.2", "head_dim"),)),
    "gemma4_text": ("Gemma4ForCausalLM", (("0.10.2", "head_dim"),)),
    "gpt_oss": ("GptOssForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen3_next": ("Qwen3NextForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen3_5_text": ("Qwen3NextForCausalLM", (("0.10.2", "head_dim"),)),
    "qwen3_5_moe_text": ("Qwen3NextForCausalLM", (("0.10.2", "head_dim"),)),
}
# a model type without a family here: head_dim, as most model files and the Transformers backend read it
_HEAD_SIZE_READ_UNKNOWN = (None, (("0.10.2", "head_dim"),))


class ModelConfigError(ValueError):
    """A config.json this module cannot describe; the message names the seat and the field."""


def _prefix(seat):
    return "seat %s: " % seat if seat else ""


def _fail(seat, field, expected, got):
    return ModelConfigError("%smodel config field %s: expected %s, got %s"
                            % (_prefix(seat), field, expected, _show(got)))


def _show(value):
    text = json.dumps(value) if isinstance(value, (dict, list, str, bool)) or value is None \
        else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def load_model_config(source, seat=None):
    """The raw config dict from a dict, a config.json path or a model directory."""
    if isinstance(source, dict):
        return dict(source)
    if not isinstance(source, str) or not source:
        raise ModelConfigError("%smodel config: expected a dict, a config.json path or a model "
                               "directory, got %s" % (_prefix(seat), type(source).__name__))
    path = os.path.join(source, "config.json") if os.path.isdir(source) else source
    try:
        config = load_json(path)
    except ReadCapError as exc:
        raise ModelConfigError("%smodel config %s: %s" % (_prefix(seat), path, exc)) from None
    except OSError as exc:
        raise ModelConfigError("%smodel config %s: cannot read it (%s)"
                               % (_prefix(seat), path, exc.strerror or exc)) from None
    except ValueError as exc:
        raise ModelConfigError("%smodel config %s: not valid JSON (%s)"
                               % (_prefix(seat), path, exc)) from None
    if not isinstance(config, dict):
        raise ModelConfigError("%smodel config %s: expected a JSON object, got %s"
                               % (_prefix(seat), path, type(config).__name__))
    return config


class _Reader:
    """Reads fields of one (text) config with the family's class defaults, naming fields in errors."""

    def __init__(self, config, path, defaults, seat):
        self.config, self.path, self.defaults, self.seat = config, path, defaults, seat

    def name(self, key):
        return self.path + key

    def has(self, key):
        return self.config.get(key) is not None or self.defaults.get(key) is not None

    def raw(self, key):
        if key in self.config:
            return self.config[key]
        return self.defaults.get(key)

    def int(self, key, minimum=1, required=True):
        value = self.raw(key)
        if value is None and not required:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            expected = "an integer >= %d" % minimum
            raise _fail(self.seat, self.name(key), expected, value)
        return value

    def bool(self, key):
        value = self.raw(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise _fail(self.seat, self.name(key), "true or false", value)
        return value

    def fail(self, key, expected, got=None):
        return _fail(self.seat, self.name(key), expected, self.raw(key) if got is None else got)


def _split(config, seat):
    """(outer config, text config, text model_type, field path prefix)."""
    for key in _UNSUPPORTED_FIELDS:
        if config.get(key) is not None:
            raise _fail(seat, key, "no %s (not modelled)" % _UNSUPPORTED_FIELDS[key], config[key])
    outer_type = config.get("model_type")
    if not isinstance(outer_type, str) or not outer_type:
        raise _fail(seat, "model_type", "a model type string such as \"qwen3\"", outer_type)
    text = config.get("text_config")
    if text is None:
        return config, _TEXT_MODEL_TYPE.get(outer_type, outer_type), ""
    if not isinstance(text, dict):
        raise _fail(seat, "text_config", "an object", text)
    for key in _UNSUPPORTED_FIELDS:
        if text.get(key) is not None:
            raise _fail(seat, "text_config." + key,
                        "no %s (not modelled)" % _UNSUPPORTED_FIELDS[key], text[key])
    text_type = text.get("model_type") or _TEXT_MODEL_TYPE.get(outer_type)
    if not isinstance(text_type, str) or not text_type:
        raise _fail(seat, "text_config.model_type", "the text model's type", text_type)
    return text, text_type, "text_config."


def _config_dtype(config, text, seat):
    """The model dtype vLLM picks with --dtype auto: float32 (or none) becomes bfloat16."""
    for source, path in ((config, ""), (text, "text_config.")):
        for key in ("dtype", "torch_dtype"):
            value = source.get(key)
            if value is None:
                continue
            if value not in _DTYPES:
                raise _fail(seat, path + key, "one of bfloat16, float16, float32", value)
            return "bfloat16" if _DTYPES[value] == "float32" else _DTYPES[value]
    return "bfloat16"


def _checkpoint_kv_cache_dtype(config, seat):
    """What kv_cache_dtype=auto resolves to: fp8 for ModelOpt checkpoints with a KV scheme
    (vLLM utils/torch_utils.py resolve_kv_cache_dtype_string), else None (the model dtype)."""
    quant = config.get("quantization_config")
    if quant is None:
        return None
    if not isinstance(quant, dict):
        raise _fail(seat, "quantization_config", "an object", quant)
    producer = quant.get("producer")
    inner = quant.get("quantization", quant)
    is_modelopt = (str(quant.get("quant_method", "")).lower().startswith("modelopt")
                   or (isinstance(producer, dict) and producer.get("name") == "modelopt")
                   or (isinstance(inner, dict) and "modelopt_quant_config" in inner))
    if not is_modelopt or not isinstance(inner, dict):
        return None
    algo = (inner.get("kv_cache_scheme") or quant.get("kv_cache_scheme")
            or inner.get("kv_cache_quant_algo") or quant.get("kv_cache_quant_algo"))
    if isinstance(algo, dict):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 \
                and algo.get("type") == "float":
            algo = "fp8"
        elif algo.get("num_bits") == 4 and algo.get("type") == "float":
            algo = "nvfp4"
        else:
            return None
    if not isinstance(algo, str):
        return None
    algo = algo.lower()
    if algo == "fp8":
        return "fp8_e4m3"
    if algo == "nvfp4":
        raise _fail(seat, "quantization_config.kv_cache_quant_algo",
                    "no NVFP4 KV cache (its packed pages are not modelled)", algo)
    return None


def _max_len_and_key(text, defaults):
    value, key_found = None, None
    for key in _MAX_LEN_KEYS:
        candidate = text.get(key, defaults.get(key))
        if isinstance(candidate, bool) or not isinstance(candidate, (int, float)):
            continue
        if value is None or candidate < value:
            value, key_found = candidate, key
    model_max_length = text.get("model_max_length")
    if isinstance(model_max_length, (int, float)) and not isinstance(model_max_length, bool) \
            and model_max_length:
        value, key_found = model_max_length, "model_max_length"
    return (None if value is None else int(value)), key_found


def _rope_params(config, rule):
    """The field of the text config holding the RoPE parameters vLLM's check reads, and their
    dicts (one per layer type when nested)."""
    key = rule["rope_key"]
    if config.get(key) is None and rule["rope_always"]:
        key = "rope_parameters" if key == "rope_scaling" else "rope_scaling"
    rope = config.get(key)
    if not isinstance(rope, dict) or not rope:
        return key, []
    if all(isinstance(value, dict) or value is None for value in rope.values()):
        return key, [params for params in rope.values() if params]
    return key, [rope]


def _limit_under_rule(config, text_type, path, window, rule, has_rope, seat):
    """One rule's limit for a text config: ``{"limit", "is_float"}``, or ``{"error"}`` naming
    what fails the boot."""
    if "gemma3" in text_type:
        return {"limit": window, "is_float": False}
    key, params = _rope_params(config, rule)
    if not params and not (rule["rope_always"] and has_rope):
        return {"limit": window, "is_float": False}
    factor, applied = 1.0, rule["rope_always"]
    for entry in params:
        rope_type = entry.get("rope_type", entry.get("type", "default"))
        if rope_type in rule["prescaled"]:
            continue
        factor, applied = entry.get("factor", factor), True
        if rope_type == "yarn" and rule["yarn_original"]:
            original = entry.get("original_max_position_embeddings")
            if rule["outer_original"] and config.get("original_max_position_embeddings") is not None:
                original = config["original_max_position_embeddings"]
            if original is None and rule["original_default"]:
                original = config.get("max_position_embeddings", window)
            if not _positive(original):
                return {"error": "%s.original_max_position_embeddings: expected a positive integer (a yarn "
                                 "window is that length times the factor), got %s" % (path + key, _show(original))}
            window = original
    if factor is None:
        if not rule["null_factor_ok"]:
            return {"error": "%s.factor: expected a number (vLLM takes a null one for 1.0 only from "
                             "0.18), got null" % (path + key)}
        factor = 1.0
    if not applied:  # before 0.12 only a factor that applies multiplies
        return {"limit": window, "is_float": False}
    if not math.isfinite(window * factor):
        raise _fail(seat, path + key + ".factor", "a factor that keeps the window finite", factor)
    return {"limit": int(window * factor), "is_float": isinstance(factor, float)}


def _max_len_limits(config, text_type, path, published, has_rope, seat):
    """Each rule's limit, as ``[{"from": release, ...}]`` (see _limit_under_rule)."""
    for rule in (_MAX_LEN_RULES[0][1], _MAX_LEN_RULES[-1][1]):  # both fields, rope_scaling first
        key, params = _rope_params(config, rule)
        for entry in params:
            if entry.get("factor") is not None and not _positive(entry["factor"]):
                raise _fail(seat, path + key + ".factor", "a positive finite number", entry["factor"])
    return [dict(_limit_under_rule(config, text_type, path, published or 2048, rule, has_rope, seat),
                 **{"from": release}) for release, rule in _MAX_LEN_RULES]


def _positive(number):
    return not isinstance(number, bool) and isinstance(number, (int, float)) and math.isfinite(number) \
        and number > 0


def published_max_model_len(config, seat=None):
    """The model's native context window: the smallest of max_position_embeddings and its
    aliases (model_max_length wins), without any rope/YaRN extension applied."""
    text, text_type, path = _split(config, seat)
    defaults = _FAMILIES.get(text_type, {}).get("defaults", {})
    value = _max_len_and_key(text, defaults)[0]
    if value is None or value < 1:
        raise _fail(seat, path + "max_position_embeddings",
                    "the model's context window (the config names none)", value)
    return value


def _layer_types(reader, family, num_layers):
    """The per-layer attention kinds, as the transformers config class leaves them."""
    given = reader.raw("layer_types")
    if given is None:
        rule = family.get("layer_types")
        if family["kind"] == _GDN:
            interval = reader.int("full_attention_interval", required=False) or 4
            return ["linear_attention" if (i + 1) % interval else "full_attention"
                    for i in range(num_layers)]
        if rule == "gemma2":
            return ["sliding_attention" if (i + 1) % 2 else "full_attention"
                    for i in range(num_layers)]
        if rule in ("gemma3", "gemma4"):
            # Gemma 3 still honours the old sliding_window_pattern key; Gemma 4 hard-codes 5:1.
            pattern = (reader.int("sliding_window_pattern", required=False) or 6) \
                if rule == "gemma3" else 6
            kinds = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                     for i in range(num_layers)]
            if rule == "gemma4":
                kinds[-1] = "full_attention"
            return kinds
        if rule == "gemma3n":
            return ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention"
                    for i in range(num_layers)]
        if rule == "olmo3":
            return ["sliding_attention" if (i + 1) % 4 else "full_attention"
                    for i in range(num_layers)]
        if rule == "ministral":
            kind = "sliding_attention" if reader.raw("sliding_window") else "full_attention"
            return [kind] * num_layers
        return None
    if not isinstance(given, list) or len(given) != num_layers:
        raise reader.fail("layer_types", "a list of %d layer kinds (num_hidden_layers)"
                          % num_layers)
    given = [_LEGACY_LAYER_TYPES.get(kind, kind) for kind in given]
    allowed = {_GDN: ("full_attention", "linear_attention")}.get(
        family["kind"], ("full_attention", "sliding_attention"))
    if family.get("chunked_local"):
        allowed = ("full_attention", "chunked_attention")
    for index, kind in enumerate(given):
        if kind not in allowed:
            raise _fail(reader.seat, reader.name("layer_types[%d]" % index),
                        "one of %s" % ", ".join(allowed), kind)
    kinds = list(given)
    if family.get("layer_types") == "gemma4":
        kinds[-1] = "full_attention"
    if family["kind"] == _GDN and reader.raw("full_attention_interval") is not None:
        interval = reader.int("full_attention_interval")
        implied = ["linear_attention" if (i + 1) % interval else "full_attention"
                   for i in range(num_layers)]
        if implied != kinds:
            raise reader.fail("full_attention_interval",
                              "a value consistent with layer_types")
    return kinds


def _sliding_window(reader, family, kinds):
    """The window of each layer (None = full attention), following the vLLM model code."""
    num_layers = len(kinds) if kinds is not None else reader.int("num_hidden_layers")
    window = reader.raw("sliding_window")
    if family["sliding"] == "qwen2":
        # transformers drops the window unless use_sliding_window; qwen2.py asserts that a
        # window, if any, covers every layer.
        if not reader.bool("use_sliding_window"):
            return [None] * num_layers
        window = reader.int("sliding_window")
        max_window_layers = reader.int("max_window_layers", minimum=0)
        if 0 < max_window_layers < num_layers:
            raise reader.fail("max_window_layers", "0 or num_hidden_layers (%d): vLLM does not "
                              "run sliding windows on only some layers" % num_layers)
        return [window if max_window_layers == 0 else None] * num_layers
    if window is None or window == 0 or family["sliding"] == "none":
        if kinds and "sliding_attention" in kinds:
            raise reader.fail("sliding_window", "a window size for the sliding_attention layers")
        return [None] * num_layers
    window = reader.int("sliding_window")
    if reader.raw("use_bidirectional_attention") in (True, "all"):
        window = window // 2 + 1
    if family["sliding"] == "parity":
        return [window if index % 2 == 0 else None for index in range(num_layers)]
    if kinds is None or all(kind == "sliding_attention" for kind in kinds):
        return [window] * num_layers
    if family["sliding"] == "uniform":
        raise reader.fail("layer_types", "all full or all sliding layers: vLLM's %s model takes "
                          "one model-wide window" % reader.raw("model_type"))
    return [window if kind == "sliding_attention" else None for kind in kinds]


def _kv_shared_from(reader, family, kinds, windows):
    """{layer index: index of the layer whose KV cache it reuses} (Gemma 3n / Gemma 4)."""
    rule = family.get("kv_sharing")
    if rule is None:
        return {}
    num_layers = len(kinds)
    shared = reader.int("num_kv_shared_layers", minimum=0)
    if shared >= num_layers:
        raise reader.fail("num_kv_shared_layers", "fewer than num_hidden_layers (%d)" % num_layers)
    first_shared = num_layers - shared
    targets = {}
    for index in range(first_shared, num_layers):
        if rule == "gemma3n":
            target = first_shared - (2 if windows[index] is not None else 1)
        else:
            previous = kinds[:first_shared]
            if kinds[index] not in previous:
                raise reader.fail("num_kv_shared_layers", "shared layers whose attention kind "
                                  "appears among the first %d layers" % first_shared)
            target = len(previous) - 1 - previous[::-1].index(kinds[index])
        if target >= 0:
            targets[index] = target
    return targets


def _standard_geometry(reader, family, num_layers, kinds, heads, head_dim):
    kv_heads = _kv_heads(reader, heads)
    windows = _sliding_window(reader, family, kinds)
    if kinds is None:
        kinds = ["sliding_attention" if window else "full_attention" for window in windows]
    layers = []
    for index in range(num_layers):
        layer_kv, layer_dim = kv_heads, head_dim
        if family.get("layer_types") == "gemma4" and kinds[index] == "full_attention":
            layer_dim = reader.int("global_head_dim", required=False) or 512
            global_kv = reader.int("num_global_key_value_heads", required=False)
            if reader.bool("attention_k_eq_v") and global_kv is not None:
                layer_kv = global_kv
        layers.append({"kind": "sliding_attention" if windows[index] else "full_attention",
                       "num_kv_heads": layer_kv, "head_size": layer_dim,
                       "head_size_v": layer_dim, "sliding_window": windows[index]})
    for index, target in _kv_shared_from(reader, family, kinds, windows).items():
        layers[index] = dict(layers[index], kv_shared_with=target)
    return layers


def _kv_heads(reader, heads):
    for key in _KV_HEAD_KEYS:
        if reader.config.get(key) is not None:
            value = reader.int(key)
            break
    else:
        value = reader.int("num_key_value_heads", required=False) or heads
        key = "num_key_value_heads"
    if heads % value:
        raise reader.fail(key, "a divisor of num_attention_heads (%d)" % heads)
    return value


def _head_dim(reader, heads):
    head_dim = reader.raw("head_dim")
    if head_dim is not None and head_dim != 0:
        return reader.int("head_dim")
    hidden = reader.int("hidden_size")
    if hidden % heads:
        raise reader.fail("hidden_size", "a multiple of num_attention_heads (%d) when head_dim "
                          "is not given" % heads)
    return hidden // heads


def _head_size_reads(reader, text_type, heads, head_dim):
    """The head size of each release's model file (``_HEAD_SIZE_READS``), as ``[{"from":
    release, "head_size"}]``, or ``{"from", "error"}`` where the release cannot load the weights
    a head_dim that disagrees with hidden_size // num_attention_heads implies."""
    architecture, rules = _HEAD_SIZE_READS.get(text_type, _HEAD_SIZE_READ_UNKNOWN)
    reads = []
    for release, how in rules:
        quotient = head_dim if how == "head_dim" or reader.raw("head_dim") in (None, 0) \
            else reader.int("hidden_size") // heads
        if quotient == head_dim:
            reads.append({"from": release, "head_size": head_dim})
        elif how == "hidden_size" and quotient > 0:
            reads.append({"from": release, "head_size": quotient})
        else:
            reads.append({"from": release, "error": "%s: expected no head_dim or hidden_size // "
                          "num_attention_heads (%d), the size %s gives its heads (weights "
                          "shaped by a head_dim of %d do not load into it), got %d"
                          % (reader.name("head_dim"), quotient, architecture, head_dim, head_dim)})
    return reads


def _mla_geometry(reader, num_layers):
    rank = reader.int("kv_lora_rank")
    rope = reader.int("qk_rope_head_dim")
    nope = reader.int("qk_nope_head_dim", minimum=0, required=False)
    if nope is not None and nope == rope:
        raise reader.fail("qk_nope_head_dim", "a value different from qk_rope_head_dim (equal "
                          "values are the transformers 5.4 attribute_map bug)")
    layer = {"kind": "mla", "num_kv_heads": 1, "head_size": rank + rope, "head_size_v": 0,
             "sliding_window": None}
    layers = [dict(layer) for index in range(num_layers)]
    return layers, {"kv_lora_rank": rank, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope}


def _gdn_geometry(reader, kinds, heads, head_dim):
    kv_heads = _kv_heads(reader, heads)
    if "full_attention" not in kinds or "linear_attention" not in kinds:
        raise reader.fail("layer_types", "both full_attention and linear_attention layers")
    linear = {
        "num_key_heads": reader.int("linear_num_key_heads"),
        "num_value_heads": reader.int("linear_num_value_heads"),
        "key_head_dim": reader.int("linear_key_head_dim"),
        "value_head_dim": reader.int("linear_value_head_dim"),
        "conv_kernel": reader.int("linear_conv_kernel_dim", minimum=2),
    }
    if linear["num_value_heads"] % linear["num_key_heads"]:
        raise reader.fail("linear_num_value_heads",
                          "a multiple of linear_num_key_heads (%d)" % linear["num_key_heads"])
    layers = [{"kind": "linear_attention"} if kind == "linear_attention" else
              {"kind": "full_attention", "num_kv_heads": kv_heads, "head_size": head_dim,
               "head_size_v": head_dim, "sliding_window": None} for kind in kinds]
    return layers, linear


def _generic_family(reader, text_type):
    """Unknown model types: only a plain decoder whose config says nothing more."""
    for key, what in (("kv_lora_rank", "MLA"), ("linear_num_value_heads", "linear attention"),
                      ("attention_chunk_size", "chunked local attention"),
                      ("num_kv_shared_layers", "KV-sharing layers"),
                      ("sliding_window", "sliding windows")):
        if reader.raw(key) not in (None, 0, False):
            raise _fail(reader.seat, reader.name(key), "a supported model_type for %s (one of "
                        "%s), not %r" % (what, ", ".join(SUPPORTED_MODEL_TYPES), text_type),
                        reader.raw(key))
    kinds = reader.raw("layer_types")
    if kinds is not None and (not isinstance(kinds, list)
                              or any(kind != "full_attention" for kind in kinds)):
        raise _fail(reader.seat, reader.name("layer_types"), "only full_attention layers for "
                    "model_type %r (per-layer attention kinds are modelled for %s)"
                    % (text_type, ", ".join(SUPPORTED_MODEL_TYPES)), kinds)
    return _family(_STANDARD, {}, sliding="none")


def describe_model(config, seat=None):
    """A plain, validated description of the attention geometry vLLM 0.33 builds for a config.

    Returns a dict: ``model_type``, ``text_model_type``, ``architecture``, ``dtype`` (what
    ``--dtype auto`` picks), ``num_hidden_layers``, ``num_attention_heads``, ``attention``
    (``standard``, ``mla`` or ``gated_delta_net``), ``layers`` (one dict per decoder layer:
    ``kind`` = full_attention / sliding_attention / mla / linear_attention, ``num_kv_heads``,
    ``head_size``, ``head_size_v``, ``sliding_window``, and ``kv_shared_with`` for layers that
    reuse another layer's cache), ``mla``, ``linear_attention``, ``mamba_ssm_dtype``,
    ``mtp_layers``, ``checkpoint_kv_cache_dtype``, ``sinks``, ``chunked_local_attention``,
    ``published_max_model_len``, ``max_len_key``, ``derived_max_model_len`` (vLLM's own
    limit: the published window times a non-YaRN rope factor), ``derived_max_model_len_is_float``
    and ``max_len_limits`` (that limit under each release's rule: ``from``, the first release of
    the rule, with ``limit`` and ``is_float``, or ``error`` where such a release fails the boot)
    and ``head_size_reads`` (the attention head size each release's model file builds: ``from``,
    the first release of the rule, with ``head_size``, or ``error`` where such a release cannot
    load the weights the config implies).
    """
    if not isinstance(config, dict):
        raise ModelConfigError("%smodel config: expected a dict, got %s"
                               % (_prefix(seat), type(config).__name__))
    text, text_type, path = _split(config, seat)
    family = _FAMILIES.get(text_type)
    reader = _Reader(text, path, family["defaults"] if family else {}, seat)
    if family is None:
        family = _generic_family(reader, text_type)
    num_layers = reader.int("num_hidden_layers")
    heads = reader.int("num_attention_heads")
    kinds = _layer_types(reader, family, num_layers)
    linear = mla = None
    if family["kind"] == _MLA and reader.raw("kv_lora_rank") is not None:
        layers, mla = _mla_geometry(reader, num_layers)
        head_size_reads = [{"from": "0.10.2", "head_size": layers[0]["head_size"]}]
    else:
        head_dim = _head_dim(reader, heads)
        head_size_reads = _head_size_reads(reader, text_type, heads, head_dim)
        # the layers are the newest release's, with the checkpoint's head_dim where it cannot load them
        head_dim = head_size_reads[-1].get("head_size", head_dim)
        if family["kind"] == _GDN:
            layers, linear = _gdn_geometry(reader, kinds, heads, head_dim)
        else:
            if family.get("chunked_local"):
                kinds = None
            layers = _standard_geometry(reader, family, num_layers, kinds, heads, head_dim)
    ssm_dtype = None
    if family.get("ssm_dtype_from_config") and reader.raw("mamba_ssm_dtype") is not None:
        ssm_dtype = reader.raw("mamba_ssm_dtype")
        if ssm_dtype not in ("float32", "float16", "bfloat16"):
            raise reader.fail("mamba_ssm_dtype", "one of float32, float16, bfloat16")
    published, max_len_key = _max_len_and_key(text, reader.defaults)
    # transformers gives every RoPE family RoPE parameters, which the check then multiplies by
    # (a float 1.0 at least) in the releases that read them
    has_rope = text_type in _FAMILIES or any(text.get(key) is not None
                                             for key in ("rope_parameters", "rope_scaling", "rope_theta"))
    max_len_limits = _max_len_limits(text, text_type, path, published, has_rope, seat)
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list):
        raise _fail(seat, "architectures", "a list of class names", architectures)
    return {
        "model_type": config["model_type"],
        "text_model_type": text_type,
        "architecture": architectures[0] if architectures else None,
        "dtype": _config_dtype(config, text, seat),
        "num_hidden_layers": num_layers,
        "num_attention_heads": heads,
        "attention": _MLA if mla else family["kind"],
        "layers": layers,
        "mla": mla,
        "linear_attention": linear,
        "mamba_ssm_dtype": ssm_dtype,
        "mtp_layers": (reader.int(family["mtp_key"], required=False) or 1)
        if family.get("mtp_key") else 0,
        "checkpoint_kv_cache_dtype": _checkpoint_kv_cache_dtype(config, seat),
        "sinks": bool(family.get("sinks")),
        "attn_logit_softcapping": bool(reader.raw("attn_logit_softcapping")),
        "chunked_local_attention": bool(family.get("chunked_local")),
        "published_max_model_len": published,
        "max_len_key": max_len_key,
        "derived_max_model_len": max_len_limits[-1]["limit"],
        "derived_max_model_len_is_float": max_len_limits[-1]["is_float"],
        "max_len_limits": max_len_limits,
        "head_size_reads": head_size_reads,
    }
