"""Provenance of model_config._HEAD_SIZE_READS: how each modelled release sizes a model type's
attention heads, read again from its wheel (tests/differential/vllm_sources.py, kept in
.build/cache/vllm-src).

For each model type and release: the architecture's entry in model_executor/models/registry.py
names the file that builds the attention (none, or "transformers": the Transformers backend, whose
ModelConfig.get_head_size reads head_dim), and that file either reads head_dim
(``getattr(config, "head_dim", ...)``, ``config.head_dim``) or sizes heads as
``hidden_size // self.total_num_heads``; a file without either builds llama.py's attention.
The multimodal wrappers build the language model the table names.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from support.need import need

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import _HEAD_SIZE_READS
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import MODELLED, parse_version

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "differential"))
from vllm_sources import SourceUnavailable, release_files  # noqa: E402

pytestmark = [pytest.mark.network, pytest.mark.slow]

MODELS = "vllm/model_executor/models/"
READS = re.compile(r"""getattr\(\s*(?:self\.)?config,\s*["']head_dim["']|config\.head_dim\b""")
QUOTIENT = re.compile(r"head_dim\s*=\s*(?:self\.)?hidden_size\s*//\s*self\.total_num_heads")
LLAMA = re.compile(r"from (?:\.|vllm\.model_executor\.models\.)llama import")
# text model type: (wrapper architecture, what its file shows of the language model it builds)
WRAPPERS = {
    "qwen2_5_vl_text": ("Qwen2_5_VLForConditionalGeneration", 'architectures=["Qwen2ForCausalLM"]'),
    "qwen3_vl_text": ("Qwen3VLForConditionalGeneration", "from .qwen3 import"),
    "qwen3_vl_moe_text": ("Qwen3VLMoeForConditionalGeneration", "from .qwen3_moe import"),
    "qwen3_5_text": ("Qwen3_5ForConditionalGeneration", "Qwen3NextAttention("),
    "qwen3_5_moe_text": ("Qwen3_5MoeForConditionalGeneration", "Qwen3NextAttention("),
}
FILES = sorted({name + ".py" for name in (
    "registry llama mistral mixtral qwen2 qwen2_moe qwen2_5_vl qwen3 qwen3_moe qwen3_vl qwen3_vl_moe glm4 glm4_moe "
    "phi3 gemma granite granitemoe olmo2 olmo3 seed_oss starcoder2 ernie45 llama4 gemma2 gemma3 gemma3n gemma4 "
    "gpt_oss qwen3_next qwen3_5").split()})


def module_of(registry, architecture):
    """The file the registry names for an architecture, or None for the Transformers backend."""
    found = re.search(r'"%s":\s*\(\s*"(\w+)"' % re.escape(architecture), registry)
    return None if found is None or found.group(1) == "transformers" else found.group(1)


def sizes_heads_by(root, module):
    code = "\n".join(line for line in (root / MODELS / (module + ".py")).read_text(encoding="utf-8").split("\n")
                     if not line.lstrip().startswith("#"))
    if READS.search(code):
        return "head_dim"
    if QUOTIENT.search(code):
        return "hidden_size"
    assert LLAMA.search(code), "%s.py neither reads head_dim, divides hidden_size nor builds llama.py's attention" % module
    return sizes_heads_by(root, "llama")


@pytest.mark.parametrize("release", list(MODELLED.values()))
def test_each_model_types_heads_are_sized_as_its_model_file_does(release):
    try:
        root = release_files(release, [MODELS + name for name in FILES])
    except SourceUnavailable as exc:
        need(False, str(exc))
    registry = (root / MODELS / "registry.py").read_text(encoding="utf-8")
    for model_type, (architecture, rules) in sorted(_HEAD_SIZE_READS.items()):
        how = [how for first, how in rules if parse_version(first) <= parse_version(release)][-1]
        module = module_of(registry, architecture)
        found = "head_dim" if module is None else sizes_heads_by(root, module)
        assert found == ("head_dim" if how == "head_dim" else "hidden_size"), (
            "vllm %s: %s (%s, %s) sizes heads by %s; the table says %s"
            % (release, model_type, architecture, module or "the Transformers backend", found, how))
        if model_type in WRAPPERS and module_of(registry, WRAPPERS[model_type][0]):
            wrapper = (root / MODELS / (module_of(registry, WRAPPERS[model_type][0]) + ".py")).read_text(encoding="utf-8")
            assert WRAPPERS[model_type][1] in wrapper, (release, model_type)
