"""One real vLLM 0.32 (its CPU build) on a tiny model, booted once for the two things it judges
here (a boot of the real engine costs about half a minute of two cores):

- seat_demand, with the engine scraped every second by a real Prometheus: known traffic (replies
  of a fixed length, and three runaways side by side) must come back as the engine's own metrics
  say it, the way the stand-in's do in test_seat_demand_prometheus.py: the request count, the
  percentiles Prometheus interpolates from the replies' own token counts, the runaways, and the KV
  tokens the engine says it ran with. It runs first: Prometheus extrapolates a counter that starts
  above zero, bucket by bucket, and the percentiles would no longer be the replies' own.
- the twin's vLLM stand-in: the same command line and the same requests go to both, and the
  endpoints, status codes, fields, error texts and the boot log's lines must agree. Where the
  stand-in differs on purpose, KNOWN_DIFFERENCES says why; a difference not listed fails the test,
  and so does a listed one that went away, so the list stays true (the stand-in's README repeats
  it).
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
from support.adhoc import run_module
from support.fake_vllm import GPU0, VLLM, GpuDriver, Seat
from support.litellm import free_port
from support.prometheus import PrometheusServer, counted_at, one_two_five, prometheus_quantile, side_by_side
from support.real_vllm import GQA_MODEL, engine_yields, serve, stop_engine, tiny_model
from support.wait import wait_for

pytestmark = [pytest.mark.realengine, pytest.mark.slow]

KEY = "sk-contract"
MAX_MODEL_LEN = 2048
ARGS = ["--served-model-name", "chat", "--max-model-len", str(MAX_MODEL_LEN), "--kv-cache-memory-bytes", "64M",
        "--gpu-memory-utilization", "0.1", "--api-key", KEY]
AUTH = {"Authorization": "Bearer " + KEY}

SHORT_TOKENS, RUNAWAYS, RUNAWAY_TOKENS = 8, 3, 1800
# the short requests' prompts, in words: each length twice
SHORT_PROMPTS = (2, 9, 30, 70, 150, 400) * 2
# rounds of runaways until a scrape has seen them running: the tiny model makes a round's tokens in
# a second or two
MAX_RUNAWAY_ROUNDS = 5

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


def _complete(url, words, max_tokens):
    """One completion that runs to ``max_tokens`` (end-of-sequence ignored): its usage."""
    body = json.dumps({"model": "chat", "prompt": " ".join(["word"] * words), "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json", **AUTH})
    with urllib.request.urlopen(request, timeout=300) as reply:
        return json.load(reply)["usage"]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    boot = serve(tiny_model(GQA_MODEL), ARGS, until="ready", log_dir=tmp_path_factory.mktemp("real-vllm"))
    assert boot.proc.poll() is None, boot.log[-3000:]
    # a busy machine's scrapes answered while the runaways run, not once they are over
    engine_yields(boot)
    yield boot
    stop_engine(boot)


def test_the_real_engines_demand_is_what_its_traffic_was(real, tmp_path):
    target = "127.0.0.1:%d" % real.port
    server = PrometheusServer(tmp_path, [target])
    try:
        counted = 'vllm:request_prompt_tokens_count{model_name="chat"}'
        wait_for(lambda: len(server.query(counted)) == 1, 60, "Prometheus's first scrape of the engine")
        assert float(server.query(counted)[0]["value"][1]) == 0, "the engine served a request before this test"
        usage = [_complete(real.url, words, SHORT_TOKENS) for words in SHORT_PROMPTS]
        # Another round of runaways goes until the window's own figures hold a peak: a round can run
        # between two scrapes, and the window keeps each 1 s step's last sample, so a late scrape (a
        # busy machine) that shares a step with the next one is not in it
        for _round in range(MAX_RUNAWAY_ROUNDS):
            usage += side_by_side([lambda n=n: _complete(real.url, 20 * (n + 1), RUNAWAY_TOKENS)
                                   for n in range(RUNAWAYS)])
            rc, result = run_module("llmfleet.seats.seat_demand", {
                "prometheus_url": server.url, "seats": [{"name": "chat-seat", "model_name": "chat", "port": real.port}],
                "instance_host": "127.0.0.1", "window": "1h", "step": "1s", "runaway_tokens": 1500,
                "at": counted_at(server, counted, len(usage))})
            if rc != 0 or result["seats"][0]["peak_running"]:
                break
        runaways = len(usage) - len(SHORT_PROMPTS)
        with urllib.request.urlopen(real.url + "/metrics", timeout=30) as reply:
            metrics = reply.read().decode()
    finally:
        server.stop()
    assert rc == 0, result
    seat = result["seats"][0]
    assert [u["completion_tokens"] for u in usage] == [SHORT_TOKENS] * len(SHORT_PROMPTS) + [RUNAWAY_TOKENS] * runaways
    assert seat["metrics"] and seat["instance"] == target and seat["requests"] == len(usage), seat
    bounds = one_two_five(MAX_MODEL_LEN)
    for kind, field in (("prompt_tokens", "prompt_tokens"), ("generation_tokens", "completion_tokens")):
        values = [u[field] for u in usage]
        assert seat[kind] == {"p50": round(prometheus_quantile(0.5, bounds, values), 1),
                              "p99": round(prometheus_quantile(0.99, bounds, values), 1)}, (kind, values)
    # the largest bucket bound at or below 1,500 is 1,000: the three 1,800-token replies are past it
    assert seat["runaways"] == {"longer_than": 1000, "replies": runaways}
    # the KV the engine ran with, from its own cache_config_info
    info = next(line for line in metrics.splitlines() if line.startswith("vllm:cache_config_info{"))
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info))
    blocks, block_size = int(labels["num_gpu_blocks"]), int(labels["block_size"])
    assert (seat["kv_cache_tokens"], seat["kv_cache_tokens_from"]) == (blocks * block_size, "engine"), info
    assert 1 <= seat["peak_running"] <= RUNAWAYS and seat["preemptions"] == 0
    assert 0 < seat["peak_kv_tokens"] <= blocks * block_size, "a scrape that saw a request running saw its KV"
    assert "KV budget {:,} tokens".format(blocks * block_size) in result["svg"]


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
