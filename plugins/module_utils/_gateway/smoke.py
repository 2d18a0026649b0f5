# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The gateway_smoke checks: a real client's view of each route, through a LiteLLM gateway or
straight on a vLLM seat (``/v1/chat/completions`` of either), judged as the seat's consumers
judge the answers.

Health endpoints lie (vLLM's /health is 200 with a broken engine; LiteLLM's /health fails
reasoning models with max_tokens=1), so every check is a real completion:

- ``chat``: one request; a prose route must answer in ``content`` with no think block, channel
  marker or raw tool-call syntax left in it.
- ``stream``: the same, streamed; the stream must reach ``data: [DONE]``, and the time to the
  first token is measured.
- ``reasoning``: a streamed question whose reasoning must arrive in ``delta.reasoning`` (vLLM)
  or ``delta.reasoning_content`` (LiteLLM) and the answer in ``content``.
- ``tools``: one tool offered with ``tool_choice: auto``; a call with JSON arguments must come
  back, then the turn after the tool result must answer in ``content`` with no markup.

``normalize_routes`` checks the routes (model, checks, a ``max_tokens`` no smaller than 16,
``prose``, ``extra_body``) and fills in their defaults; ``run_smoke`` runs every check of every
route in order and returns one result per check (``ok``, ``detail`` naming what failed and, where
it can, the seat flag that fixes it, latency, time to first token, the reasoning key seen);
``failures_message`` and ``contract_table`` are what the operator reads. A check never raises
for what the endpoint answers, only for input it cannot check (``GatewaySmokeError``). Requests
go through the one HTTP client (``_common/http``), which scrubs the API key, in the forms a
gateway echoes it, from every text that leaves here. Standard library only: it runs wherever
the module runs.
"""

from __future__ import annotations

import json
import re
import time
from http.client import HTTPException

from ansible_collections.llmfleet.seats.plugins.module_utils._common import http

CHECKS = ("chat", "stream", "reasoning", "tools")
DEFAULT_CHECKS = ("chat", "stream")
# A reasoning model spends its first tokens thinking; with the tiny budgets health checks use
# (LiteLLM's is max_tokens=1) it never reaches the answer and a healthy route reads as broken.
MIN_MAX_TOKENS = 16
DEFAULT_MAX_TOKENS = 256
DEFAULT_REASONING_MAX_TOKENS = 2048

PROSE_PROMPT = "In one short sentence: what is the capital of France?"
REASONING_PROMPT = "What is 17 + 25? Think it through step by step, then give the number."
TOOL_PROMPT = "What is the weather in Paris right now? Use the get_weather tool."
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
            "required": ["city"],
        },
    },
}
WEATHER_RESULT = {"city": "Paris", "temperature_c": 21, "conditions": "sunny"}

# Text a parser should have taken out of `content`: think blocks and Gemma-4/harmony channel
# markers (reasoning left inline, or the open channel a seat without --reasoning-parser leaks
# into the turn after a tool result) and raw tool-call syntax (a seat without the right
# --tool-call-parser).
REASONING_MARKUP = ("<think>", "</think>", "<|channel>", "<channel|>", "<|channel|>",
                    "<|message|>", "<|start|>", "<|end|>")
TOOL_CALL_MARKUP = ("<tool_call>", "</tool_call>", "<|tool_call>", "<tool_call|>",
                    "[TOOL_CALLS]", "<|python_tag|>")
REASONING_KEYS = ("reasoning", "reasoning_content")
TABLE_DETAIL_CHARS = 90


class GatewaySmokeError(ValueError):
    """Input that cannot be checked; the message names the route and field."""


# ---------------------------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------------------------

def api_root(url):
    """``http://gw:4000`` or ``http://gw:4000/v1/`` -> ``http://gw:4000/v1``."""
    if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
        raise GatewaySmokeError("url: expected http(s)://host:port of a gateway or seat, got %r"
                                % (url,))
    root = url.rstrip("/")
    return root if root.endswith("/v1") else root + "/v1"


def normalize_routes(routes, max_tokens=DEFAULT_MAX_TOKENS,
                     reasoning_max_tokens=DEFAULT_REASONING_MAX_TOKENS):
    """Validate ``routes`` and fill in each route's defaults; returns new dicts."""
    for what, value in (("max_tokens", max_tokens), ("reasoning_max_tokens", reasoning_max_tokens)):
        _check_max_tokens(value, what)
    if not isinstance(routes, list) or not routes:
        raise GatewaySmokeError("routes: expected a non-empty list of {model, checks}")
    normalized = []
    for index, route in enumerate(routes):
        if not isinstance(route, dict):
            raise GatewaySmokeError("routes[%d]: expected a dict with model and checks, got %r"
                                    % (index, route))
        model = route.get("model")
        if not isinstance(model, str) or not model.strip():
            raise GatewaySmokeError("routes[%d].model: expected the route's model name, got %r"
                                    % (index, model))
        where = "routes[%d] (model %s)" % (index, model)
        checks = route.get("checks")
        if checks is None:
            checks = list(DEFAULT_CHECKS)
        if not isinstance(checks, list) or not checks:
            raise GatewaySmokeError("%s.checks: expected a non-empty list of %s, got %r"
                                    % (where, ", ".join(CHECKS), checks))
        unknown = [check for check in checks if check not in CHECKS]
        if unknown:
            raise GatewaySmokeError("%s.checks: unknown check(s) %s; expected some of %s"
                                    % (where, ", ".join(map(repr, unknown)), ", ".join(CHECKS)))
        route_max_tokens = route.get("max_tokens")
        if route_max_tokens is None:
            route_max_tokens = reasoning_max_tokens if "reasoning" in checks else max_tokens
        _check_max_tokens(route_max_tokens, where + ".max_tokens")
        prose = route.get("prose")
        if prose is None:
            prose = True
        if not isinstance(prose, bool):
            raise GatewaySmokeError("%s.prose: expected true or false, got %r" % (where, prose))
        extra_body = route.get("extra_body") or {}
        if not isinstance(extra_body, dict):
            raise GatewaySmokeError("%s.extra_body: expected a dict merged into each request body,"
                                    " got %r" % (where, extra_body))
        normalized.append({"model": model, "checks": list(dict.fromkeys(checks)),
                           "max_tokens": route_max_tokens, "prose": prose,
                           "extra_body": extra_body})
    return normalized


def _check_max_tokens(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_MAX_TOKENS:
        raise GatewaySmokeError(
            "%s: expected an integer >= %d (a reasoning model spends small budgets thinking and"
            " never answers), got %r" % (what, MIN_MAX_TOKENS, value))


# ---------------------------------------------------------------------------------------------
# transport
# ---------------------------------------------------------------------------------------------

class _Failure(Exception):
    """A check failed; ``detail`` is what the operator reads (run_check scrubs the key)."""

    def __init__(self, detail, http_status=None, extra=None):
        super().__init__(detail)
        self.detail = detail
        self.http_status = http_status
        self.extra = extra or {}


class Client(http.Client):
    """POSTs chat completions to a gateway's (or seat's) ``/v1``; what leaves it is scrubbed."""

    def __init__(self, url, api_key=None, timeout=60, validate_certs=True):
        try:
            super().__init__(api_root(url), api_key, timeout, validate_certs)
        except ValueError as exc:
            raise GatewaySmokeError(str(exc)) from None

    def _open(self, body):
        """POST ``body``; returns (connection, response) of a 2xx reply, else raises _Failure."""
        try:
            connection, reply = self.open("POST", "/chat/completions", body)
        except http.Unreachable as error:
            raise _Failure(error.detail) from None
        if reply.status >= 300:
            try:
                detail = self._http_error(reply)
            finally:
                connection.close()
            raise _Failure(detail, reply.status)
        return connection, reply

    def post(self, body):
        """Non-streaming request -> the decoded JSON reply."""
        connection, reply = self._open(body)
        try:
            text = reply.read().decode("utf-8", "replace")
        except (HTTPException, OSError) as error:
            raise _Failure("reply cut off: %s" % http.reason(error), reply.status) from None
        finally:
            connection.close()
        try:
            return json.loads(text)
        except ValueError:
            raise _Failure(self.redact("HTTP %d but the body is not JSON: %s"
                                       % (reply.status, http.excerpt(text))), reply.status) from None

    def stream(self, body):
        """Streaming request -> (events, saw_done, ttft_s): SSE parsed up to [DONE]."""
        started = time.monotonic()
        connection, reply = self._open(body)
        events, saw_done, ttft = [], False, None
        try:
            for data in http.sse_data(reply):
                if data == "[DONE]":
                    saw_done = True
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    raise _Failure(self.redact("stream event is not JSON: %s"
                                               % http.excerpt(data)), reply.status) from None
                if ttft is None and _carries_token(event):
                    ttft = time.monotonic() - started
                events.append(event)
        except (HTTPException, OSError) as error:
            raise _Failure("stream broke after %d events: %s" % (len(events), http.reason(error)),
                           reply.status) from None
        finally:
            connection.close()
        return events, saw_done, ttft

    def _http_error(self, reply):
        try:
            text = reply.read().decode("utf-8", "replace")
        except (HTTPException, OSError):
            text = ""
        message = http.error_message(text) or reply.reason or ""
        detail = "HTTP %d: %s" % (reply.status, http.excerpt(message, 400))
        hint = _hint(reply.status, message)
        if hint:
            detail += " (%s)" % hint
        return self.redact(detail)


def _carries_token(event):
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls") or any(
                delta.get(key) for key in REASONING_KEYS):
            return True
    return False


def _hint(status, message):
    lowered = message.lower()
    if "tool-call-parser" in lowered or "enable-auto-tool-choice" in lowered:
        return "the seat needs --enable-auto-tool-choice and --tool-call-parser"
    if status == 401 or "no connected db" in lowered:
        # LiteLLM without a database answers any key but the master key with 400 "No connected db."
        return "the api_key was rejected"
    if "invalid model name" in lowered or status == 404:
        return "no such route/model on this endpoint"
    if "cannot connect to host" in lowered or "connection error" in lowered \
            or "connect call failed" in lowered:
        return "the gateway cannot reach the seat behind this route"
    return ""


def _request(route, messages, stream=False, tools=None):
    body = {"model": route["model"], "messages": messages, "max_tokens": route["max_tokens"]}
    if stream:
        body["stream"] = True
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    body.update(route["extra_body"])
    return body


def _first_message(reply):
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise _Failure("reply has no choices: %s" % http.excerpt(json.dumps(reply)))
    return choices[0].get("message") or {}, choices[0].get("finish_reason")


def _reasoning_text(container):
    """{key: text} for every reasoning key that carries text."""
    return {key: container[key] for key in REASONING_KEYS
            if isinstance(container.get(key), str) and container[key].strip()}


def _markup_in(text, markers):
    return [marker for marker in markers if marker in (text or "")]


def _quote(text):
    return '"%s"' % http.excerpt(text, 60)


def _why_no_answer(route, finish_reason, reasoning):
    if finish_reason == "length":
        return ("max_tokens=%d ran out before the answer%s; raise this route's max_tokens"
                % (route["max_tokens"], " (spent in reasoning)" if reasoning else ""))
    if reasoning:
        key = sorted(reasoning)[0]
        return ("the answer went to %s (%d chars) and content is empty: the reasoning parser"
                " treats this turn as thinking (set default enable_thinking: false on the seat)"
                % (key, len(reasoning[key])))
    return "content is empty (finish_reason=%s)" % finish_reason


def check_chat(client, route):
    message, finish_reason = _first_message(client.post(
        _request(route, [{"role": "user", "content": PROSE_PROMPT}])))
    content = message.get("content") or ""
    reasoning = _reasoning_text(message)
    if route["prose"]:
        if not content.strip():
            raise _Failure(_why_no_answer(route, finish_reason, reasoning))
        leaked = _markup_in(content, REASONING_MARKUP + TOOL_CALL_MARKUP)
        if leaked:
            raise _Failure("content carries %s: %s" % (", ".join(leaked), _quote(content)))
    elif not (content.strip() or reasoning or message.get("tool_calls")):
        raise _Failure("empty reply (finish_reason=%s)" % finish_reason)
    return {"detail": "answered %s (finish_reason=%s)" % (_quote(content), finish_reason)}


def _collect_stream(events):
    content, reasoning, finish_reason = [], {}, None
    for event in events:
        if "error" in event:
            raise _Failure("error event in the stream: %s"
                           % http.excerpt(http.error_message(json.dumps(event)), 400))
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for key in REASONING_KEYS:
                if isinstance(delta.get(key), str):
                    reasoning.setdefault(key, []).append(delta[key])
            finish_reason = choice.get("finish_reason") or finish_reason
    reasoning = {key: "".join(parts) for key, parts in reasoning.items() if "".join(parts).strip()}
    return "".join(content), reasoning, finish_reason


def _stream(client, route, prompt):
    events, saw_done, ttft = client.stream(
        _request(route, [{"role": "user", "content": prompt}], stream=True))
    content, reasoning, finish_reason = _collect_stream(events)
    if not saw_done:
        raise _Failure("stream ended without data: [DONE] after %d events" % len(events))
    return content, reasoning, finish_reason, ttft, len(events)


def check_stream(client, route):
    content, reasoning, finish_reason, ttft, count = _stream(client, route, PROSE_PROMPT)
    result = {"ttft_s": _round(ttft)}
    if ttft is None:
        raise _Failure("stream reached [DONE] after %d events without a single token" % count)
    if route["prose"]:
        if not content.strip():
            raise _Failure(_why_no_answer(route, finish_reason, reasoning), extra=result)
        leaked = _markup_in(content, REASONING_MARKUP + TOOL_CALL_MARKUP)
        if leaked:
            raise _Failure("streamed content carries %s: %s"
                           % (", ".join(leaked), _quote(content)), extra=result)
    result["detail"] = ("%d events to [DONE], first token after %.2f s, content %s"
                        % (count, ttft, _quote(content)))
    return result


def check_reasoning(client, route):
    # Streamed, as the seats' consumers read it; vLLM before 0.28 cannot split a non-streamed
    # reply for every parser.
    content, reasoning, finish_reason, ttft, count = _stream(client, route, REASONING_PROMPT)
    result = {"ttft_s": _round(ttft), "reasoning_key": ",".join(sorted(reasoning)) or None}
    inline = _markup_in(content, REASONING_MARKUP)
    if inline:
        raise _Failure("reasoning arrived inline in content (%s): the seat needs"
                       " --reasoning-parser; content %s" % (", ".join(inline), _quote(content)),
                       extra=result)
    if not reasoning:
        raise _Failure("no reasoning in delta.reasoning or delta.reasoning_content (thinking off"
                       " for this route? pass chat_template_kwargs in extra_body)", extra=result)
    if not content.strip():
        raise _Failure(_why_no_answer(route, finish_reason, reasoning), extra=result)
    key = result["reasoning_key"]
    result["detail"] = ("reasoning in delta.%s (%d chars), answer in content %s"
                        % (key, sum(len(text) for text in reasoning.values()), _quote(content)))
    return result


def check_tools(client, route):
    messages = [{"role": "user", "content": TOOL_PROMPT}]
    message, finish_reason = _first_message(
        client.post(_request(route, messages, tools=[WEATHER_TOOL])))
    calls = message.get("tool_calls") or []
    if not calls:
        content = message.get("content") or ""
        raw = _markup_in(content, TOOL_CALL_MARKUP)
        if raw:
            raise _Failure("no tool call parsed; the raw call (%s) stayed in content: the seat"
                           " needs --enable-auto-tool-choice and the right --tool-call-parser"
                           % ", ".join(raw))
        raise _Failure("no tool call returned (finish_reason=%s), content %s"
                       % (finish_reason, _quote(content)))
    call = calls[0]
    function = call.get("function") or {}
    name = function.get("name")
    if name != WEATHER_TOOL["function"]["name"]:
        raise _Failure("tool call names %r, expected %r" % (name, WEATHER_TOOL["function"]["name"]))
    try:
        arguments = json.loads(function.get("arguments") or "")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise _Failure("tool call arguments are not a JSON object: %s"
                       % http.excerpt(function.get("arguments")))
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call.get("id") or "call_0",
         "content": json.dumps(WEATHER_RESULT)},
    ]
    follow_up, finish_reason = _first_message(
        client.post(_request(route, messages, tools=[WEATHER_TOOL])))
    content = follow_up.get("content") or ""
    leaked = _markup_in(content, REASONING_MARKUP + TOOL_CALL_MARKUP)
    if leaked:
        raise _Failure("the turn after the tool result leaks %s into content (the seat needs"
                       " --reasoning-parser): %s" % (", ".join(leaked), _quote(content)))
    if not content.strip():
        raise _Failure("the turn after the tool result is empty: "
                       + _why_no_answer(route, finish_reason, _reasoning_text(follow_up)))
    return {"detail": "called %s(%s); after the result: %s"
                      % (name, json.dumps(arguments, sort_keys=True), _quote(content))}


CHECK_FUNCTIONS = {"chat": check_chat, "stream": check_stream, "reasoning": check_reasoning,
                   "tools": check_tools}


def _round(seconds):
    return None if seconds is None else round(seconds, 3)


def run_check(client, route, check):
    """One check of one route -> ``{model, check, ok, detail, latency_s, ttft_s,
    reasoning_key, http_status}``. Never raises for what the endpoint answers."""
    result = {"model": route["model"], "check": check, "ok": True, "detail": "",
              "latency_s": None, "ttft_s": None, "reasoning_key": None, "http_status": None}
    started = time.monotonic()
    try:
        result.update(CHECK_FUNCTIONS[check](client, route))
    except _Failure as failure:
        result.update(failure.extra)
        result.update(ok=False, detail=client.redact(failure.detail),
                      http_status=failure.http_status)
    result["latency_s"] = _round(time.monotonic() - started)
    result["detail"] = client.redact(result["detail"])
    return result


def run_smoke(url, routes, api_key=None, timeout=60, validate_certs=True,
              max_tokens=DEFAULT_MAX_TOKENS, reasoning_max_tokens=DEFAULT_REASONING_MAX_TOKENS):
    """Run every declared check of every route, in order; returns the list of results."""
    client = Client(url, api_key=api_key, timeout=timeout, validate_certs=validate_certs)
    return [run_check(client, route, check)
            for route in normalize_routes(routes, max_tokens, reasoning_max_tokens)
            for check in route["checks"]]


def failures_message(results):
    """One line naming every failed route and check, or '' when all passed."""
    failed = [result for result in results if not result["ok"]]
    if not failed:
        return ""
    return "%d of %d gateway checks failed: %s" % (
        len(failed), len(results),
        "; ".join("route %s, check %s: %s" % (result["model"], result["check"], result["detail"])
                  for result in failed))


def contract_table(results):
    """A fixed-width table, one line per route and check, for the operator's log; a failed
    check's row ends with the start of its detail."""
    header = ("route", "check", "result", "latency", "ttft", "reasoning key", "why")
    rows = [(r["model"], r["check"], "ok" if r["ok"] else "FAIL",
             "%.2fs" % r["latency_s"] if r["latency_s"] is not None else "-",
             "%.2fs" % r["ttft_s"] if r["ttft_s"] is not None else "-",
             r["reasoning_key"] or "-",
             "" if r["ok"] else http.excerpt(r["detail"], TABLE_DETAIL_CHARS)) for r in results]
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in [header] + rows]
