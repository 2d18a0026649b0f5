"""The twin's vLLM stand-in answers to the real vLLM 0.32 (its CPU build): the same command line
and the same requests go to both, and the endpoints, status codes, fields, error texts and the
boot log's lines must agree. Where the stand-in differs on purpose, KNOWN_DIFFERENCES says why;
a difference not listed fails the test, and so does a listed one that went away, so the list
stays true (the stand-in's README repeats it).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import in_flight
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log
from support.fake_vllm import GPU0, VLLM, GpuDriver, Seat
from support.litellm import free_port
from support.real_vllm import GQA_MODEL, serve, stop_engine, tiny_model

pytestmark = [pytest.mark.realengine, pytest.mark.slow]

KEY = "sk-contract"
ARGS = ["--served-model-name", "chat", "--max-model-len", "2048", "--kv-cache-memory-bytes", "64M",
        "--gpu-memory-utilization", "0.1", "--api-key", KEY]
AUTH = {"Authorization": "Bearer " + KEY}
# What the stand-in does differently, and why.
KNOWN_DIFFERENCES = {
    # The stand-in simulates a GPU; the real engine here is vLLM's CPU build.
    "boot.kv_cache_pool": "GPU against CPU: the stand-in plays a CUDA engine",
}


def _http(url, path, body=None, headers=None):
    """(status, parsed JSON, or the text) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, headers=dict(
        {"Content-Type": "application/json"} if data else {}, **(headers or {})))
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            status, raw, kind = reply.status, reply.read().decode(), reply.headers.get("content-type", "")
    except urllib.error.HTTPError as error:
        status, raw, kind = error.code, error.read().decode(), error.headers.get("content-type", "")
    return status, (json.loads(raw) if "json" in kind and raw else raw)


def _shape(value):
    """A JSON value's structure: dict keys (recursively), list element shapes, scalar types."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(item) for item in value[:1]]
    return type(value).__name__


def _stream(url, body):
    status, text = _http(url, "/v1/chat/completions", dict(body, stream=True), AUTH)
    events = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")] \
        if status == 200 else []
    return status, events


def _observe(url, log):
    """What the collection relies on, as one engine shows it."""
    seen = {}
    boot = parse_boot_log(log)
    for key in ("version", "kv_cache_pool", "kv_cache_tokens", "max_concurrency", "max_model_len",
                "kv_cache_memory_bytes", "startup_complete", "server_address", "errors"):
        seen["boot." + key] = boot[key] if key != "server_address" else bool(boot[key])
    seen["health"] = _http(url, "/health")[0]
    seen["models.unauthorized"] = _http(url, "/v1/models")
    status, models = _http(url, "/v1/models", headers=AUTH)
    seen["models.status"], seen["models.ids"] = status, [entry["id"] for entry in models["data"]]
    seen["models.max_model_len"] = models["data"][0]["max_model_len"]
    seen["models.shape"] = _shape(models)
    seen["version"] = _http(url, "/version")
    ask = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    status, reply = _http(url, "/v1/chat/completions", ask, AUTH)
    seen["chat.status"], seen["chat.finish_reason"] = status, reply["choices"][0]["finish_reason"]
    seen["chat.object"], seen["chat.usage.completion_tokens"] = reply["object"], reply["usage"]["completion_tokens"]
    seen["chat.id_prefix"] = reply["id"].split("-")[0]
    seen["chat.keys"] = sorted(reply)
    seen["chat.message_keys"] = sorted(reply["choices"][0]["message"])
    status, events = _stream(url, dict(ask, stream_options={"include_usage": True}))
    chunks = [json.loads(event) for event in events[:-1]]
    seen["stream.status"], seen["stream.done"] = status, events[-1] == "[DONE]"
    seen["stream.first_delta"] = chunks[0]["choices"][0]["delta"]
    seen["stream.last"] = (chunks[-1]["choices"], chunks[-1]["usage"]["completion_tokens"])
    seen["stream.object"] = sorted({chunk["object"] for chunk in chunks})
    seen["chat.unknown_model"] = _http(url, "/v1/chat/completions", dict(ask, model="other"), AUTH)
    status, error = _http(url, "/v1/chat/completions", dict(ask, max_tokens=4096), AUTH)
    seen["chat.max_tokens_over"] = (status, error["error"]["message"])
    status, error = _http(url, "/v1/chat/completions", dict(ask, messages=[
        {"role": "user", "content": "word " * 3000}]), AUTH)
    # the token counts in the text are each tokenizer's own
    seen["chat.prompt_over"] = (status, re.sub(r"\d+", "N", error["error"]["message"]))
    status, metrics = _http(url, "/metrics")
    seen["metrics.status"] = status
    seen["metrics.names"] = sorted(name for name in (
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
        "vllm:cache_config_info", "vllm:request_prompt_tokens_bucket", "vllm:request_generation_tokens_bucket",
        "vllm:request_prompt_tokens_count", "vllm:request_generation_tokens_sum") if name in metrics)
    # the request-token histograms' buckets: vLLM's 1-2-5 series up to max_model_len (calibration reads them)
    seen["metrics.prompt_buckets"] = re.findall(r'vllm:request_prompt_tokens_bucket\{[^}]*le="([^"]+)"', metrics)
    # what a window's drain reads before it stops the seat: nothing in flight once the replies are in
    seen["metrics.in_flight"] = in_flight(metrics)
    return seen


@pytest.fixture
def real(tmp_path):
    boot = serve(tiny_model(GQA_MODEL), ARGS, until="ready", log_dir=tmp_path)
    yield boot
    stop_engine(boot)


@pytest.fixture
def stand_in(tmp_path, real):
    driver = GpuDriver(tmp_path)
    port = free_port()
    env = dict(os.environ, FAKEGPU_SOCKET=driver.socket, NVIDIA_VISIBLE_DEVICES=GPU0, FAKE_VLLM_VERSION="0.32.0")
    seat = Seat(VLLM, ["serve", str(tiny_model(GQA_MODEL)), "--port", str(port)] + ARGS, env,
                tmp_path / "stand-in.log")
    try:
        seat.wait_health(timeout=60)
        yield seat
    finally:
        seat.close()
        driver.stop()


def test_the_stand_in_answers_as_the_real_engine(real, stand_in):
    live, fake = _observe(real.url, real.log), _observe(stand_in.url, stand_in.output)
    assert live["boot.version"] == "0.32.0" and live["health"] == 200 and live["chat.status"] == 200
    differing = sorted(key for key in live if live[key] != fake[key])
    details = {key: (live[key], fake[key]) for key in differing}
    assert differing == sorted(KNOWN_DIFFERENCES), json.dumps(details, indent=1, default=str)
