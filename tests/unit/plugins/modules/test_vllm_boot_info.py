"""vllm_boot_info's main(): the contract keys, argument rules, and clear failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.module_args import run_main

from ansible_collections.llmfleet.seats.plugins.modules import vllm_boot_info

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_logs"
CONTRACT = {"kv_cache_tokens", "max_concurrency", "max_model_len", "kv_cache_memory_bytes",
            "available_kv_cache_gib", "model_weights_gib", "ready", "oom_events", "errors"}


def run(capsys, args):
    return run_main(vllm_boot_info.main, capsys, args)


def test_reads_a_log_given_as_text(capsys):
    log = (FIXTURES / "v0.33.0-seed-gen-small-no-logo.log").read_text(encoding="utf-8")
    code, result = run(capsys, {"log": log})
    assert code == 0 and result["changed"] is False
    assert CONTRACT <= set(result)
    assert (result["kv_cache_memory_bytes"], result["kv_cache_tokens"], result["max_concurrency"],
            result["max_model_len"], result["ready"]) == (5905580032, 461215, 1.76, 262144, True)


@pytest.mark.parametrize("name, expected, match", [
    ("v0.33.0-seed-gen-small-no-logo", "5.5GiB", True),          # exact bytes in the log
    ("v0.33.0-seed-gen-small-no-logo", 5905580033, False),
    ("v0.10.2-kv-bytes-ready", 22 * 2 ** 30, True),
    ("v0.33.0-util-ready", "8GiB", False),                         # no reserved budget at all
])
def test_the_planned_budget_is_compared_as_the_log_allows(capsys, name, expected, match):
    log = (FIXTURES / (name + ".log")).read_text(encoding="utf-8")
    code, result = run(capsys, {"log": log, "expected_kv_cache_memory_bytes": expected})
    assert code == 0 and result["kv_cache_memory_bytes_match"] is match


def test_without_the_cli_echo_the_budget_is_compared_as_vllm_printed_it(capsys):
    log = "\n".join(line for line in (FIXTURES / "v0.10.2-kv-bytes-ready.log").read_text(
        encoding="utf-8").split("\n") if "non-default args" not in line)
    # 22.00 GiB as printed: 22 GiB + 3 MiB renders the same, 22.01 GiB does not
    for expected, match in ((22 * 2 ** 30 + 3 * 2 ** 20, True), (int(22.01 * 2 ** 30), False)):
        result = run(capsys, {"log": log, "expected_kv_cache_memory_bytes": expected})[1]
        assert result["kv_cache_memory_bytes_exact"] is False
        assert result["kv_cache_memory_bytes_match"] is match


def test_check_mode_reads_too(capsys):
    log = (FIXTURES / "v0.10.1.1-util-ready.log").read_text(encoding="utf-8")
    code, result = run(capsys, {"log": log, "_ansible_check_mode": True})
    assert code == 0 and result["available_kv_cache_gib"] == 24.58


def test_a_failed_boot_is_data_not_a_module_failure(capsys):
    log = (FIXTURES / "v0.33.0-admission-failed.log").read_text(encoding="utf-8")
    code, result = run(capsys, {"log": log})
    assert code == 0 and result["ready"] is False
    assert result["admission_check"]["estimated_max_model_len"] == 58224


@pytest.mark.parametrize("args, message", [
    ({}, "one of the following is required: log, container"),
    ({"log": "x", "container": "seat"}, "parameters are mutually exclusive: log|container"),
    ({"log": "x", "since": "10m"}, "missing parameter(s) required by 'since': container"),
    ({"log": "x", "docker_host": "unix:///run/docker.sock"},
     "missing parameter(s) required by 'docker_host': container"),
    ({"container": "seat", "timeout": 0}, "timeout: expected seconds > 0, got 0"),
    ({"container": " "}, "container: expected a docker container name or id, got ' '"),
    ({"container": "seat", "docker_cli": "/nonexistent/docker"},
     "container seat: cannot run /nonexistent/docker: "),
    ({"log": "x", "expected_kv_cache_memory_bytes": "5.5 gigs"},
     "expected_kv_cache_memory_bytes: unknown unit 'gigs'"),
])
def test_bad_input_is_one_clear_error(capsys, args, message):
    code, result = run(capsys, args)
    assert code == 1 and result["failed"] is True
    assert result["msg"].startswith(message), result["msg"]
    assert "Traceback" not in result["msg"]
