"""_vllm_log: vLLM 0.10.1.1 - 0.33.0 boot logs, rendered from the wheels' own format strings."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import (
    VllmLogError,
    parse_boot_log,
    reserved_matches,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "vllm_logs"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
_spec = importlib.util.spec_from_file_location("vllm_log_render", FIXTURES / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)
GIB = 2 ** 30


def fixture(name):
    return (FIXTURES / (name + ".log")).read_text(encoding="utf-8")


EXACT = render.render_all()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_reads_as_rendered(name):
    for text in (fixture(name), EXACT[name + ".log"]):   # as stored (LF), as vLLM wrote it (CR LF)
        info = parse_boot_log(text)
        assert {key: info[key] for key in EXPECTED[name]} == EXPECTED[name]


def test_fixtures_are_what_render_py_writes():
    assert render.main(["--check"]) == 0, "run tests/unit/fixtures/vllm_logs/render.py"


def test_every_contract_key_is_returned_even_for_an_empty_log():
    info = parse_boot_log("")
    assert {"kv_cache_tokens", "max_concurrency", "max_model_len", "kv_cache_memory_bytes",
            "available_kv_cache_gib", "model_weights_gib", "ready", "oom_events",
            "errors"} <= set(info)
    assert info["ready"] is False and info["boots"] == 0 and info["errors"] == []
    assert info["kv_cache_tokens"] is None and info["oom_events"] == 0


@pytest.mark.parametrize("value", [None, 42, b"INFO ..."])
def test_a_log_that_is_not_text_is_one_clear_error(value):
    with pytest.raises(VllmLogError, match="^log: expected the text of a vLLM log, got "):
        parse_boot_log(value)


def test_the_seed_budget_matches_exactly_and_by_rendering():
    info = parse_boot_log(fixture("v0.33.0-seed-gen-small-no-logo"))
    assert info["kv_cache_memory_bytes"] == 5905580032 and info["kv_cache_memory_bytes_exact"]
    assert reserved_matches(5905580032, info)
    assert not reserved_matches(5905580032 + 1, info)
    assert info["model"] == "Qwen/Qwen3.5-9B"


def without_non_default_args(text):
    return "\n".join(line for line in text.split("\n") if "non-default args" not in line)


def test_without_the_cli_echo_the_bytes_come_from_the_rounded_gib():
    info = parse_boot_log(without_non_default_args(fixture("v0.33.0-kv-bytes-ready")))
    assert info["kv_cache_memory_bytes"] == 8 * GIB
    assert info["kv_cache_memory_bytes_exact"] is False
    # 8 GiB + 1 MiB prints as 8.0 too; 8.5 GiB does not
    assert reserved_matches(8 * GIB + 2 ** 20, info)
    assert not reserved_matches(8 * GIB + GIB // 2, info)


def test_a_cli_value_the_reserved_line_contradicts_is_not_trusted():
    text = fixture("v0.33.0-kv-bytes-ready").replace(
        "'kv_cache_memory_bytes': 8589934592", "'kv_cache_memory_bytes': 9663676416")
    info = parse_boot_log(text)
    assert info["kv_cache_memory_bytes"] == 8 * GIB and info["kv_cache_memory_bytes_exact"] is False


def test_0_10_2_two_decimal_gib_is_compared_the_way_it_was_printed():
    info = parse_boot_log(without_non_default_args(fixture("v0.10.2-kv-bytes-ready")))
    assert info["reserved_kv_gib"] == "22.00" and info["kv_cache_memory_bytes_exact"] is False
    assert reserved_matches(22 * GIB, info)
    assert info["initial_free_gib"] == pytest.approx(73.73095703125)


def test_colour_and_crlf_do_not_change_what_is_read():
    # vLLM 0.33's ColoredFormatter wraps the prefix, time and file in ANSI codes on a TTY
    plain = fixture("v0.33.0-kv-bytes-ready")
    coloured = "\n".join(
        line.replace("(APIServer", "\033[0;36m(APIServer").replace("pid=1)", "pid=1)\033[0;0m")
        .replace(" INFO ", " \033[32mINFO\033[0m ") + "\r" for line in plain.split("\n"))
    assert parse_boot_log(coloured) == parse_boot_log(plain)


def test_ready_is_false_once_the_engine_died_after_startup():
    info = parse_boot_log(fixture("v0.33.0-tp2-runtime-oom"))
    assert info["startup_complete"] and info["engine_dead"] and info["shutdown"]
    assert info["ready"] is False
    assert "Worker proc Worker_TP1 died unexpectedly (exit code: 1), shutting down executor." in info["errors"]


def test_a_restarted_container_is_read_for_its_last_boot_only():
    info = parse_boot_log(fixture("v0.33.0-restarted"))
    assert info["boots"] == 2 and info["ready"]
    assert info["oom_events"] == 0 and info["errors"] == []
    # the first boot alone still shows its crash
    first = fixture("v0.33.0-restarted").split("version 0.33.0")[1]
    assert parse_boot_log("▄▄ ▄█ █ version 0.33.0" + first)["torch_oom_events"] == 1


def test_failed_boots_carry_the_numbers_and_the_chain_of_errors():
    info = parse_boot_log(fixture("v0.33.0-startup-check-failed"))
    assert info["errors"][0] == "EngineCore failed to start."
    assert info["errors"][1].startswith("ValueError: Free memory on device cuda:0 (41.13/95.59 GiB)")
    assert info["errors"][2].startswith("RuntimeError: Engine core initialization failed.")
    assert len(info["errors"]) == 3, "the stderr copy of the traceback is not a second error"
    assert info["ready"] is False and info["kv_cache_tokens"] is None


def test_exception_lines_are_errors_but_traceback_bodies_are_not():
    info = parse_boot_log(fixture("v0.33.0-admission-failed"))
    assert not [e for e in info["errors"] if e.startswith(("Traceback", " ", "File"))]
    assert info["no_kv_cache_memory"] is False


def test_no_kv_memory_at_all_is_reported():
    log = render.Log("0.33.0")
    log.traceback("EngineCore", 7, "ERROR", "10-05 22:00:00", "0.33.0/engine_failed", [],
                  "ValueError: No available memory for the cache blocks. Try increasing "
                  "`gpu_memory_utilization` when initializing the engine.")
    info = parse_boot_log(log.text())
    assert info["no_kv_cache_memory"] is True


def test_util_path_suggestion_and_graphs():
    info = parse_boot_log(fixture("v0.33.0-util-ready"))
    assert info["kv_cache_memory_bytes"] is None and info["kv_cache_memory_bytes_exact"] is None
    assert info["graph_capture_gib"] == 0.63
    assert info["server_address"] == "http://0.0.0.0:8000"
    assert info["init_engine_seconds"] == 47.91


def test_auto_fit_sets_max_model_len_when_no_capacity_line_follows():
    log = render.Log("0.33.0")
    log.record("EngineCore", 9, "INFO", "10-05 22:00:00", "kv_cache_planning.py", 1405,
               "Auto-fit max_model_len: reduced from 131072 to 65520 to fit in available KV cache "
               "memory (8.0 GiB GPU)")
    assert parse_boot_log(log.text())["max_model_len"] == 65520


def render_capacity(version, tokens, max_len, conc, kv_bytes):
    log = render.Log(version)
    if version == "0.33.0":
        log.rec("APIServer", 1, "INFO", "10-05 22:00:00", "0.33.0/logo", "0.33.0", "/models/m")
        log.rec("EngineCore", 5, "INFO", "10-05 22:00:01", "0.33.0/reserved", free="70.0",
                kv=render.format_gib(kv_bytes))
        log.rec("EngineCore", 5, "INFO", "10-05 22:00:01", "0.33.0/capacity", "GPU", f"{tokens:,}",
                f"{max_len:,}", conc)
    else:
        log.rec("APIServer", 1, "INFO", "10-05 22:00:00", "0.10.2/version", "0.10.2")
        log.rec("EngineCore_DP0", 5, "INFO", "10-05 22:00:01", "0.10.2/reserved",
                free=70.0, kv=kv_bytes / GIB)
        log.rec("EngineCore_DP0", 5, "INFO", "10-05 22:00:01", "0.10.2/kv_size", f"{tokens:,}")
        log.rec("EngineCore_DP0", 5, "INFO", "10-05 22:00:01", "0.10.2/concurrency",
                f"{max_len:,}", conc)
    return log.text()


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(["0.33.0", "0.10.2"]), tokens=st.integers(16, 40_000_000),
       max_len=st.integers(1, 10_485_760), conc=st.floats(0.0, 5000.0, allow_nan=False),
       kv_bytes=st.integers(GIB // 4, 200 * GIB))
def test_capacity_and_budget_round_trip_through_either_format(version, tokens, max_len, conc, kv_bytes):
    info = parse_boot_log(render_capacity(version, tokens, max_len, conc, kv_bytes))
    assert info["version"] == version
    assert info["kv_cache_tokens"] == tokens and info["max_model_len"] == max_len
    assert info["max_concurrency"] == float("%.2f" % conc)
    assert abs(info["kv_cache_memory_bytes"] - kv_bytes) <= 0.005 * GIB + 1
    assert reserved_matches(kv_bytes, info)


def test_linear_py_reporting_a_weight_oom_is_one_oom_while_loading_weights():
    full = parse_boot_log(fixture("v0.11.0-weights-oom"))
    assert full["cause"].startswith("Failed to create unquantized linear weights: CUDA out of memory.")
    # linear.py's line alone (a log that kept no traceback) is the same event, and the cause
    log = render.Log("0.11.0")
    log.rec("APIServer", 1, "INFO", "10-05 21:40:01", "0.11.0/version", "0.11.0")
    log.rec("EngineCore_DP0", 75, "ERROR", "10-05 21:40:09", "0.11.0/linear_oom",
            "CUDA out of memory. Tried to allocate 250.00 MiB.")
    log.raw("RuntimeError: " + render.TEMPLATES["0.11.0/linear_raise"][3], "EngineCore_DP0", 75)
    alone = parse_boot_log(log.text())
    assert (alone["oom_events"], alone["torch_oom_events"], alone["oom_phases"]) == (1, 1, ["weights"])
    assert alone["cause"] == "Failed to create unquantized linear weights: CUDA out of memory. Tried to allocate 250.00 MiB."
    # each rank's own OOM is its own event
    log.rec("Worker_TP1", 76, "ERROR", "10-05 21:40:09", "0.11.0/linear_oom",
            "CUDA out of memory. Tried to allocate 250.00 MiB. GPU 1 has a total capacity of 44.39 GiB")
    assert parse_boot_log(log.text())["oom_phases"] == ["weights", "weights"]


def v0_log(args=None, refusal=None):
    log = render.Log("0.6.2")
    log.rec(None, None, "INFO", "10-05 20:10:01", "0.6.2/version", "0.6.2")
    if args is not None:
        log.rec(None, None, "INFO", "10-05 20:10:01", "0.6.2/args", "Namespace(%s)" % args)
    log.rec(None, None, "INFO", "10-05 20:10:12", "0.6.2/blocks", 1705, 2048)
    if refusal is not None:
        log.raw("ValueError: " + refusal)
    return parse_boot_log(log.text())


@pytest.mark.parametrize("args, length", [
    ("subparser='serve', model='/m', max_model_len=8192, speculative_max_model_len=None", 8192),
    ("max_model_len=8192, model='/m'", 8192),
    ("speculative_max_model_len=4096, max_model_len=None, model='/m'", None),
    ("model='/m', max_model_len=8192", 8192),
])
def test_a_v0_engine_names_its_context_only_in_its_arguments(args, length):
    boot = v0_log(args=args)
    assert boot["version"] == "0.6.2" and boot["num_gpu_blocks"] == 1705
    assert boot["max_model_len"] == length


def test_the_context_a_refusal_names_is_the_seats_when_no_other_line_names_it():
    v0 = render.TEMPLATES["0.6.2/max_seq_len"][3].format(L=131072, T=27280)
    boot = v0_log(refusal=v0)
    assert boot["admission_check"] == {"max_model_len": 131072, "needed_gib": None, "available_gib": None,
                                       "estimated_max_model_len": None, "kv_cache_tokens": 27280}
    assert boot["max_model_len"] == 131072 and boot["cause"] == "ValueError: " + v0
    # 0.10.2's wording, cut short where a log line was: the length is still read
    cut = render.TEMPLATES["0.10.2/admission"][3].format(L=131072, needed=36.0, available=20.37, estimated="")[:80]
    assert "models's max seq len (131072)" in cut
    boot = v0_log(refusal=cut)
    assert boot["admission_check"]["max_model_len"] == boot["max_model_len"] == 131072
    assert boot["admission_check"]["needed_gib"] is None
    # what the engine refused comes before what it was asked
    assert v0_log(args="max_model_len=4096", refusal=v0)["max_model_len"] == 131072
