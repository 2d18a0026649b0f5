"""Generated differential cases: a config.json plus the layer stack vLLM builds from it.

Each generator writes a config the way checkpoints on the Hub spell them (sometimes leaning on
the transformers class defaults, sometimes wrapped in a multimodal ``text_config``) and, next
to it, the truth: per layer its kind, KV heads, head size and window, written from the model
family's rule (vLLM's model code, transformers' config classes) rather than from the code under
test. Options cover tensor parallel 1-8, bf16/fp16/fp8 KV, budgets from 0.25 to 80 GiB,
lengths up to and past the published window, ``auto`` lengths, and the GPU profiles.
"""

from __future__ import annotations

import math
import random

GIB = 1 << 30
GPUS = ("h100", "h100", "h100", "h200", "b200", "rtx-pro-6000", "a100", "l40s")


def _layer(kind, kv_heads=0, head_size=0, window=None, shared=False):
    return {"kind": kind, "kv_heads": kv_heads, "head_size": head_size, "window": window,
            "shared": shared}


def _truth(model_type, layers, heads, dtype, max_len, len_key="max_position_embeddings",
           **extra):
    """``derived_len`` is what the config names (vLLM applies any rope factor itself)."""
    truth = {"model_type": model_type, "layers": layers, "heads": heads, "dtype": dtype,
             "derived_len": max_len, "len_key": len_key,
             "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    truth.update(extra)
    return truth


def _heads(rng, choices=(8, 16, 24, 32, 40, 48, 64, 96, 128)):
    heads = rng.choice(choices)
    kv = rng.choice([d for d in (1, 2, 4, 8, 16, heads) if heads % d == 0])
    return heads, kv


def dense(rng):
    model_type = rng.choice(["llama", "qwen3", "qwen3_moe", "mistral", "glm4_moe", "qwen2",
                             "ministral3", "seed_oss"])
    layers, (heads, kv) = rng.randint(4, 80), _heads(rng)
    head_dim = rng.choice([64, 80, 96, 128, 128, 256])
    dtype = rng.choice(["bfloat16", "bfloat16", "float16", "float32"])
    max_len = rng.choice([4096, 8192, 32768, 40960, 131072, 262144])
    config = {"architectures": ["X"], "model_type": model_type, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
              "hidden_size": heads * head_dim, "max_position_embeddings": max_len,
              "torch_dtype": dtype}
    if model_type == "mistral":
        config["sliding_window"] = None
    if model_type in ("qwen2", "qwen3", "qwen3_moe"):
        config.update(use_sliding_window=False, sliding_window=rng.choice([None, 4096]),
                      max_window_layers=layers)
    if model_type == "llama" and rng.random() < 0.3:
        del config["head_dim"]  # hidden_size / heads
    if model_type == "llama" and rng.random() < 0.3:
        del config["num_key_value_heads"]  # MHA by default
        kv = heads
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    if rng.random() < 0.25:
        # int factors keep vLLM's limit an int; a null one fails the boot before 0.18
        factor = rng.choice([2.0, 4.0, 4.0, 4, None])
        kind = rng.choice(["linear", "yarn", "yarn", "dynamic", "llama3", "deepseek_yarn"])
        config["rope_scaling"] = {"type": kind, "factor": factor}
        rope = {"rope_type": kind, "factor": factor, "rope_theta": 10000.0}
        if kind == "yarn":
            # the original length in the parameters, at the top level (which wins), or nowhere
            original = rng.choice([max_len, max_len // 4])
            where = rng.choice(["parameters", "parameters", "top", "nowhere"])
            if where == "parameters":
                config["rope_scaling"]["original_max_position_embeddings"] = original
            elif where == "top":
                config["original_max_position_embeddings"] = original
        if kind in ("yarn", "llama3"):  # as Transformers 5 standardises them
            rope["original_max_position_embeddings"] = config.get(
                "original_max_position_embeddings",
                config["rope_scaling"].get("original_max_position_embeddings", max_len))
    truth = _truth(model_type, [_layer("full", kv, head_dim)] * layers, heads,
                   "bfloat16" if dtype == "float32" else dtype, max_len)
    truth["rope_parameters"] = rope
    return config, truth


def mistral_sliding(rng):
    layers, (heads, kv) = rng.randint(8, 40), _heads(rng, (16, 32))
    window = rng.choice([1024, 4096])
    config = {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
              "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv, "hidden_size": heads * 128,
              "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}
    if rng.random() < 0.5:
        config["sliding_window"] = window
    else:
        window = 4096  # MistralConfig's default window
    return config, _truth("mistral", [_layer("sliding", kv, 128, window)] * layers, heads,
                          "bfloat16", 32768)


def gemma2(rng):
    layers, heads = 2 * rng.randint(4, 23), rng.choice([8, 16, 32])
    kv = rng.choice([d for d in (2, 4, 8, 16) if heads % d == 0])
    window = rng.choice([None, 2048, 4096])
    config = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
              "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": 256, "hidden_size": 2304,
              "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
    if window:
        config["sliding_window"] = window
    window = window or 4096
    stack = [_layer("sliding" if index % 2 == 0 else "full", kv, 256,
                    window if index % 2 == 0 else None) for index in range(layers)]
    return config, _truth("gemma2", stack, heads, "bfloat16", 8192)


def gemma3(rng):
    layers, heads = rng.randint(6, 62), rng.choice([8, 16, 32])
    kv = rng.choice([d for d in (1, 2, 4, 8, 16) if heads % d == 0])
    head_dim, window = rng.choice([128, 256]), rng.choice([512, 1024, 4096])
    pattern = rng.choice([None, 4, 6])
    text = {"model_type": "gemma3_text", "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv, "head_dim": head_dim, "hidden_size": 2560,
            "sliding_window": window,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    if pattern:
        text["sliding_window_pattern"] = pattern
    stride = pattern or 6
    kinds = ["sliding" if (index + 1) % stride else "full" for index in range(layers)]
    if rng.random() < 0.3:
        text["layer_types"] = [kind + "_attention" for kind in kinds]
    stack = [_layer(kind, kv, head_dim, window if kind == "sliding" else None) for kind in kinds]
    truth = _truth("gemma3_text", stack, heads, "bfloat16", 131072,
                   rope_parameters={"rope_type": "linear", "factor": 8.0})
    if rng.random() < 0.5:
        config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                  "text_config": text, "torch_dtype": "bfloat16"}
    else:
        config = dict(text, architectures=["Gemma3ForCausalLM"], torch_dtype="bfloat16")
    return config, truth


def gemma4(rng):
    layers, heads = rng.randint(6, 60), rng.choice([8, 16, 32])
    kv = rng.choice([d for d in (1, 2, 4, 8, 16) if heads % d == 0])
    window = rng.choice([512, 1024])
    global_dim = rng.choice([None, 256, 512])
    shared = rng.choice([0, 0, 2, 4]) if layers > 12 else 0
    k_eq_v = rng.random() < 0.3
    global_kv = rng.choice([d for d in (1, 2, 4) if heads % d == 0])
    text = {"model_type": "gemma4_text", "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 256,
            "hidden_size": 2816, "sliding_window": window, "num_kv_shared_layers": shared,
            "attention_k_eq_v": k_eq_v, "num_global_key_value_heads": global_kv,
            "max_position_embeddings": 262144}
    if global_dim:
        text["global_head_dim"] = global_dim
    kinds = ["sliding" if (index + 1) % 6 else "full" for index in range(layers)]
    kinds[-1] = "full"
    first_shared = layers - shared
    stack = []
    for index, kind in enumerate(kinds):
        is_full = kind == "full"
        stack.append(_layer(kind, global_kv if (is_full and k_eq_v) else kv,
                            (global_dim or 512) if is_full else 256,
                            None if is_full else window, shared=index >= first_shared))
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
              "text_config": text, "dtype": "bfloat16"}
    return config, _truth("gemma4_text", stack, heads, "bfloat16", 262144)


def gemma3n(rng):
    layers = rng.choice([20, 30, 35])
    shared = rng.choice([5, 10, 15])
    text = {"model_type": "gemma3n_text", "num_hidden_layers": layers, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048,
            "sliding_window": 512, "num_kv_shared_layers": shared,
            "max_position_embeddings": 32768}
    kinds = ["full" if (index + 1) % 5 == 0 else "sliding" for index in range(layers)]
    stack = [_layer(kind, 2, 256, 512 if kind == "sliding" else None,
                    shared=index >= layers - shared) for index, kind in enumerate(kinds)]
    config = {"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
              "text_config": text, "torch_dtype": "bfloat16"}
    return config, _truth("gemma3n_text", stack, 8, "bfloat16", 32768)


def gpt_oss(rng):
    layers = 2 * rng.randint(6, 18)
    config = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
              "num_hidden_layers": layers, "num_attention_heads": 64, "num_key_value_heads": 8,
              "head_dim": 64, "hidden_size": 2880, "sliding_window": 128,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
              "layer_types": ["sliding_attention", "full_attention"] * (layers // 2)}
    stack = [_layer("sliding" if index % 2 == 0 else "full", 8, 64,
                    128 if index % 2 == 0 else None) for index in range(layers)]
    return config, _truth("gpt_oss", stack, 64, "bfloat16", 131072, sinks=True)


def mla(rng):
    model_type = rng.choice(["deepseek_v2", "deepseek_v3", "glm4_moe_lite", "kimi_k2"])
    layers, heads = rng.randint(4, 61), rng.choice([16, 32, 64, 128])
    rank, rope, nope = rng.choice([(512, 64, 128), (512, 64, 192), (256, 32, 64)])
    config = {"architectures": ["X"], "model_type": model_type, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": heads, "hidden_size": 2048,
              "kv_lora_rank": rank, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope,
              "v_head_dim": 128, "max_position_embeddings": 163840, "torch_dtype": "bfloat16"}
    stack = [_layer("mla", 1, rank + rope)] * layers
    return config, _truth(model_type, stack, heads, "bfloat16", 163840,
                          mla={"nope": nope})


def llama4(rng):
    layers = 4 * rng.randint(4, 12)
    text = {"model_type": "llama4_text", "num_hidden_layers": layers, "num_attention_heads": 40,
            "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 5120,
            "attention_chunk_size": 8192, "max_position_embeddings": 262144}
    config = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
              "text_config": text, "torch_dtype": "bfloat16"}
    return config, _truth("llama4_text", [_layer("full", 8, 128)] * layers, 40, "bfloat16", 262144,
                          chunked_local=True)


# The class each GDN model type is served by: the wrappers are multimodal, the _text types text-only.
GDN_ARCHITECTURES = {"qwen3_next": "Qwen3NextForCausalLM", "qwen3_5": "Qwen3_5ForConditionalGeneration",
                     "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration", "qwen3_5_text": "Qwen3_5ForCausalLM",
                     "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM"}


def gdn(rng):
    model_type = rng.choice(["qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"])
    interval = rng.choice([2, 3, 4, 4, 4])
    layers = interval * rng.randint(2, 16)
    heads = rng.choice([8, 16, 24, 32])
    kv = rng.choice([d for d in (1, 2, 4, 8) if heads % d == 0])
    nk = rng.choice([8, 16])
    nv = nk * rng.choice([1, 2, 3, 4])
    dk = rng.choice([64, 128, 128])
    kernel = rng.choice([2, 4, 4])
    mtp = rng.choice([1, 1, 2])
    config = {"model_type": model_type, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": 256, "hidden_size": 2048,
              "full_attention_interval": interval, "linear_num_key_heads": nk,
              "linear_num_value_heads": nv, "linear_key_head_dim": dk,
              "linear_value_head_dim": 128, "linear_conv_kernel_dim": kernel,
              "max_position_embeddings": 262144}
    ssm = None
    if model_type == "qwen3_next":
        config["num_nextn_predict_layers"] = mtp
    else:
        config["mtp_num_hidden_layers"] = mtp
        ssm = rng.choice(["float32", "float32", "bfloat16", None])
        if ssm:
            config["mamba_ssm_dtype"] = ssm
    kinds = ["linear" if (index + 1) % interval else "full" for index in range(layers)]
    stack = [_layer("linear") if kind == "linear" else _layer("full", kv, 256) for kind in kinds]
    truth = _truth(model_type.replace("_text", ""), stack, heads, "bfloat16", 262144,
                   linear={"nk": nk, "nv": nv, "dk": dk, "dv": 128, "kernel": kernel},
                   ssm_dtype=ssm, mtp_layers=mtp)
    if model_type != "qwen3_next" and rng.random() < 0.5:
        outer = model_type.replace("_text", "")
        config = {"architectures": [GDN_ARCHITECTURES[outer]], "model_type": outer,
                  "text_config": config, "torch_dtype": "bfloat16"}
        truth["model_type"] = model_type
    else:
        config.update(architectures=[GDN_ARCHITECTURES[model_type]], torch_dtype="bfloat16")
    return config, truth


FAMILIES = {"dense": (dense, 5), "mistral_sliding": (mistral_sliding, 1), "gemma2": (gemma2, 1),
            "gemma3": (gemma3, 2), "gemma4": (gemma4, 2), "gemma3n": (gemma3n, 1),
            "gpt_oss": (gpt_oss, 1), "mla": (mla, 2), "llama4": (llama4, 1), "gdn": (gdn, 4)}


def _valid_tps(truth, rng):
    tps = []
    for tp in (1, 2, 4, 8):
        if truth["heads"] % tp:
            continue
        bad = False
        for layer in truth["layers"]:
            kv = layer["kv_heads"]
            if layer["kind"] in ("full", "sliding") and kv and (kv % tp if kv >= tp else tp % kv):
                bad = True
        linear = truth.get("linear")
        if linear and ((2 * linear["nk"] * linear["dk"] + linear["nv"] * linear["dv"]) % tp
                       or linear["nv"] % tp):
            bad = True
        if not bad:
            tps.append(tp)
    return tps


def make_cases(count, seed=20261005):
    """``count`` cases spread over the families by weight, deterministic for a seed."""
    rng = random.Random(seed)
    names = []
    for name, family in FAMILIES.items():
        names += [name] * family[1]
    cases = []
    while len(cases) < count:
        family = names[len(cases) % len(names)]
        config, truth = FAMILIES[family][0](rng)
        tp = rng.choice(_valid_tps(truth, rng))
        native = config.get("max_position_embeddings",
                            config.get("text_config", {}).get("max_position_embeddings", 131072))
        roll = rng.random()
        if roll < 0.08:
            max_len = "auto"
        elif roll < 0.18:
            max_len = native * rng.choice([2, 4])
        elif roll < 0.3:
            max_len = native
        else:
            max_len = rng.choice([1, 15, 16, 17, 1000, 2048, 4095, 4096, 8192, 32768, 40960,
                                  rng.randint(1, native)])
        gpu = rng.choice(GPUS)
        kv_dtype = rng.choice(["auto", "auto", "fp8", "fp8_e4m3", "bfloat16", "fp8_e5m2"])
        budget = int(math.exp(rng.uniform(math.log(0.25), math.log(80))) * GIB)
        if rng.random() < 0.2:
            budget = int(rng.choice([0.25, 0.5, 1, 2, 4, 5.5, 8, 22, 40, 80]) * GIB)
        hybrid = family == "gdn"
        options = {
            "max_model_len": max_len, "kv_cache_memory_bytes": budget,
            "kv_cache_dtype": kv_dtype, "tensor_parallel_size": tp, "gpu": gpu,
            "block_size": rng.choice([None] * 8 + [16, 32, 64, 128]),
            "enable_prefix_caching": rng.random() < 0.85,
            "max_num_batched_tokens": rng.choice([None] * 6 + [2048, 4096, 16384]),
            "max_num_seqs": rng.choice([None] * 4 + [16, 64, 256, 512]),
            "num_speculative_tokens": rng.choice([0, 0, 1, 2, 3, 4]) if hybrid else 0,
            "enforce_eager": rng.random() < 0.15,
            "mamba_cache_dtype": rng.choice(["auto"] * 5 + ["float32", "bfloat16"]),
            "mamba_ssm_cache_dtype": rng.choice(["auto"] * 5 + ["float32", "bfloat16"]),
            "disable_hybrid_kv_cache_manager": (not hybrid and rng.random() < 0.1),
            "allow_long_max_model_len": rng.random() < 0.5,
        }
        if family == "mla" and options["block_size"] not in (None, 64, 128):
            options["block_size"] = 64
        cases.append({"id": "%s-%04d" % (family, len(cases)), "family": family,
                      "config": config, "truth": truth, "options": options})
    return cases
