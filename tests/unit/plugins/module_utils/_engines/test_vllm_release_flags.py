"""A seat's flags against its own release's ``vllm serve`` (plugins/module_utils/_engines/vllm_flags.py,
read from each release's source; tests/integration/test_vllm_cli_flags.py holds the table to the
sources and the realengine lane holds 0.32's to the real parser): the plan refuses a flag, or a
field whose flag, the release does not take, naming the seat, the flag and the release. And a seat
on the release's CPU build (``vllm_platform: cpu``), planned with that build's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import (
    plan_notes,
    release_flags,
    release_parsers,
    unknown_flag,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_flags import FLAGS
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import size_seats
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import SeatSpecError, normalize_host

FV_ML1 = yaml.safe_load((Path(__file__).resolve().parents[5] / "inventories" / "fv-ml1" /
                         "host_vars" / "fv-ml1.yml").read_text())


def _refusal(**fields):
    seat = dict({"name": "gen-small", "engine": "vllm", "model": "Qwen/Qwen3.5-2B",
                 "model_config": "models/qwen3.5-2b/config.json", "max_model_len": 32768,
                 "image": "vllm/vllm-openai:v0.33.0", "port": 8011}, **fields)
    try:
        normalize_host("fv-ml1", FV_ML1["llmfleet_gpus"], [seat], FV_ML1["llmfleet_kv_factor"])
    except SeatSpecError as refused:
        return str(refused)
    return None


def test_every_modelled_release_has_its_flags():
    releases = [FLAGS[0][0]] + [release for release, _added, _removed in FLAGS[1]]
    assert releases[0] == "0.10.2" and releases[-1] == "0.33.0"
    for release in releases:
        assert {"--port", "--max-model-len", "--kv-cache-memory-bytes", "--served-model-name"} <= release_flags(release)
    with pytest.raises(KeyError):
        release_flags("0.9.0")


@pytest.mark.parametrize("arg,unknown", [
    ("--enable-prefix-caching", None), ("--no-enable-prefix-caching", None), ("--seed=7", None),
    ("--kv_cache_memory_bytes", None),             # underscores are dashes to vLLM
    ("--kv-cache-memory", None),                   # an unambiguous abbreviation
    ("--compilation-config.mode=3", None),         # a dotted key of a JSON flag
    ("-O3", None), ("-tp", None), ("7", None), ("value", None),
    ("--enable", "--enable"),                      # ambiguous: argparse refuses it
    ("--no-such-flag", "--no-such-flag"), ("-x", "-x"),
])
def test_a_flag_is_read_as_vllms_parser_reads_it(arg, unknown):
    assert unknown_flag(arg, release_flags("0.32.0")) == unknown


def test_an_extra_arg_the_release_lacks_is_refused_naming_the_release():
    # --max-num-scheduled-tokens came in 0.26
    assert _refusal(image="vllm/vllm-openai:v0.26.0", extra_args=["--max-num-scheduled-tokens", "64"]) is None
    refused = _refusal(image="vllm/vllm-openai:v0.25.1", extra_args=["--max-num-scheduled-tokens", "64"])
    assert "gen-small" in refused and "extra_args: expected flags vLLM 0.25.1's vllm serve takes (its own argument " \
        "definitions have no --max-num-scheduled-tokens), got '--max-num-scheduled-tokens'" in refused, refused
    # one it dropped: --swap-space went in 0.18
    assert "no --swap-space" in _refusal(image="vllm/vllm-openai:v0.18.1", extra_args=["--swap-space", "4"])
    assert _refusal(image="vllm/vllm-openai:v0.17.1", extra_args=["--swap-space", "4"]) is None


def test_a_field_whose_flag_the_release_lacks_is_refused():
    # --default-chat-template-kwargs came in 0.14
    refused = _refusal(image="vllm/vllm-openai:v0.13.0", default_chat_template_kwargs={"enable_thinking": False})
    assert "default_chat_template_kwargs: expected no value: vLLM 0.13.0's vllm serve has no " \
        "--default-chat-template-kwargs" in refused, refused
    assert _refusal(image="vllm/vllm-openai:v0.14.1", default_chat_template_kwargs={"enable_thinking": False}) is None


def test_a_parser_name_the_release_does_not_register_is_refused():
    # gemma4's tool parser is in 0.33; 0.10.2 had none of that name (and minimax's went since)
    assert "gemma4" in release_parsers("0.33.0", "tool_call_parser")
    assert "gemma4" not in release_parsers("0.10.2", "tool_call_parser")
    assert {"hermes", "mistral", "minimax"} <= release_parsers("0.10.2", "tool_call_parser")
    assert "minimax" not in release_parsers("0.33.0", "tool_call_parser")
    assert "deepseek_r1" in release_parsers("0.10.2", "reasoning_parser")
    assert _refusal(tool_call_parser="gemma4") is None
    refused = _refusal(image="vllm/vllm-openai:v0.10.2", tool_call_parser="gemma4")
    assert "tool_call_parser: expected a name vLLM 0.10.2 registers for --tool-call-parser" in refused, refused
    assert "got 'gemma4'" in refused and "--tool-parser-plugin" in refused
    typo = _refusal(reasoning_parser="qwen")
    assert "reasoning_parser: expected a name vLLM 0.33.0 registers for --reasoning-parser (did you mean qwen3" in typo
    # a parser of the operator's own, registered by its plugin file, is the operator's to name
    assert _refusal(tool_call_parser="my_parser", extra_args=["--tool-parser-plugin", "/srv/my_parser.py"]) is None


def _cpu_seat(tmp_path, budget, **config):
    """A seat on vLLM's CPU build serving the realengine tests' GQA model (with ``config`` changes)."""
    (tmp_path / "config.json").write_text(json.dumps(dict({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "max_position_embeddings": 4096,
        "vocab_size": 322, "dtype": "bfloat16"}, **config)))
    return {"name": "tiny", "engine": "vllm", "model": "/srv/models/tiny", "model_config": str(tmp_path / "config.json"),
            "max_model_len": 2048, "kv_cache_memory_bytes": budget, "image": "llmfleet/vllm-cpu:v0.32.0",
            "port": 8301, "vllm_platform": "cpu", "weights_bytes": "1MiB"}


def test_a_seat_on_the_cpu_build_is_sized_with_its_own_arithmetic(tmp_path):
    """vllm_platform: cpu plans the seat with vLLM's CPU platform (blocks of 128, its capacity line),
    whatever card profile the host has; another word is refused."""
    sized = size_seats("twin1", FV_ML1["llmfleet_gpus"], [_cpu_seat(tmp_path, "64MiB")], gpu_profile="rtx-pro-6000")
    assert sized["problems"] == [] and sized["seats"][0]["kv_cache_tokens"] == 131072
    assert sized["seats"][0]["first_request_error"] is None
    refused = _refusal(vllm_platform="tpu")
    assert "vllm_platform: expected cuda (the default) or cpu (vLLM's CPU build), got 'tpu'" in refused, refused


def test_a_seat_whose_engine_dies_at_its_first_request_is_planned_with_a_note(tmp_path):
    (sized,) = size_seats("twin1", FV_ML1["llmfleet_gpus"], [_cpu_seat(tmp_path, "16MiB", head_dim=16)])["seats"]
    assert sized["boot_ok"] and sized["first_request_error"] == "Unsupported CPU attention configuration: head_dim=16"
    assert plan_notes(sized) == ["- **tiny boots but dies at its first request**: Unsupported CPU attention "
                                 "configuration: head_dim=16 (seat_rebalance_runtime_probe catches it in the window)"]
    assert plan_notes(dict(sized, first_request_error=None)) == []
