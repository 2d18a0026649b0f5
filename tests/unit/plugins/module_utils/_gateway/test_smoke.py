"""_gateway against recorded replies of vLLM 0.33 seats and LiteLLM 1.108.7, served over real
HTTP by the replay server: every contract check passes on a correct reply and fails, naming
why, on each broken one; the API key never leaves the client."""

from __future__ import annotations

import io
import json
import socket

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common import http
from ansible_collections.llmfleet.seats.plugins.module_utils._gateway import smoke as gw
from replay.server import ReplayServer

KEY = "sk-llmfleet-unit-secret-7f3a9c1e"


@pytest.fixture
def seat():
    with ReplayServer() as server:
        yield server


def one(url, model, check, **route):
    route.update(model=model, checks=[check])
    results = gw.run_smoke(url, [route], timeout=10)
    assert len(results) == 1
    return results[0]


# ---------------------------------------------------------------------------------------------
# chat
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recording", ["vllm_chat_prose", "litellm_chat_prose"])
def test_chat_passes_on_prose(seat, recording):
    seat.queue(recording)
    result = one(seat.url + "/v1/", "gen-small", "chat")
    assert result["ok"], result
    assert "The capital of France is Paris." in result["detail"]
    assert result["latency_s"] >= 0 and result["ttft_s"] is None
    request = seat.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "gen-small"
    assert request["body"]["max_tokens"] == gw.DEFAULT_MAX_TOKENS
    assert "stream" not in request["body"]
    assert "authorization" not in {name.lower() for name in request["headers"]}


def test_chat_fails_when_the_parser_swallows_prose_into_reasoning(seat):
    seat.queue("vllm_chat_prose_swallowed_by_reasoning")
    result = one(seat.url, "char-rp", "chat")
    assert not result["ok"]
    assert "the answer went to reasoning" in result["detail"]
    assert "enable_thinking: false" in result["detail"]


def test_chat_fails_when_max_tokens_runs_out_in_reasoning(seat):
    seat.queue("vllm_chat_length_in_reasoning")
    result = one(seat.url, "char-rp-thinking", "chat", max_tokens=16)
    assert not result["ok"]
    assert "max_tokens=16 ran out before the answer (spent in reasoning)" in result["detail"]


def test_chat_fails_on_empty_content_and_non_prose_route_accepts_only_a_reply(seat):
    seat.queue("vllm_chat_empty_content", "vllm_tools_call")
    assert "content is empty" in one(seat.url, "gen-small", "chat")["detail"]
    assert one(seat.url, "gen-small", "chat", prose=False)["ok"]


def test_reasoning_route_gets_the_reasoning_budget(seat):
    seat.queue("vllm_chat_reasoning_split", "vllm_stream_reasoning")
    results = gw.run_smoke(seat.url, [{"model": "char-rp-thinking",
                                       "checks": ["chat", "reasoning"]}],
                           reasoning_max_tokens=3000)
    assert [r["ok"] for r in results] == [True, True]
    assert [r["body"]["max_tokens"] for r in seat.requests] == [3000, 3000]


def test_extra_body_reaches_the_seat(seat):
    seat.queue("vllm_stream_reasoning")
    kwargs = {"chat_template_kwargs": {"enable_thinking": True}}
    assert one(seat.url, "char-rp-thinking", "reasoning", extra_body=kwargs)["ok"]
    assert seat.requests[0]["body"]["chat_template_kwargs"] == {"enable_thinking": True}


# ---------------------------------------------------------------------------------------------
# stream
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recording", ["vllm_stream_prose", "litellm_stream_prose"])
def test_stream_parses_to_done_and_times_the_first_token(seat, recording):
    seat.queue(recording)
    result = one(seat.url, "gen-small", "stream")
    assert result["ok"], result
    assert result["ttft_s"] is not None and 0 <= result["ttft_s"] <= result["latency_s"]
    assert '"The capital of France is Paris."' in result["detail"]
    assert seat.requests[0]["body"]["stream"] is True


def test_stream_without_done_fails(seat):
    seat.queue("vllm_stream_prose_cut")
    result = one(seat.url, "gen-small", "stream")
    assert not result["ok"]
    assert "stream ended without data: [DONE] after 4 events" == result["detail"]


@pytest.mark.parametrize("recording", ["vllm_stream_error_event", "litellm_stream_error_event"])
def test_stream_error_event_fails_with_the_engines_message(seat, recording):
    seat.queue(recording)
    result = one(seat.url, "gen-small", "stream")
    assert not result["ok"]
    assert result["detail"].startswith("error event in the stream:")
    assert "The engine is dead: EngineCore encountered an issue." in result["detail"]


def test_litellm_turns_a_cut_upstream_stream_into_a_clean_one(seat):
    # Recorded: LiteLLM closes a cut vLLM stream with finish_reason=stop and [DONE] itself, so
    # through the gateway a seat dying mid-answer reads as a short answer.
    seat.queue("litellm_stream_prose_cut")
    result = one(seat.url, "gen-small", "stream")
    assert result["ok"]
    assert '"The capital of"' in result["detail"]


# ---------------------------------------------------------------------------------------------
# reasoning
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recording, key", [("vllm_stream_reasoning", "reasoning"),
                                            ("litellm_stream_reasoning", "reasoning_content")])
def test_reasoning_accepts_either_key_and_reports_it(seat, recording, key):
    seat.queue(recording)
    result = one(seat.url, "char-rp-thinking", "reasoning")
    assert result["ok"], result
    assert result["reasoning_key"] == key
    assert "reasoning in delta.%s (29 chars)" % key in result["detail"]
    assert '"17 + 25 = 42."' in result["detail"]
    assert seat.requests[0]["body"]["max_tokens"] == gw.DEFAULT_REASONING_MAX_TOKENS


@pytest.mark.parametrize("recording", ["vllm_stream_reasoning_inline",
                                       "litellm_stream_reasoning_inline"])
def test_reasoning_inline_in_content_fails(seat, recording):
    seat.queue(recording)
    result = one(seat.url, "char-rp-thinking", "reasoning")
    assert not result["ok"]
    assert result["reasoning_key"] is None
    assert result["detail"].startswith("reasoning arrived inline in content (<think>, </think>)")
    assert "--reasoning-parser" in result["detail"]


def test_reasoning_missing_fails(seat):
    seat.queue("vllm_stream_prose")
    result = one(seat.url, "gen-small", "reasoning")
    assert not result["ok"]
    assert "no reasoning in delta.reasoning or delta.reasoning_content" in result["detail"]


def test_reasoning_that_never_reaches_the_answer_fails(seat):
    seat.queue("vllm_stream_reasoning_length")
    result = one(seat.url, "char-rp-thinking", "reasoning", max_tokens=16)
    assert not result["ok"]
    assert result["reasoning_key"] == "reasoning"
    assert "max_tokens=16 ran out before the answer (spent in reasoning)" in result["detail"]


# ---------------------------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, answer", [("vllm_tools_call", "vllm_tool_result_clean"),
                                          ("litellm_tools_call", "vllm_tool_result_clean")])
def test_tool_round_trip_passes(seat, call, answer):
    seat.queue(call, answer)
    result = one(seat.url, "gen-small", "tools")
    assert result["ok"], result
    assert 'called get_weather({"city": "Paris"})' in result["detail"]
    first, second = (request["body"] for request in seat.requests)
    assert first["tool_choice"] == "auto"
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assistant, tool = second["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == "chatcmpl-tool-8c7b6a5f4e3d2c1b"
    assert tool == {"role": "tool", "tool_call_id": "chatcmpl-tool-8c7b6a5f4e3d2c1b",
                    "content": json.dumps(gw.WEATHER_RESULT)}


@pytest.mark.parametrize("recording", ["vllm_tools_no_parser_400", "litellm_tools_no_parser_400"])
def test_missing_tool_parser_400_fails_with_vllms_message(seat, recording):
    seat.queue(recording)
    result = one(seat.url, "char-rp", "tools")
    assert not result["ok"]
    assert result["http_status"] == 400
    assert result["detail"].startswith("HTTP 400:")
    assert '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser' \
        in result["detail"]
    assert result["detail"].endswith(
        "(the seat needs --enable-auto-tool-choice and --tool-call-parser)")


def test_raw_tool_call_left_in_content_fails(seat):
    seat.queue("vllm_tools_no_parser_text")
    result = one(seat.url, "gen-small", "tools")
    assert not result["ok"]
    assert "no tool call parsed; the raw call (<tool_call>, </tool_call>) stayed in content" \
        in result["detail"]


def test_prose_instead_of_a_tool_call_fails(seat):
    seat.queue("vllm_chat_prose")
    result = one(seat.url, "gen-small", "tools")
    assert not result["ok"]
    assert result["detail"].startswith("no tool call returned (finish_reason=stop)")


def test_tool_arguments_that_are_not_json_fail(seat):
    seat.queue("vllm_tools_bad_arguments")
    result = one(seat.url, "gen-small", "tools")
    assert not result["ok"]
    assert "tool call arguments are not a JSON object" in result["detail"]


@pytest.mark.parametrize("leak", ["vllm_tool_result_channel_leak",
                                  "litellm_tool_result_channel_leak"])
def test_channel_marker_after_the_tool_result_fails(seat, leak):
    seat.queue("vllm_tools_call", leak)
    result = one(seat.url, "char-rp", "tools")
    assert not result["ok"]
    assert "the turn after the tool result leaks <|channel>, <channel|> into content" \
        in result["detail"]


# ---------------------------------------------------------------------------------------------
# what the endpoint refuses
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recording, status, says", [
    ("vllm_unauthorized", 401, "HTTP 401: Unauthorized (the api_key was rejected)"),
    ("litellm_wrong_key_no_db", 400, "HTTP 400: No connected db. (the api_key was rejected)"),
    ("litellm_wrong_key_401_with_db", 401, "HTTP 401: LiteLLM Virtual Key expected."),
    ("vllm_model_not_found", 404, "(no such route/model on this endpoint)"),
    ("litellm_unknown_model", 400, "Invalid model name passed in model=no-such-route"),
    ("litellm_dead_route", 500, "(the gateway cannot reach the seat behind this route)"),
])
def test_refusals_fail_with_status_and_reason(seat, recording, status, says):
    seat.queue(recording)
    result = one(seat.url, "gen-small", "chat")
    assert not result["ok"]
    assert result["http_status"] == status
    assert says in result["detail"]


def test_dead_seat_fails_naming_the_address():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = one("http://127.0.0.1:%d" % port, "gen-small", "stream")
    assert not result["ok"] and result["http_status"] is None
    assert result["detail"].startswith("cannot reach http://127.0.0.1:%d/v1:" % port)
    assert "refused" in result["detail"].lower()


def test_silent_endpoint_times_out():
    with socket.socket() as listener:  # accepts the connection, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = "http://127.0.0.1:%d" % listener.getsockname()[1]
        result = gw.run_smoke(url, [{"model": "gen-small", "checks": ["chat"]}], timeout=0.5)[0]
    assert not result["ok"]
    assert "timed out" in result["detail"]
    assert result["latency_s"] < 5


# ---------------------------------------------------------------------------------------------
# the key
# ---------------------------------------------------------------------------------------------

def test_key_is_sent_and_never_returned_even_when_the_server_echoes_it(seat):
    masked = "%s****%s" % (KEY[:4], KEY[-4:])
    seat.queue_reply(401, json.dumps({"error": {"message": "bad key %s (%s, sk-...%s)"
                                                % (KEY, masked, KEY[-4:])}}))
    seat.queue_reply(200, "data: %s\n\ndata: [DONE]\n\n" % json.dumps(
        {"error": {"message": "upstream said Bearer %s" % KEY}}), "text/event-stream")
    seat.queue_reply(200, "not json " + KEY)
    results = gw.run_smoke(seat.url, [{"model": "gen-small", "checks": ["chat", "stream"]},
                                      {"model": "other", "checks": ["tools"]}], api_key=KEY)
    assert [r["ok"] for r in results] == [False, False, False]
    assert all(r["headers"].get("Authorization") == "Bearer " + KEY for r in seat.requests)
    everything = json.dumps(results) + gw.failures_message(results)
    assert KEY not in everything
    assert KEY[-4:] not in everything, "the masked forms LiteLLM echoes go too"
    assert json.dumps(results).count("********") == 5


def test_key_is_not_in_connection_errors():
    result = gw.run_smoke("http://127.0.0.1:9", [{"model": "m", "checks": ["chat"]}],
                          api_key=KEY)[0]
    assert not result["ok"] and KEY not in json.dumps(result)


@pytest.mark.parametrize("text, expected", [
    ("token %s here" % KEY, "token ******** here"),
    ("Received=sk-l****9c1e, expected", "Received=********, expected"),
    ("api key sk-...9c1e", "api key ********"),
    ("nothing secret", "nothing secret"),
])
def test_redact(text, expected):
    assert http.redact(text, KEY) == expected


# ---------------------------------------------------------------------------------------------
# input, parsing, report
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("routes, message", [
    ([], "routes: expected a non-empty list of {model, checks}"),
    (["gen-small"], "routes[0]: expected a dict with model and checks, got 'gen-small'"),
    ([{"checks": ["chat"]}], "routes[0].model: expected the route's model name, got None"),
    ([{"model": "a"}, {"model": "b", "checks": ["chat", "tool"]}],
     "routes[1] (model b).checks: unknown check(s) 'tool'; expected some of chat, stream,"
     " reasoning, tools"),
    ([{"model": "a", "checks": []}], "routes[0] (model a).checks: expected a non-empty list"),
    ([{"model": "a", "max_tokens": 1}], "routes[0] (model a).max_tokens: expected an integer >= 16"),
    ([{"model": "a", "prose": "yes"}], "routes[0] (model a).prose: expected true or false"),
    ([{"model": "a", "extra_body": ["x"]}], "routes[0] (model a).extra_body: expected a dict"),
])
def test_bad_routes_are_named(routes, message):
    with pytest.raises(gw.GatewaySmokeError) as error:
        gw.normalize_routes(routes)
    assert str(error.value).startswith(message)


def test_route_defaults():
    plain, thinking = gw.normalize_routes([{"model": "a"}, {"model": "b", "checks": ["reasoning"]}],
                                          max_tokens=100, reasoning_max_tokens=4000)
    assert plain == {"model": "a", "checks": ["chat", "stream"], "max_tokens": 100, "prose": True,
                     "extra_body": {}}
    assert thinking["max_tokens"] == 4000


@pytest.mark.parametrize("url, root", [
    ("http://gw:4000", "http://gw:4000/v1"),
    ("http://gw:4000/", "http://gw:4000/v1"),
    ("https://gw.example/v1/", "https://gw.example/v1"),
])
def test_api_root(url, root):
    assert gw.api_root(url) == root


@pytest.mark.parametrize("url", ["gw:4000", "", None, "ftp://gw"])
def test_api_root_rejects(url):
    with pytest.raises(gw.GatewaySmokeError, match="url: expected http"):
        gw.api_root(url)


@pytest.mark.parametrize("timeout", [0, float("inf"), float("nan")])
def test_timeout_must_be_positive_and_finite(timeout):
    with pytest.raises(gw.GatewaySmokeError, match="timeout: expected a finite number of seconds > 0"):
        gw.Client("http://gw:4000", timeout=timeout)


def test_sse_parser_joins_data_lines_and_skips_comments():
    raw = (b": keep-alive\r\n\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
           b"data:[DONE]\n\n")
    assert list(http.sse_data(io.BytesIO(raw))) == ['{"a":\n1}', "[DONE]"]


def test_failures_message_and_table():
    results = [
        {"model": "gen-small", "check": "chat", "ok": True, "detail": "fine", "latency_s": 0.5,
         "ttft_s": None, "reasoning_key": None, "http_status": None},
        {"model": "char-rp-reasoning", "check": "reasoning", "ok": False, "detail": "inline",
         "latency_s": 1.25, "ttft_s": 0.2, "reasoning_key": None, "http_status": None},
    ]
    assert gw.failures_message(results) == (
        "1 of 2 gateway checks failed: route char-rp-reasoning, check reasoning: inline")
    assert gw.failures_message(results[:1]) == ""
    assert gw.contract_table(results) == [
        "route              check      result  latency  ttft   reasoning key  why",
        "gen-small          chat       ok      0.50s    -      -",
        "char-rp-reasoning  reasoning  FAIL    1.25s    0.20s  -              inline",
    ]
