"""kv_budget's main(): sizing and evaluating through the module's argument handling, check
mode, and bad input as one clear failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.module_args import run_main

from ansible_collections.llmfleet.seats.plugins.modules import kv_budget

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "model_configs"
CONTRACT_KEYS = {"kv_cache_memory_bytes", "block_size", "bytes_per_block", "num_blocks",
                 "kv_cache_tokens", "max_concurrency", "boot_ok", "boot_error",
                 "per_token_kv_bytes", "groups", "vllm_args"}


def run(capsys, **args):
    return run_main(kv_budget.main, capsys, args)


def test_evaluates_a_budget_from_a_config_path(capsys):
    code, result = run(capsys, model_config_path=str(FIXTURES / "qwen3-8b.json"),
                       max_model_len=32768, kv_cache_memory_bytes="8G")
    assert code == 0 and result["changed"] is False
    assert CONTRACT_KEYS <= set(result)
    assert (result["num_blocks"], result["kv_cache_tokens"], result["max_concurrency"]) == \
        (3640, 58240, 1.78)
    assert result["vllm_args"] == ["--kv-cache-memory-bytes", "8589934592",
                                   "--max-model-len", "32768"]


def test_sizes_from_a_model_directory_and_an_inline_dict(capsys, tmp_path):
    config = json.loads((FIXTURES / "gpt-oss-20b.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    from_dir = run(capsys, model_config_path=str(tmp_path), max_model_len="published")[1]
    inline = run(capsys, model_config=config, max_model_len="131072")[1]
    assert from_dir == inline
    assert from_dir["max_model_len"] == 131072
    assert from_dir["kv_cache_memory_bytes"] % (512 * 1024 * 1024) == 0
    assert from_dir["max_concurrency_exact"] >= 1.25 and from_dir["boot_ok"]
    assert from_dir["min_kv_cache_memory_bytes"] <= from_dir["kv_cache_memory_bytes"]


def test_check_mode_gives_the_same_answer(capsys):
    args = {"model_config_path": str(FIXTURES / "qwen3.5-0.8b.json"),
            "max_model_len": "published", "kv_factor": 1.07, "kv_cache_dtype": "fp8",
            "gpu": "rtx-pro-6000", "max_num_seqs": 64}
    normal = run(capsys, **args)[1]
    checked = run(capsys, _ansible_check_mode=True, **args)[1]
    assert normal == checked and normal["boot_ok"]


def test_a_budget_vllm_cannot_boot_is_reported_not_failed(capsys):
    code, result = run(capsys, model_config_path=str(FIXTURES / "qwen3-32b.json"),
                       max_model_len=32768, kv_cache_memory_bytes=8589934592)
    assert code == 0
    assert result["boot_ok"] is False
    assert "the estimated maximum model length is 32752" in result["boot_error"]


@pytest.mark.parametrize("args, message", [
    ({"model_config_path": "/nonexistent/config.json", "max_model_len": 4096},
     "seat coder: model config /nonexistent/config.json: cannot read it"),
    ({"model_config": {"model_type": "qwen3"}, "max_model_len": 4096},
     "seat coder: model config field num_hidden_layers: expected an integer >= 1, got null"),
    ({"model_config_path": str(FIXTURES / "qwen3-8b.json"), "max_model_len": 4096,
      "kv_cache_memory_bytes": "8.5G"},
     "seat coder: kv_cache_memory_bytes: '8.5G' mixes decimals"),
    ({"model_config_path": str(FIXTURES / "qwen3-8b.json"), "max_model_len": 4096,
      "tensor_parallel_size": 3},
     "seat coder: tensor_parallel_size: expected a divisor of the model's 32 attention heads"),
])
def test_bad_input_fails_once_with_a_named_message(capsys, args, message):
    code, result = run(capsys, seat="coder", **args)
    assert code == 1 and result["failed"] is True
    assert result["msg"].startswith(message)
    assert "Traceback" not in result["msg"]


def test_config_sources_are_mutually_exclusive(capsys):
    code, result = run(capsys, model_config={}, model_config_path="/x", max_model_len=1)
    assert code == 1 and "mutually exclusive" in result["msg"]
