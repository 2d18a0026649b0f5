"""A window whose seat runs the real vLLM 0.32 (its CPU build) on the twin: planned, dry-run,
applied and gated by the collection as an operator runs it, with the engine itself printing the
KV line the plan predicted, serving the models, answering the long-request probe at 0.98 x
max_model_len, and a completion and a stream through the real LiteLLM in front of it; a second
run changes nothing, and calibrate.yml reads the seat's known traffic back from a real Prometheus
scraping it. Then two real failures, each gated and rolled back to the seats and files as
they were: a KV budget the engine cannot get (the running seat's restart), and a seat added
beside it whose engine dies at its first request (the running seat untouched). The
GPU stays simulated: the engine's resident memory is what the card holds
(tests/twin/seat/real-vllm), so the card gates judge what the seat really takes.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
import yaml

from conftest import run_ansible
from support.litellm import stop
from support.prometheus import PrometheusServer, counted_at
from support.real_vllm import REAL_ENGINE_FLEET, real_engine_fleet
from support.rollout import address_of, assert_rolled_back, gates_failed, rebalance, report_of, state, twin_pair, wait_healthy
from support.wait import wait_for
from twinlib import fleet
from twinlib.rootfs import REAL_VLLM_SITE

pytestmark = [pytest.mark.realengine, pytest.mark.litellm, pytest.mark.slow]


def _gateway(twin_inventory, tmp_path):
    """A real LiteLLM routing ``tiny`` to the seat, as the fleet's gateway would."""
    from support.litellm import LiteLLMProxy, litellm_bin  # the litellm venv is only built for this
    key = "sk-" + os.urandom(16).hex()
    config = tmp_path / "litellm.yaml"
    config.write_text(yaml.safe_dump({
        "model_list": [{"model_name": "tiny", "litellm_params": {
            "model": "hosted_vllm/tiny", "api_base": "http://%s:8301/v1" % address_of(twin_inventory)}}],
        "litellm_settings": {"num_retries": 0, "request_timeout": 120},
        "general_settings": {"master_key": key}}))
    return LiteLLMProxy(litellm_bin(), config, key)


def _gates(report):
    return {(gate["seat"], gate["gate"]): gate for gate in report["hosts"]["twin1"]["gates"]}


def _calibrated(hosts, twin_inventory, address, tmp_path):
    target = "%s:8301" % address
    (tmp_path / "prometheus").mkdir()
    server = PrometheusServer(tmp_path / "prometheus", [target])
    try:
        counted = 'vllm:request_prompt_tokens_count{model_name="tiny"}'
        # six scrapes before the traffic: its increase is then not stretched back over a short series
        scraped = "count_over_time(%s[1m])" % counted
        wait_for(lambda: float((server.query(scraped) or [{"value": [0, "0"]}])[0]["value"][1]) >= 6, 60,
                 "six scrapes of the real engine")
        already = float(server.query(counted)[0]["value"][1])   # the gates' and this test's requests so far
        replies = []
        for words in (3, 30, 300):
            request = urllib.request.Request("http://%s/v1/completions" % target, data=json.dumps({
                "model": "tiny", "prompt": " ".join(["word"] * words), "max_tokens": 12, "ignore_eos": True}).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as reply:
                replies.append(json.loads(reply.read())["usage"]["completion_tokens"])
        total = already + len(replies)
        at = counted_at(server, counted, total)
        kept = tmp_path / "demand-twin1.json"
        calibrated = run_ansible(["ansible-playbook", "-i", str(hosts), "-i", twin_inventory, "playbooks/calibrate.yml",
                                  "-e", json.dumps({"calibrate_prometheus_url": server.url, "calibrate_window": "1h",
                                                    "calibrate_step": "1s", "calibrate_at": at,
                                                    "calibrate_instance_host": address,
                                                    "calibrate_snapshot_path": str(kept)})])
    finally:
        server.stop()
    assert calibrated.returncode == 0, calibrated.stdout[-3000:]
    [tiny] = json.loads(kept.read_text())["seats"]
    # the requests of the window: the three sent while Prometheus watched
    assert replies == [12, 12, 12] and tiny["instance"] == target and tiny["requests"] == len(replies), tiny
    # the KV tokens the engine said it ran with: the plan's 131,072, from its own cache_config_info
    assert (tiny["kv_cache_tokens"], tiny["kv_cache_tokens_from"]) == (131072, "engine")


def test_a_window_of_the_real_engine_is_planned_applied_gated_and_idempotent(tmp_path):
    hosts = real_engine_fleet(tmp_path / "fleet")
    with twin_pair(REAL_ENGINE_FLEET / "spec.json", fleet_dir=hosts.parent) as twin_inventory:
        dry = rebalance(hosts, twin_inventory, tmp_path / "dry", "--check", "--diff")
        assert "CPU KV cache size" not in dry.stdout  # nothing booted in a dry run
        gateway = _gateway(twin_inventory, tmp_path)
        try:
            applied = rebalance(hosts, twin_inventory, tmp_path / "applied", "-e", json.dumps({
                "seat_rebalance_runtime_probe": True, "seat_rebalance_runtime_probe_fraction": 0.98,
                "seat_rebalance_gateway_url": gateway.url, "seat_rebalance_gateway_api_key": gateway.master_key,
                "seat_rebalance_gateway_routes": [{"model": "tiny", "checks": ["chat", "stream"]}],
                # its first deployment: nothing serves the route before the window
                "seat_rebalance_gateway_broken_routes": ["tiny"]}))
        finally:
            stop(gateway.proc)
        assert gateway.master_key not in applied.stdout + applied.stderr
        report = report_of(tmp_path / "applied")
        section = report["hosts"]["twin1"]
        assert section["status"] == "applied", json.dumps(section.get("error"))
        gates = _gates(report)
        planned = section["plan"]["seats"][0]
        for gate in ("kv_cache_tokens", "max_concurrency", "kv_reserved", "vllm_version", "health", "served_models",
                     "runtime_probe"):
            assert gates[("tiny", gate)]["ok"], gates[("tiny", gate)]
        probe_detail = gates[("tiny", "runtime_probe")]["detail"]
        assert probe_detail.startswith("a 2,007-token request (max_model_len 2,048) answered 200"), probe_detail
        for check in ("gateway_chat", "gateway_stream"):
            assert gates[("route tiny", check)]["ok"], gates[("route tiny", check)]
            assert gates[("route tiny", check + "_before")]["detail"].startswith("broken before the window too")
        assert gates[("tiny", "kv_cache_tokens")]["measured"] == planned["kv_cache_tokens"] == 131072
        assert gates[("tiny", "kv_cache_tokens")]["detail"].startswith("the log's CPU KV cache size is 131,072 tokens")
        # the card holds what the engine's processes hold, and the plan's footprint covers it
        free = gates[("GPU 0", "free_mib_boot")]
        assert free["ok"] and 81559 - free["measured"] > 200, free

        # the engine is the host's build, mounted read-only where the image's PYTHONPATH points
        mounts = json.loads(fleet.find_host("twin1").docker(["inspect", "--format", "{{json .Mounts}}", "vllm-tiny"]).stdout)
        assert [(m["Destination"], m["RW"]) for m in mounts if m["Destination"] == REAL_VLLM_SITE] == [
            (REAL_VLLM_SITE, False)], mounts

        address = address_of(twin_inventory)
        with urllib.request.urlopen("http://%s:8301/v1/models" % address, timeout=30) as reply:
            models = json.loads(reply.read())
        assert [(m["id"], m["max_model_len"]) for m in models["data"]] == [("tiny", 2048)]
        request = urllib.request.Request("http://%s:8301/v1/chat/completions" % address, data=json.dumps({
            "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as reply:
            assert json.loads(reply.read())["usage"]["completion_tokens"] == 5

        again = rebalance(hosts, twin_inventory, tmp_path / "again")
        assert report_of(tmp_path / "again")["hosts"]["twin1"]["status"] == "unchanged", again.stdout[-3000:]
        assert applied.returncode == 0

        # the operator's calibration of the real engine on its host: a real Prometheus scrapes the
        # seat, known traffic goes to it, and calibrate.yml reads it back as the engine counted it
        _calibrated(hosts, twin_inventory, address, tmp_path)

        # A budget the simulated card holds but the engine cannot get: the CPU build takes its KV from
        # the host's memory and refuses more than the node has. The plan cannot see that; the gates do,
        # and the rollback puts the running seat and its files back.
        wait_healthy("twin1")
        before = state("twin1")
        real_engine_fleet(hosts.parent, kv_cache_memory_bytes="60GiB", overhead_bytes="2GiB")
        failed = rebalance(hosts, twin_inventory, tmp_path / "too-much", check=False)
        assert failed.returncode != 0
        section = report_of(tmp_path / "too-much")["hosts"]["twin1"]
        assert section["status"] == "rolled_back" and section["rollback"]["complete"], section["rollback"]
        assert ("tiny", "health") in gates_failed(report_of(tmp_path / "too-much"))
        # the window's one-line reason names the engine's own refusal
        assert "the engine stopped at: ValueError: Available memory on node" in section["error"], section["error"]
        assert "Decrease --kv-cache-memory-bytes" in section["error"]
        wait_healthy("twin1")
        assert_rolled_back(before)

        # A seat added beside it, of a model whose heads the CPU kernel does not compute: it boots
        # and its engine dies at the first request. The plan says so; the window's long-request
        # probe finds it and the rollback removes it, leaving the running seat as it ran.
        before = state("twin1")
        real_engine_fleet(hosts.parent, added=[{
            "name": "tiny16", "port": 8302, "model": "/srv/models/tiny-head16",
            "model_config": "models/tiny-head16/config.json", "kv_cache_memory_bytes": "16MiB"}])
        dies = rebalance(hosts, twin_inventory, tmp_path / "dies", "-e", "seat_rebalance_runtime_probe=true",
                         check=False)
        assert dies.returncode != 0
        report = report_of(tmp_path / "dies")
        section = report["hosts"]["twin1"]
        assert "tiny16 boots but dies at its first request" in (tmp_path / "dies" / "twin1-plan.md").read_text()
        assert section["status"] == "rolled_back" and section["rollback"]["complete"], section["rollback"]
        probe = _gates(report)[("tiny16", "runtime_probe")]
        assert not probe["ok"] and "Unsupported CPU attention configuration: head_dim=16" in probe["detail"], probe
        wait_healthy("twin1")
        assert_rolled_back(before)
        assert state("twin1")["containers"]["vllm-tiny"][0] == before["containers"]["vllm-tiny"][0], \
            "the running seat ran on, not recreated"
        assert "vllm-tiny16" not in state("twin1")["containers"]
