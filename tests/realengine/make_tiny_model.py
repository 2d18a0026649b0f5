"""Make a tiny causal LM that the real vLLM serves: random weights from a fixed seed, a byte-level
BPE tokenizer trained on a few KB of text, a chat template. Nothing is downloaded.

Run by the real engine's own python (.build/real-vllm/venv, which has torch and transformers):

    python make_tiny_model.py OUT_DIR '{"model_type": "llama", "num_key_value_heads": 1, ...}' [OUT_DIR JSON ...]

The JSON holds config fields for transformers' config class of ``model_type``; the few that
every tiny model shares have defaults here. Writes config.json, model.safetensors and the
tokenizer files into each OUT_DIR (several models in one run import torch once).
"""

import json
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
# "hello" is one token, as in the models the collection serves: the window's long-request probe
# fills its prompt with it, one token a word.
TEXT = ["Seats share the cards of a host; the gateway routes each request to a seat.",
        "The quick brown fox jumps over the lazy dog.",
        "A window stops the seats that move, starts them where the plan puts them, and gates them.",
        "Every seat holds its weights, its activations and a KV cache sized for its context.",
        "hello hello hello hello hello hello hello hello", "user: hello\nassistant: hello"] * 40
DEFAULTS = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
            "max_position_embeddings": 4096, "bos_token_id": 1, "eos_token_id": 2,
            "tie_word_embeddings": False}


def tokenizer():
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(TEXT, trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def main(out_dir, spec_json):
    spec = dict(DEFAULTS, **json.loads(spec_json))
    model_type = spec.pop("model_type")
    dtype = getattr(torch, spec.pop("dtype", "bfloat16"))
    tok = tokenizer()
    config = AutoConfig.for_model(model_type, vocab_size=len(tok), **spec)
    config.dtype = dtype
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(dtype)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)


if __name__ == "__main__":
    for at in range(1, len(sys.argv), 2):
        main(*sys.argv[at:at + 2])
