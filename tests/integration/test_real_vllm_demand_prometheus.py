"""seat_demand against the real vLLM 0.32 (its CPU build), scraped every second by a real
Prometheus: known traffic (replies of a fixed length, and three runaways side by side) must come
back as the engine's own metrics say it, the way the stand-in's do in
test_seat_demand_prometheus.py: the request count, the percentiles Prometheus interpolates from the
replies' own token counts, the runaways, and the KV tokens the engine says it ran with."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from support.adhoc import run_module
from support.prometheus import PrometheusServer, counted_at, one_two_five, prometheus_quantile, side_by_side
from support.real_vllm import GQA_MODEL, serve, stop_engine, tiny_model
from support.wait import wait_for

pytestmark = [pytest.mark.realengine, pytest.mark.slow]

MAX_MODEL_LEN = 2048
ARGS = ["--served-model-name", "chat", "--max-model-len", str(MAX_MODEL_LEN), "--kv-cache-memory-bytes", "64M",
        "--gpu-memory-utilization", "0.1"]
SHORT_TOKENS, RUNAWAYS, RUNAWAY_TOKENS = 8, 3, 1800
# the short requests' prompts, in words: each length twice
SHORT_PROMPTS = (2, 9, 30, 70, 150, 400) * 2
MAX_RUNAWAY_ROUNDS = 3


def _complete(url, words, max_tokens):
    """One completion that runs to ``max_tokens`` (end-of-sequence ignored): its usage."""
    body = json.dumps({"model": "chat", "prompt": " ".join(["word"] * words), "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as reply:
        return json.load(reply)["usage"]


@pytest.fixture
def engine(tmp_path):
    boot = serve(tiny_model(GQA_MODEL), ARGS, until="ready", log_dir=tmp_path)
    assert boot.proc.poll() is None, boot.log[-3000:]
    yield boot
    stop_engine(boot)


def test_the_real_engines_demand_is_what_its_traffic_was(engine, tmp_path):
    target = "127.0.0.1:%d" % engine.port
    server = PrometheusServer(tmp_path, [target])
    try:
        counted = 'vllm:request_prompt_tokens_count{model_name="chat"}'
        wait_for(lambda: len(server.query(counted)) == 1, 60, "Prometheus's first scrape of the engine")
        usage = [_complete(engine.url, words, SHORT_TOKENS) for words in SHORT_PROMPTS]
        # Prometheus must have scraped the runaways while they ran, or no window holds their peak: on a
        # busy machine a round of them can end between two scrapes that answered, so another goes
        for _round in range(MAX_RUNAWAY_ROUNDS):
            usage += side_by_side([lambda n=n: _complete(engine.url, 20 * (n + 1), RUNAWAY_TOKENS)
                                   for n in range(RUNAWAYS)])
            at = counted_at(server, counted, len(usage))
            if float(server.query("max_over_time(vllm:num_requests_running[1h])")[0]["value"][1]) >= 1:
                break
        runaways = len(usage) - len(SHORT_PROMPTS)
        rc, result = run_module("llmfleet.seats.seat_demand", {
            "prometheus_url": server.url, "seats": [{"name": "chat-seat", "model_name": "chat", "port": engine.port}],
            "instance_host": "127.0.0.1", "window": "1h", "step": "1s", "at": at, "runaway_tokens": 1500})
        with urllib.request.urlopen(engine.url + "/metrics", timeout=30) as reply:
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
