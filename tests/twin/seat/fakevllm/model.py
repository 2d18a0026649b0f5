"""The model a seat serves, from its config.json: what vLLM reads to size KV and weights.

`vllm serve <model>` takes a local directory or a Hugging Face id; offline, an id resolves only
through the Hugging Face cache, as in vLLM. A missing config is vLLM's ValueError.
"""

from __future__ import annotations

import glob
import json
import math
import os

MIB = 2 ** 20

# config/model.py _get_and_verify_max_len: the keys that can hold the model's native window
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_len", "max_sequence_length", "max_seq_length", "seq_len")
# RoPE types whose max_position_embeddings is already the scaled window
_PRE_SCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}


class ModelError(Exception):
    """A model vLLM would refuse; `exc_type` and the message are what vLLM raises."""

    def __init__(self, exc_type: str, message: str):
        super().__init__(message)
        self.exc_type = exc_type


def invalid_model(model: str) -> ModelError:
    return ModelError("ValueError", (
        "Invalid repository ID or local directory specified: '%s'.\nPlease verify the following "
        "requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify a local "
        "directory that contains a recognized configuration file.\n   - For Hugging Face models: "
        "ensure the presence of a 'config.json'.\n   - For Mistral models: ensure the presence of "
        "a 'params.json'.\n" % model))


def resolve_model_dir(model: str) -> str:
    """A local directory holding config.json, or the Hugging Face cache snapshot of an id."""
    if os.path.isfile(os.path.join(model, "config.json")):
        return model
    roots = [os.environ.get("HF_HUB_CACHE"),
             os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None,
             os.path.expanduser("~/.cache/huggingface/hub")]
    for root in filter(None, roots):
        repo = os.path.join(root, "models--" + model.replace("/", "--"))
        ref = os.path.join(repo, "refs", "main")
        if os.path.isfile(ref):
            with open(ref, encoding="utf-8") as handle:
                snapshot = os.path.join(repo, "snapshots", handle.read().strip())
            if os.path.isfile(os.path.join(snapshot, "config.json")):
                return snapshot
        for snapshot in sorted(glob.glob(os.path.join(repo, "snapshots", "*"))):
            if os.path.isfile(os.path.join(snapshot, "config.json")):
                return snapshot
    raise invalid_model(model)


class Model:
    """The parts of a config.json the fake needs; `text` is the language model's config."""

    def __init__(self, model: str, directory: str, config: dict):
        self.name = model
        self.directory = directory
        self.config = config
        self.text = config.get("text_config") or config
        text = self.text
        self.architecture = (config.get("architectures") or ["UnknownForCausalLM"])[0]
        self.model_type = text.get("model_type") or config.get("model_type") or ""
        self.num_layers = int(text["num_hidden_layers"])
        self.num_heads = int(text["num_attention_heads"])
        self.num_kv_heads = int(text.get("num_key_value_heads") or self.num_heads)
        self.hidden_size = int(text["hidden_size"])
        self.head_dim = int(text.get("head_dim") or self.hidden_size // self.num_heads)
        self.dtype = str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype")
                         or config.get("dtype") or "bfloat16")
        self.thinks_by_default = not self.model_type.startswith("gemma")

    @classmethod
    def load(cls, model: str) -> "Model":
        directory = resolve_model_dir(model)
        try:
            with open(os.path.join(directory, "config.json"), encoding="utf-8") as handle:
                config = json.load(handle)
            return cls(model, directory, config)
        except (OSError, ValueError, KeyError, TypeError):
            raise invalid_model(model)

    @property
    def dtype_bytes(self) -> int:
        return _DTYPE_BYTES.get(self.dtype, 2)

    @property
    def checkpoint_kv_fp8(self) -> bool:
        """A ModelOpt checkpoint with a KV quantisation makes `auto` mean fp8
        (utils/torch_utils.py resolve_kv_cache_dtype_string)."""
        quant = self.config.get("quantization_config") or {}
        return bool(quant.get("kv_cache_quant_algo") or quant.get("kv_cache_scheme"))

    def derived_max_model_len(self):
        """(key, value): the native context window, RoPE factor applied where vLLM applies it."""
        found = [(key, self.text[key]) for key in _MAX_LEN_KEYS
                 if isinstance(self.text.get(key), int)]
        if not found:
            return "default", 2048
        key, value = min(found, key=lambda item: item[1])
        rope = self.text.get("rope_scaling") or self.text.get("rope_parameters") or {}
        rope_type = rope.get("rope_type") or rope.get("type")
        if rope.get("factor") and rope_type not in _PRE_SCALED_ROPE and "gemma3" not in self.model_type:
            value = int(value * rope["factor"])
        return key, value

    def weights_bytes(self) -> int:
        """Bytes of weights: the safetensors index's total, else the checkpoint files, else an
        estimate from the architecture."""
        index = os.path.join(self.directory, "model.safetensors.index.json")
        if os.path.isfile(index):
            try:
                with open(index, encoding="utf-8") as handle:
                    return int(json.load(handle)["metadata"]["total_size"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
        files = glob.glob(os.path.join(self.directory, "*.safetensors"))
        if files:
            return sum(os.path.getsize(f) for f in files)
        return self._estimated_weights_bytes()

    def _estimated_weights_bytes(self) -> int:
        text = self.text
        hidden, heads, kv_heads, head_dim = (self.hidden_size, self.num_heads, self.num_kv_heads,
                                             self.head_dim)
        attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
        experts = text.get("num_experts") or text.get("num_local_experts") or text.get("n_routed_experts")
        if experts:
            inner = text.get("moe_intermediate_size") or text.get("intermediate_size")
            mlp = 3 * hidden * inner * int(experts)
        else:
            mlp = 3 * hidden * int(text.get("intermediate_size") or 4 * hidden)
        vocab = int(text.get("vocab_size") or self.config.get("vocab_size") or 32000)
        tied = text.get("tie_word_embeddings", self.config.get("tie_word_embeddings"))
        embeddings = vocab * hidden * (1 if tied else 2)
        params = self.num_layers * (attention + mlp) + embeddings
        quant = self.config.get("quantization_config") or {}
        bits = quant.get("bits") or (8 if "fp8" in json.dumps(quant).lower() else
                                     4 if quant else 8 * self.dtype_bytes)
        return int(math.ceil(params * bits / 8))
