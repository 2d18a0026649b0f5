"""gateway_smoke's main(): exit and fail payloads, check mode, argument validation, the key."""

from __future__ import annotations

import json

import pytest
from support.module_args import patch_module_args

from ansible_collections.llmfleet.seats.plugins.modules import gateway_smoke
from replay.server import ReplayServer

KEY = "sk-module-test-secret-5d2b8e41"


@pytest.fixture
def seat():
    with ReplayServer() as server:
        yield server


def run(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        gateway_smoke.main()
    out = capsys.readouterr().out
    return exit_info.value.code, json.loads(out), out


def test_all_checks_pass(seat, capsys):
    seat.queue("litellm_chat_prose", "litellm_stream_prose", "litellm_stream_reasoning",
               "litellm_tools_call", "vllm_tool_result_clean")
    code, result = run(capsys, {"url": seat.url, "api_key": KEY, "routes": [
        {"model": "gen-small", "checks": ["chat", "stream"]},
        {"model": "char-rp-reasoning", "checks": ["reasoning", "tools"]}]})[:2]
    assert code == 0, result
    assert result["changed"] is False and result["failed_checks"] == 0
    assert [(r["model"], r["check"], r["ok"]) for r in result["results"]] == [
        ("gen-small", "chat", True), ("gen-small", "stream", True),
        ("char-rp-reasoning", "reasoning", True), ("char-rp-reasoning", "tools", True)]
    assert result["results"][2]["reasoning_key"] == "reasoning_content"
    assert result["table"][0].split() == ["route", "check", "result", "latency", "ttft",
                                          "reasoning", "key", "why"]
    assert len(result["table"]) == 5


def test_a_failed_check_fails_the_module_naming_route_and_check(seat, capsys):
    seat.queue("vllm_chat_prose", "vllm_tools_no_parser_400")
    code, result = run(capsys, {"url": seat.url, "routes": [
        {"model": "char-rp", "checks": ["chat", "tools"]}]})[:2]
    assert code == 1
    assert result["failed"] is True and result["failed_checks"] == 1
    assert result["msg"].startswith("1 of 2 gateway checks failed: route char-rp, check tools:"
                                    " HTTP 400:")
    assert [r["ok"] for r in result["results"]] == [True, False]


def test_check_mode_still_probes(seat, capsys):
    seat.queue("vllm_chat_prose")
    code, result = run(capsys, {"url": seat.url, "_ansible_check_mode": True,
                                "routes": [{"model": "gen-small", "checks": ["chat"]}]})[:2]
    assert code == 0 and result["results"][0]["ok"]
    assert len(seat.requests) == 1


@pytest.mark.parametrize("args, message", [
    ({"url": "gw:4000", "routes": [{"model": "m"}]}, "url: expected http(s)://host:port"),
    ({"url": "http://gw:4000", "routes": [{"model": "m", "max_tokens": 1}]},
     "routes[0] (model m).max_tokens: expected an integer >= 16"),
    ({"url": "http://gw:4000", "routes": [{"model": "m", "checks": ["tool"]}]}, "tool"),
    ({"url": "http://gw:4000", "routes": [{"checks": ["chat"]}]}, "model"),
    ({"url": "http://gw:4000", "timeout": 0, "routes": [{"model": "m"}]},
     "timeout: expected a finite number of seconds > 0"),
    ({"url": "http://gw:4000", "timeout": "inf", "routes": [{"model": "m"}]},
     "timeout: expected a finite number of seconds > 0, got inf"),
])
def test_bad_input_is_one_clear_error(capsys, args, message):
    code, result, out = run(capsys, args)
    assert code == 1 and message in result["msg"]
    assert "Traceback" not in out


def test_key_never_in_the_module_output(seat, capsys):
    seat.queue_reply(401, json.dumps({"error": {"message": "key %s rejected" % KEY}}))
    code, result, out = run(capsys, {"url": seat.url, "api_key": KEY,
                                     "routes": [{"model": "gen-small", "checks": ["chat"]}]})
    assert code == 1 and "HTTP 401" in result["msg"]
    assert KEY not in out
    assert seat.requests[0]["headers"]["Authorization"] == "Bearer " + KEY
