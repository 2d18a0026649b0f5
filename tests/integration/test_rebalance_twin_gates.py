"""Every gate of the rebalance fails a host on the fleet twin, and the host is rolled back: its
files byte-identical, the seats that ran before running and healthy, the other host untouched.

The module deploys the fleet first (test_rebalance_twin.py tests that deployment); each test
starts from it and leaves it behind."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, run_ansible
from support.litellm import free_port, stop
from support.prometheus import PrometheusServer, counted_at, side_by_side
from support.rollout import (FLEET, HOSTS, ONLY_TWIN1, OPERATOR, address_of, assert_rolled_back, fleet, fleet_with,
                             gates_failed, live, operator_account, rebalance, report_of, state,
                             states, twin, twin_pair, wait_healthy)
from support.wait import wait_for
from twinlib.host import GPU_STATE

pytestmark = [pytest.mark.twin, pytest.mark.gates, pytest.mark.slow]
# No test here changes twin2's seats: a window that passes on twin1 then runs an unchanged window
# on twin2 (its gateway checks and load included). The windows whose tests say nothing of twin2
# run on twin1 alone (ONLY_TWIN1); those that say twin2 is untouched keep it in the run.
DCGM_EXPORTER = REPO_ROOT / "tests" / "twin" / "fakegpu" / "dcgm_exporter.py"


@pytest.fixture(scope="module")
def twin_inventory(tmp_path_factory):
    with twin_pair() as inventory:
        rebalance(FLEET / "hosts.yml", inventory, tmp_path_factory.mktemp("baseline"))
        for host in HOSTS:
            wait_healthy(host)
        yield inventory


def test_a_seat_that_dies_at_boot_is_rolled_back(twin_inventory, tmp_path):
    """torch's OOM allocating the KV cache: the container exits, and the gate sees it exit (it
    does not wait out the health timeout)."""
    before = states()
    hosts = fleet_with(tmp_path, gamma={"kv_factor": 1.2, "environment": {"FAKE_VLLM_FAULT": "oom_at_boot"}})
    proc = rebalance(hosts, twin_inventory, tmp_path, check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert ("gamma", "container_running") in gates_failed(report)
    assert "twin2" not in report["hosts"], "the rollout stopped at the failed host"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


@contextlib.contextmanager
def slow_contexts(host: str, seconds: int):
    """Every GPU of the host takes ``seconds`` to give a process its CUDA context, as a card
    just back from a reset does: every seat (re)started meanwhile is that much slower to boot."""
    indices = [gpu["index"] for gpu in json.loads(twin("status", "--json").stdout)["hosts"][
        HOSTS.index(host)]["gpus"]]
    faults = {"slow_context_s": {str(index): seconds for index in indices}}
    assert twin("gpu", host, "--faults", json.dumps(faults)).returncode == 0
    try:
        yield
    finally:
        assert twin("gpu", host, "--faults", "{}").returncode == 0


def test_a_rollback_waits_for_a_slow_restart_with_its_own_patience(twin_inventory, tmp_path):
    """gamma's /health stays 503 and the forward gate gives up after 10 s. The gamma the
    rollback brings back needs over 30 s to boot: the rollback waits for it with its own
    patience, restores the files, and says so."""
    before = states()
    hosts = fleet_with(tmp_path, gamma={"kv_factor": 1.2, "environment": {"FAKE_VLLM_FAULT": "health_stuck"}})
    with slow_contexts("twin1", 30):
        proc = rebalance(hosts, twin_inventory, tmp_path, "-e", "seat_rebalance_health_timeout=10",
                         check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path)
    section = report["hosts"]["twin1"]
    assert ("gamma", "health") in gates_failed(report)
    assert section["status"] == "rolled_back", section["error"]
    assert "files restored: gamma" in section["actions"]
    assert "running and healthy again: gamma" in section["actions"]
    assert section["rollback"]["complete"] and section["rollback"]["problems"] == []
    assert {(f["seat"], f["file"]): f["state"] for f in section["rollback"]["files"]
            if f["seat"] == "gamma"}[("gamma", ".env")] == "restored"
    assert [(s["seat"], s["state"], s["ok"]) for s in section["rollback"]["seats"]] == [
        ("gamma", "running (healthy)", True)]
    assert "twin2" not in report["hosts"], "the rollout stopped at the failed host"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def test_a_seat_the_rollback_cannot_bring_back_is_reported_as_it_is(twin_inventory, tmp_path):
    """The gamma the rollback brings back is not healthy within the rollback's patience. The
    files are back all the same; the host is `failed`, and the report says which seat is in
    which state. The lock stays with its journal, and the next run, once gamma is up, takes
    it over and finishes that window: gamma, touched and never gated, is gated now."""
    before = states()
    hosts = fleet_with(tmp_path, gamma={"kv_factor": 1.2, "environment": {"FAKE_VLLM_FAULT": "health_stuck"}})
    with slow_contexts("twin1", 900):
        proc = rebalance(hosts, twin_inventory, tmp_path / "window", "-e",
                         "seat_rebalance_health_timeout=10", "-e", "seat_rebalance_rollback_timeout=15",
                         check=False)
        after = state("twin1")
    assert proc.returncode != 0
    section = report_of(tmp_path / "window")["hosts"]["twin1"]
    assert section["status"] == "failed"
    rollback = section["rollback"]
    assert not rollback["complete"]
    assert all(f["ok"] for f in rollback["files"]) and live(after["files"]) == live(before["twin1"]["files"]), \
        "the files are back even though a seat is not"
    (gamma,) = rollback["seats"]
    assert gamma == {"seat": "gamma", "wanted": "running and healthy", "state": "running (health: starting)",
                     "ok": False, "detail": "not healthy within the rollback's 15 s"}
    assert "the rollback is INCOMPLETE: gamma: wanted running and healthy, is running (health: starting)" \
        in section["error"]
    markdown = (tmp_path / "window" / "report.md").read_text()
    assert "### Rollback: **INCOMPLETE**, the host is NOT as it was" in markdown
    assert "| gamma | seat (wanted running and healthy) | running (health: starting) | **NO** |" in markdown

    lock = Path(fleet.find_host("twin1").path("/srv/llmfleet/rebalance.lock"))
    assert "journal" in json.loads(lock.read_text()), "the lock keeps the journal for the next run"

    wait_healthy("twin1")  # the card gives gamma its context now
    rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path / "next")
    following = report_of(tmp_path / "next")["hosts"]["twin1"]
    assert following["status"] == "applied" and following["interrupted"]["seats"] == ["gamma"], \
        "never called unchanged while a seat of the failed window was never gated"
    assert {g["gate"] for g in following["gates"] if g["seat"] == "gamma"} >= {"health", "kv_cache_tokens"}
    assert all(g["ok"] for g in following["gates"])
    assert not lock.exists()
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def test_boot_is_not_runtime_the_long_request_probe_catches_it(twin_inventory, tmp_path):
    """Seed 003: a seat passes every boot gate, then dies on its first long request. The
    runtime probe sends one, and the host is rolled back."""
    before = states()
    hosts = fleet_with(tmp_path, gamma={"kv_factor": 1.2,
                                        "environment": {"FAKE_VLLM_FAULT": "oom_on_long_request"}})
    proc = rebalance(hosts, twin_inventory, tmp_path, "-e", "seat_rebalance_runtime_probe=true",
                     check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path)
    passed = {(g["seat"], g["gate"]) for g in report["hosts"]["twin1"]["gates"] if g["ok"]}
    assert {("gamma", "health"), ("gamma", "kv_cache_tokens")} <= passed, "it passed every boot gate"
    assert ("gamma", "runtime_probe") in gates_failed(report)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def test_a_boot_log_that_disagrees_with_the_plan_is_rolled_back_by_an_operator_account(
        twin_inventory, tmp_path):
    """The checkpoint on the host is not the one planned for (a different layer count): the
    seat boots, but its KV line differs from the plan. Run as seed 001's operator does: a
    non-root SSH account with `-b`, root-owned 0600 .env files, and no sudo on the controller
    (the plan, the report and the gateway checks run there as the operator)."""
    env_file = Path(fleet.find_host("twin1").path("/srv/compose/beta/.env"))
    assert (env_file.stat().st_uid, env_file.stat().st_mode & 0o777) == (0, 0o600)
    config = Path(fleet.find_host("twin1").path("/srv/models/llama-3.1-8b-instruct/config.json"))
    original = config.read_text()
    before = states()
    swapped = json.loads(original)
    swapped["num_hidden_layers"] = 30
    config.write_text(json.dumps(swapped))
    try:
        with operator_account(tmp_path) as operator_env:
            hosts = fleet_with(tmp_path, beta={"kv_cache_memory_bytes": "9GiB"})
            proc = rebalance(hosts, twin_inventory, tmp_path, "-e", "ansible_user=" + OPERATOR,
                             "--become", check=False, env=operator_env)
    finally:
        config.write_text(original)
    assert proc.returncode != 0
    assert "password is required" not in proc.stdout + proc.stderr, \
        "a controller task asked for sudo: " + proc.stdout[-3000:]
    report = report_of(tmp_path)
    assert ("beta", "kv_cache_tokens") in gates_failed(report)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert_rolled_back(before["twin1"])
    assert (env_file.stat().st_uid, env_file.stat().st_mode & 0o777) == (0, 0o600)
    assert state("twin2") == before["twin2"]


def test_a_gpu_short_of_memory_before_start_is_refused_and_rolled_back(twin_inventory, tmp_path):
    """Planned from a snapshot recorded earlier, while the card filled up since (seed 001: the
    margin measured against the wrong number). The pre-start gate reads the card itself."""
    snapshot = tmp_path / "twin1.json"
    saved = run_ansible(["ansible", "twin1", "-i", str(FLEET / "hosts.yml"), "-i", twin_inventory,
                         "-m", "llmfleet.seats.gpu_info", "-a", "save_snapshot_path=/srv/snap.json"])
    assert saved.returncode == 0, saved.stdout
    shutil.copy(fleet.find_host("twin1").path("/srv/snap.json"), snapshot)
    before = states()
    free_gpu1 = json.loads(snapshot.read_text())["gpus"][1]["memory_free_mib"]
    assert twin("gpu", "twin1", "--background", "1=%d" % (free_gpu1 - 1000)).returncode == 0
    try:
        hosts = fleet_with(tmp_path, alpha={"max_model_len": 40960})
        proc = rebalance(hosts, twin_inventory, tmp_path / "report", *ONLY_TWIN1,
                         "-e", "seat_plan_cards_source=snapshot",
                         "-e", "seat_plan_cards_snapshot=%s" % snapshot, check=False)
    finally:
        assert twin("gpu", "twin1", "--background", "1=0").returncode == 0
    assert proc.returncode != 0
    report = report_of(tmp_path / "report")
    assert ("alpha", "free_mib_before_start") in gates_failed(report)
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


@pytest.fixture
def gateway(twin_inventory, tmp_path):
    """A real LiteLLM in front of twin1's seats, as the fleet's gateway would be."""
    from support.litellm import LiteLLMProxy, litellm_bin  # the litellm venv is only built for this

    address = address_of(twin_inventory)
    key = "sk-" + os.urandom(16).hex()
    config = tmp_path / "litellm.yaml"
    # alpha's route is a thinking alias (seed 002): the gateway turns thinking on for it
    thinking = {"extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}
    config.write_text(yaml.safe_dump({
        "model_list": [{"model_name": name, "litellm_params": dict({
            "model": "hosted_vllm/" + name, "api_base": "http://%s:%d/v1" % (address, port)}, **extra)}
            for name, port, extra in (("alpha", 8101, thinking), ("gamma", 8103, {}))],
        "litellm_settings": {"num_retries": 0, "request_timeout": 30},
        "general_settings": {"master_key": key}}))
    proxy = LiteLLMProxy(litellm_bin(), config, key)
    yield proxy
    stop(proxy.proc)


def _gateway_args(gateway, routes, broken_routes=()):
    return ["-e", json.dumps({"seat_rebalance_gateway_url": gateway.url,
                              "seat_rebalance_gateway_api_key": gateway.master_key,
                              "seat_rebalance_gateway_routes": routes,
                              "seat_rebalance_gateway_broken_routes": list(broken_routes)})]


@pytest.mark.litellm
def test_the_rebalance_ends_with_the_gateway_contract_and_rolls_back_a_broken_one(
        twin_inventory, gateway, tmp_path):
    routes = [{"model": "alpha", "checks": ["chat", "stream", "reasoning"]},
              {"model": "gamma", "checks": ["chat"]}]
    # seed 002's set: a reasoning parser, and thinking off by default so prose stays in content
    contract = {"reasoning_parser": "qwen3", "default_chat_template_kwargs": {"enable_thinking": False}}
    hosts = fleet_with(tmp_path, alpha=dict(contract, max_model_len=8192), gamma=contract)

    # Before this window alpha's thinking alias has no parser: its route is broken already, so the
    # window stops before anything moves, saying so, until the operator names the route.
    before = states()
    refused = rebalance(hosts, twin_inventory, tmp_path / "refused", *_gateway_args(gateway, routes), check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and gateway.master_key not in out
    said = " ".join(out.split())  # the message as one line, whatever the callback wrapped
    assert "broken before the window, so a failure after it could not be told from one it caused: route alpha, " \
        "check chat: " in said, out[-3000:]
    assert "route alpha, check reasoning: reasoning arrived inline in content" in said
    assert "name their routes in seat_rebalance_gateway_broken_routes" in said
    assert states() == before, "nothing moved"

    proc = rebalance(hosts, twin_inventory, tmp_path / "ok", *_gateway_args(gateway, routes, ["alpha", "gamma"]))
    assert gateway.master_key not in proc.stdout + proc.stderr, "the gateway key is never printed"
    section = report_of(tmp_path / "ok")["hosts"]["twin1"]
    checked = {(g["seat"], g["gate"]): g for g in section["gates"] if g["gate"].startswith("gateway_")}
    after = {key: g for key, g in checked.items() if not key[1].endswith("_before")}
    assert set(after) == {("route alpha", "gateway_chat"), ("route alpha", "gateway_stream"),
                          ("route alpha", "gateway_reasoning"), ("route gamma", "gateway_chat")}
    assert {(seat, name[:-len("_before")]) for seat, name in set(checked) - set(after)} == set(after), \
        "the report keeps the contract before the window beside the one after it"
    assert all(g["ok"] for g in checked.values()) and section["status"] == "applied"
    assert checked[("route alpha", "gateway_reasoning_before")]["detail"].startswith(
        "broken before the window too, accepted (seat_rebalance_gateway_broken_routes): ")
    assert checked[("route alpha", "gateway_reasoning")]["measured"]["reasoning_key"] == "reasoning_content", \
        "through LiteLLM the reasoning arrives as reasoning_content (seed 002's key-name trap)"

    # alpha loses its reasoning parser: its thinking lands in content, and the route says it
    # must be split. The contract fails through the gateway and the host is rolled back.
    before = states()
    broken = [{"model": "alpha", "checks": ["chat", "reasoning"]}]
    hosts = fleet_with(tmp_path / "broken", alpha={"max_model_len": 8192, "reasoning_parser": None},
                       gamma=contract)
    proc = rebalance(hosts, twin_inventory, tmp_path / "broken-report",
                     *_gateway_args(gateway, broken), check=False)
    assert proc.returncode != 0
    assert gateway.master_key not in proc.stdout + proc.stderr
    report = report_of(tmp_path / "broken-report")
    assert ("route alpha", "gateway_reasoning") in gates_failed(report)
    failed = next(g for g in report["hosts"]["twin1"]["gates"] if g["gate"] == "gateway_reasoning")
    assert failed["detail"].startswith("passed before the window: "), "so the window broke it"
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


@pytest.fixture
def failover_gateway(twin_inventory, tmp_path):
    """A real LiteLLM whose route alpha falls back to the gamma seat (router fallbacks), beside
    alpha-solo, the same seat with nothing to fall back on; no retries, so each failure counts."""
    from support.litellm import LiteLLMProxy, litellm_bin  # the litellm venv is only built for this

    address = address_of(twin_inventory)
    key = "sk-" + os.urandom(16).hex()

    def deployment(route, served, port, **extra):
        return {"model_name": route, "litellm_params": dict(
            {"model": "hosted_vllm/" + served, "api_base": "http://%s:%d/v1" % (address, port)}, **extra)}

    config = tmp_path / "litellm.yaml"
    # alpha-solo admits prompts four times longer than its seat serves: the window's route audit says so
    solo = dict(deployment("alpha-solo", "alpha", 8101), model_info={"max_input_tokens": 4 * 12288})
    config.write_text(yaml.safe_dump({
        "model_list": [dict(deployment("alpha", "alpha", 8101), model_info={"max_input_tokens": 12288}),
                       deployment("alpha-fallback", "gamma", 8103), solo, deployment("gamma", "gamma", 8103)],
        "litellm_settings": {"num_retries": 0, "request_timeout": 30},
        "router_settings": {"fallbacks": [{"alpha": ["alpha-fallback"]}]},
        "general_settings": {"master_key": key}}))
    proxy = LiteLLMProxy(litellm_bin(), config, key)
    yield proxy
    stop(proxy.proc)


@pytest.mark.litellm
def test_through_a_restart_a_route_with_a_fallback_loses_no_request_and_the_report_shows_it(
        twin_inventory, failover_gateway, tmp_path):
    # first the fleet as this test starts it: alpha alone changes in the window below
    rebalance(fleet_with(tmp_path / "settle", alpha={"max_model_len": 16384}), twin_inventory, tmp_path / "settle-report",
              *ONLY_TWIN1)
    wait_healthy("twin1")
    assert report_of(tmp_path / "settle-report")["hosts"]["twin1"]["gateway_load"] == {}, "no load asked, none shown"
    assert "Through the gateway" not in (tmp_path / "settle-report" / "report.md").read_text()

    load = ["-e", json.dumps({"seat_rebalance_gateway_url": failover_gateway.url,
                              "seat_rebalance_gateway_api_key": failover_gateway.master_key,
                              "seat_rebalance_gateway_load": True,
                              "seat_rebalance_gateway_load_routes": ["alpha", "alpha-solo", "gamma"],
                              # often enough that alpha-solo's outage is seen as failed requests
                              "seat_rebalance_gateway_load_interval": 0.25,
                              "seat_rebalance_gateway_config": str(tmp_path / "litellm.yaml")})]
    proc = rebalance(fleet_with(tmp_path, alpha={"max_model_len": 12288}), twin_inventory, tmp_path / "report", *load,
                     *ONLY_TWIN1)
    assert failover_gateway.master_key not in proc.stdout + proc.stderr
    section = report_of(tmp_path / "report")["hosts"]["twin1"]
    assert section["status"] == "applied"
    assert section["changed_seats"] == ["alpha"], section["changed_seats"]
    routes = {route["route"]: route for route in section["gateway_load"]["routes"]}
    solo = routes["alpha-solo"]
    print("through alpha's restart: alpha-solo (no fallback) lost %d of %d requests, %.1f s without a reply; "
          "alpha (falls back to gamma) lost %d of %d, %.1f s at most"
          % (solo["failed"], solo["sent"], solo["longest_gap_s"], routes["alpha"]["failed"], routes["alpha"]["sent"],
             routes["alpha"]["longest_gap_s"]))
    assert solo["failed"] > 0, "a route with nothing to fall back on fails while its seat restarts"
    assert routes["alpha"]["failed"] == 0 and routes["alpha"]["sent"] > 10, "the fallback tier carries alpha"
    assert routes["gamma"]["failed"] == 0, "a seat the window does not touch is not disturbed"
    assert routes["alpha"]["longest_gap_s"] < solo["longest_gap_s"]
    # alpha shrinks, so it stops before anything boots: it is drained right before that stop
    actions = section["actions"]
    drained = [index for index, action in enumerate(actions) if action.startswith("before its stop: alpha: ")]
    assert drained and drained[0] < actions.index("stopped first (moves or shrinks): alpha"), actions
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "### Through the gateway during the window" in markdown
    assert "| alpha-solo | %d | **%d** |" % (solo["sent"], solo["failed"]) in markdown
    assert failover_gateway.master_key not in markdown + json.dumps(section)
    # the gateway's routes to twin1's seats, held to what each seat serves after the window
    audited = {target["route"]: target for target in section["gateway_routes"]["targets"]}
    assert sorted(audited) == ["alpha", "alpha-fallback", "alpha-solo", "gamma"]
    assert audited["alpha"]["status"] == "ok" and audited["alpha"]["limits"]["max_input_tokens"] == 12288
    assert audited["alpha-solo"]["status"] == "over_limit"
    assert audited["alpha-solo"]["detail"] == \
        "model_info.max_input_tokens 49152 is more than seat alpha serves (max_model_len 12288)"
    assert "### The gateway's routes after the window" in markdown
    assert "4 route(s) of %s to this host's seats: **1 not as they should be**." % (tmp_path / "litellm.yaml") in markdown
    # the window does not write this config: the report gives its keeper the exact change, and nothing is written
    assert [(c["route"], c["where"], c["old"], c["new"]) for c in section["gateway_routes"]["changes"]] == [
        ("alpha-solo", "model_list[2].model_info.max_input_tokens", 49152, 12288)], section["gateway_routes"]["changes"]
    assert "route alpha-solo, model_list[2].model_info.max_input_tokens: `49152` -> `12288`" in markdown
    assert "max_input_tokens: 49152" in (tmp_path / "litellm.yaml").read_text()
    assert report_of(tmp_path / "settle-report")["hosts"]["twin1"]["gateway_routes"] == {}, "no config, no audit"


def _chat(address, port, text, max_tokens):
    body = json.dumps({"model": "alpha", "messages": [{"role": "user", "content": text}],
                       "max_tokens": max_tokens}).encode()
    request = urllib.request.Request("http://%s:%d/v1/chat/completions" % (address, port), data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.load(reply)["usage"]


def test_calibration_and_the_watch_on_the_twin_are_what_the_next_plan_stands_on(twin_inventory, tmp_path):
    """The operator's loop on their own host, with their own Prometheus: a window, known traffic to
    alpha, calibrate.yml and then watch_plateau.yml (over SSH, the cards read on the host), and the
    next plan sized from both where the inventory says so."""
    address, host = address_of(twin_inventory), fleet.find_host("twin1")
    port = free_port()
    exporter = subprocess.Popen([sys.executable, str(DCGM_EXPORTER), "--state", host.path(GPU_STATE),
                                 "--port", str(port), "--hostname", "twin1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    server = None
    try:
        server = PrometheusServer(tmp_path, ["127.0.0.1:%d" % port] + ["%s:%d" % (address, p) for p in (8101, 8102, 8103)])
        counted = 'vllm:request_prompt_tokens_count{model_name="alpha"}'
        wait_for(lambda: len(server.query(counted)) == 1 and len(server.query("DCGM_FI_DEV_FB_USED")) == 2, 90,
                 "Prometheus's first scrape of alpha and of twin1's cards")
        # the window: alpha now answers a token at a time, so a scrape sees its replies in flight
        window = tmp_path / "window"
        rebalance(fleet_with(tmp_path / "slow", alpha={"environment": {"FAKE_VLLM_STEP_DELAY_MS": "2"}}),
                  twin_inventory, window, *ONLY_TWIN1)
        wait_healthy("twin1")
        finished = report_of(window)["hosts"]["twin1"]["finished"]
        wait_for(lambda: len(server.query(counted)) == 1, 60, "the restarted alpha scraped")
        usage = [_chat(address, 8101, " ".join(["word"] * words), 32) for words in (5, 50, 500, 1500) * 3]
        usage += side_by_side([lambda n=n: _chat(address, 8101, "[runaway] " + " ".join(["tell"] * 300 * (n + 1)), 2500)
                               for n in range(3)])
        at = counted_at(server, counted, len(usage))
        kept = tmp_path / "kept"
        kept.mkdir()
        twin_fleet = ["-i", str(FLEET / "hosts.yml"), "-i", twin_inventory, *ONLY_TWIN1]
        calibrated = run_ansible(["ansible-playbook", *twin_fleet, "playbooks/calibrate.yml", "-e", json.dumps({
            "calibrate_prometheus_url": server.url, "calibrate_window": "1h", "calibrate_step": "1s", "calibrate_at": at,
            "calibrate_runaway_tokens": 2000, "calibrate_instance_host": address,
            "calibrate_snapshot_path": str(kept / "demand-twin1.json")})])
        watched = run_ansible(["ansible-playbook", *twin_fleet, "playbooks/watch_plateau.yml", "-e", json.dumps({
            "watch_prometheus_url": server.url, "watch_report": str(window / "report.json"), "watch_settle": "1s",
            "watch_at": at, "watch_fail_on_flags": False})])
    finally:
        if server is not None:
            server.stop()
        stop(exporter)
    assert calibrated.returncode == 0, calibrated.stdout[-3000:]
    assert watched.returncode == 0, watched.stdout[-3000:]
    demand = {seat["seat"]: seat for seat in json.loads((kept / "demand-twin1.json").read_text())["seats"]}
    alpha = demand["alpha"]
    assert alpha["requests"] == len(usage) and alpha["instance"] == "%s:8101" % address
    assert alpha["runaways"] == {"longer_than": 2000, "replies": 3}
    assert 1 <= alpha["peak_running"] <= 3 and alpha["peak_kv_tokens"] > 0
    assert demand["beta"]["requests"] == 0 and "no traffic" in demand["beta"]["detail"]
    assert (kept / "demand-twin1.svg").read_text().startswith("<svg")

    # the plateau snapshot: the twin's own cards, each seat as its host read it
    snapshot_path = window / "plateau-twin1.json"
    snapshot = json.loads(snapshot_path.read_text())
    cards = json.loads(Path(host.path(GPU_STATE)).read_text())["gpus"]
    for card, read in zip(cards, snapshot["gpus"]):
        held = card["background_used_mib"] + sum(p["used_mib"] for p in card["processes"])
        judged = next(gpu for gpu in snapshot["watch"]["gpus"] if gpu["uuid"] == card["uuid"])
        assert judged["plateau_used_mib"] == held == read["memory_used_mib"], (card["uuid"], judged, read)
    planned = {s["name"]: s for s in report_of(window)["hosts"]["twin1"]["plan"]["seats"]}
    for verdict in snapshot["watch"]["seats"]:
        assert verdict["held_mib"] is not None, verdict
        assert verdict["over_plan_mib"] == verdict["held_mib"] - planned[verdict["seat"]]["footprint_mib"]

    # the next plan: alpha sized from its measured demand, the cards from the watch's snapshot
    plan_dir = tmp_path / "plan"
    next_plan = run_ansible(["ansible-playbook", "-i", str(fleet_with(tmp_path / "next", alpha={"kv_sizing": "demand"})),
                             "-i", twin_inventory, *ONLY_TWIN1, "playbooks/plan.yml", "-e", json.dumps({
                                 "seat_plan_report_dir": str(plan_dir),
                                 "llmfleet_demand_snapshot": str(kept / "demand-twin1.json"),
                                 "llmfleet_plateau_snapshot": str(snapshot_path)})])
    assert next_plan.returncode == 0, next_plan.stdout[-3000:]
    plan = json.loads((plan_dir / "twin1-plan.json").read_text())
    ours = next(seat for seat in plan["seats"] if seat["name"] == "alpha")
    assert ours["kv_rule"] == "demand: peak {:,} tokens x 1.25".format(alpha["peak_kv_tokens"])
    assert plan["last_watch"]["snapshot"] == str(snapshot_path)
    assert "### How the cards settled after the last window" in (plan_dir / "twin1-plan.md").read_text()


ROUTED = """\
# the fleet's gateway: twin1's seats (kept by hand, comments and all)
model_list:
  - model_name: alpha
    litellm_params:
      model: hosted_vllm/alpha
      api_base: http://%(address)s:8101/v1   # alpha on twin1
    model_info:
      max_input_tokens: 32768   # what the seat serves
      max_output_tokens: 32768
  - model_name: gamma
    litellm_params:
      model: hosted_vllm/gamma
      api_base: "http://%(address)s:8103/v1"
litellm_settings: {num_retries: 0, request_timeout: 30}
general_settings: {master_key: %(key)s}
"""


@pytest.mark.litellm
def test_a_window_repoints_the_gateway_and_keeps_its_limits_and_a_rollback_puts_the_config_back(
        twin_inventory, tmp_path):
    """The operator's gateway config, written by hand: the window moves alpha to another port and
    shrinks its context, so it writes the config (dated backup), restarts the gateway and checks
    through it. A later window that breaks a client's long request rolls back, the config with it,
    byte for byte, and the gateway restarts on it."""
    from support.litellm import RestartableLiteLLM, litellm_bin  # the litellm venv is only built for this

    address, key = address_of(twin_inventory), "sk-" + os.urandom(16).hex()
    config = tmp_path / "litellm.yaml"
    original = ROUTED % {"address": address, "key": key}
    config.write_text(original)
    proxy = RestartableLiteLLM(litellm_bin(), config, key)
    try:
        first_pid = proxy.pid

        def window(name, routes, **alpha):
            written = ["-e", json.dumps({
                "seat_rebalance_gateway_url": proxy.url, "seat_rebalance_gateway_api_key": key,
                "seat_rebalance_gateway_routes": routes, "seat_rebalance_gateway_config": str(config),
                "seat_rebalance_gateway_config_write": True, "seat_rebalance_gateway_restart": proxy.restart_argv})]
            proc = rebalance(fleet_with(tmp_path / name, alpha=alpha), twin_inventory, tmp_path / name / "report",
                             *written, *ONLY_TWIN1, check=False)
            assert key not in proc.stdout + proc.stderr
            assert (tmp_path / name / "report" / "report.json").exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
            return proc, report_of(tmp_path / name / "report")["hosts"]["twin1"]

        # the stand-ins think by default: the checks ask for prose, as a client that turns thinking off
        prose = {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
        proc, moved = window("moved", [dict(prose, model="alpha"), dict(prose, model="gamma")], port=8111,
                             max_model_len=16384)
        assert proc.returncode == 0 and moved["status"] == "applied", proc.stdout[-4000:]
        moved_text = config.read_text()
        changed = [line for line in difflib.ndiff(original.splitlines(), moved_text.splitlines()) if line[:1] in "+-"]
        assert changed == [
            "-       api_base: http://%s:8101/v1   # alpha on twin1" % address,
            "+       api_base: http://%s:8111/v1   # alpha on twin1" % address,
            "-       max_input_tokens: 32768   # what the seat serves", "+       max_input_tokens: 16384   # what the seat serves",
            "-       max_output_tokens: 32768", "+       max_output_tokens: 16384"]
        backups = sorted(tmp_path.glob("litellm.yaml.bak-*-window*"))
        assert [b.read_text() for b in backups] == [original], "the config as it was, kept beside it"
        assert "gateway config %s: alpha api_base: http://%s:8101/v1 -> http://%s:8111/v1" % (
            config, address, address) in moved["actions"]
        assert proxy.pid != first_pid, "the gateway was restarted to read it"
        gateway = [gate for gate in moved["gates"] if gate["gate"].startswith("gateway")]
        assert gateway and all(gate["ok"] for gate in gateway), gateway
        assert [(t["route"], t["status"]) for t in moved["gateway_routes"]["targets"]] == [("alpha", "ok"), ("gamma", "ok")]

        # a client that sends 12,000 tokens of reply is fine at 16,384 and not at 8,192: the
        # window breaks its route, and everything goes back
        long_replies = [dict(prose, model="alpha", max_tokens=12000), dict(prose, model="gamma")]
        proc, broke = window("broke", long_replies, port=8121, max_model_len=8192)
        assert proc.returncode != 0 and broke["status"] == "rolled_back", proc.stdout[-4000:]
        assert config.read_bytes() == moved_text.encode(), "the config is back byte for byte"
        assert any(action.startswith("gateway config restored from %s.bak-" % config) for action in broke["actions"])
        asked = {"model": "alpha", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        status, reply = proxy.post("/v1/chat/completions", asked)
        assert status == 200, "the restarted gateway reaches alpha where it runs again: %s" % reply
    finally:
        proxy.close()


def _container(name: str) -> tuple:
    """(docker's state, restart policy, dormant label) of a container on twin1."""
    found = json.loads(fleet.find_host("twin1").docker(["inspect", "--type", "container", name]).stdout)[0]
    return (found["State"]["Status"], found["HostConfig"]["RestartPolicy"]["Name"],
            (found["Config"]["Labels"] or {}).get("io.llmfleet.dormant"))


COMPOSITE = """\
# the fleet's gateway to twin1, kept by hand
model_list:
  - model_name: alpha
    litellm_params:
      model: hosted_vllm/alpha
      api_base: http://%(address)s:8101/v1
    model_info:
      max_input_tokens: 32768   # what alpha serves
  - model_name: gamma
    litellm_params:
      model: hosted_vllm/gamma
      api_base: http://%(address)s:8103/v1
  - model_name: char-rp   # beta's alias: it must answer through a model swap
    litellm_params:
      model: hosted_vllm/beta
      api_base: http://%(address)s:8102/v1
litellm_settings: {num_retries: 0, request_timeout: 30}
general_settings: {master_key: %(key)s}
"""


@pytest.mark.litellm
def test_one_window_restarts_moves_follows_a_ladder_and_swaps_and_its_rollback_undoes_each(twin_inventory, tmp_path):
    """The gateway side of every kind of change in one window on twin1, against a real LiteLLM
    that the window restarts, with requests sent through it all along: alpha restarts at the
    context a ladder found (its limit follows), gamma moves to another port (its route follows),
    beta's model is swapped (seed 002: its alias char-rp stays, beta is kept dormant). A first
    window that breaks a client of alpha rolls back each change, beta woken from its own files;
    the same window without that client passes; a second run changes nothing; only
    llmfleet_retire removes the dormant beta; a last window puts the fleet back."""
    from support.litellm import RestartableLiteLLM, litellm_bin  # the litellm venv is only built for this

    # the fleet as the module deployed it, whatever the test before this one left
    rebalance(fleet_with(tmp_path / "settle"), twin_inventory, tmp_path / "settle" / "report", *ONLY_TWIN1)
    wait_healthy("twin1")
    address, key = address_of(twin_inventory), "sk-" + os.urandom(16).hex()
    config = tmp_path / "litellm.yaml"
    original = COMPOSITE % {"address": address, "key": key}
    config.write_text(original)
    proxy = RestartableLiteLLM(litellm_bin(), config, key)
    prose = {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    routes = [dict(prose, model=route) for route in ("alpha", "gamma", "char-rp")]
    swap = {"name": "beta-qwen", "replaces": "beta", "model": "/srv/models/qwen3-8b",
            "model_config": "models/qwen3-8b/config.json", "weights_bytes": 16381470720}

    def window(name, checks, hosts):
        asked = ["-e", json.dumps({
            "seat_rebalance_gateway_url": proxy.url, "seat_rebalance_gateway_api_key": key,
            "seat_rebalance_gateway_routes": checks, "seat_rebalance_gateway_config": str(config),
            "seat_rebalance_gateway_config_write": True, "seat_rebalance_gateway_restart": proxy.restart_argv,
            # a request a route every 2 s: each one costs the proxy and the seat some 20 ms of CPU,
            # and these windows only ask that every route was asked through each of them (the
            # fallback's test asks at 0.25 s, where a gap is what it measures)
            "seat_rebalance_gateway_load": True, "seat_rebalance_gateway_load_routes": ["alpha", "gamma", "char-rp"],
            "seat_rebalance_gateway_load_interval": 2})]
        proc = rebalance(hosts, twin_inventory, tmp_path / name / "report", *asked, *ONLY_TWIN1, check=False)
        out = proc.stdout + proc.stderr
        assert (tmp_path / name / "report" / "report.md").exists(), out[-4000:]
        assert key not in out + (tmp_path / name / "report" / "report.md").read_text(), "the key is never shown"
        section = report_of(tmp_path / name / "report")["hosts"]["twin1"]
        loads = {route["route"]: route for route in section["gateway_load"]["routes"]}
        assert sorted(loads) == ["alpha", "char-rp", "gamma"] and all(r["sent"] > 0 for r in loads.values()), loads
        print("%s: through the gateway, sent/failed/longest gap per route: %s" % (name, ", ".join(
            "%s %d/%d/%.1f s" % (r, loads[r]["sent"], loads[r]["failed"], loads[r]["longest_gap_s"]) for r in sorted(loads))))
        return proc, section

    try:
        def changes(where):
            return fleet_with(tmp_path / where, alpha={"max_model_len": 16384}, gamma={"port": 8113}, beta=swap)

        before = states()
        # a client of alpha that asks for 20,000 tokens of reply: fine at 32,768, not at 16,384
        broken = [dict(routes[0], max_tokens=20000)] + routes[1:]
        proc, failed = window("fails", broken, changes("fails"))
        assert proc.returncode != 0 and failed["status"] == "rolled_back", failed.get("error")
        broke = [(g["seat"], g["gate"]) for g in failed["gates"] if not g["ok"]]
        assert ("route alpha", "gateway_chat") in broke and {seat for seat, _gate in broke} == {"route alpha"}, broke
        assert config.read_text() == original, "the gateway's config is back byte for byte"
        assert any(a.startswith("gateway config restored from %s.bak-" % config) for a in failed["actions"])
        assert "running and healthy again: beta" in failed["actions"]
        assert any(a.startswith("dormant: beta, replaced by beta-qwen (kept stopped") for a in failed["actions"])
        assert _container("vllm-beta") == ("running", "always", None), "woken as it ran, from its own files"
        assert_rolled_back(before["twin1"])
        assert "vllm-beta-qwen" not in state("twin1")["containers"], "the swap's new seat is gone"
        again = {g["seat"]: g["ok"] for g in failed["gates"] if g["gate"] == "gateway_chat_rolled_back"}
        assert all(g["ok"] for g in failed["gates"] if g["gate"].endswith("_rolled_back"))
        assert again == {"route alpha": True, "route gamma": True, "route char-rp": True}, \
            "after the rollback every route answers as before the window (alpha's long client too)"

        proc, applied = window("passes", routes, changes("passes"))
        assert proc.returncode == 0 and applied["status"] == "applied", applied.get("error")
        changed = [line for line in difflib.ndiff(original.splitlines(), config.read_text().splitlines())
                   if line[:1] in "+-"]
        assert changed == [
            "-       max_input_tokens: 32768   # what alpha serves", "+       max_input_tokens: 16384   # what alpha serves",
            "-       api_base: http://%s:8103/v1" % address, "+       api_base: http://%s:8113/v1" % address]
        actions = applied["actions"]
        assert "gateway config %s: gamma api_base: http://%s:8103/v1 -> http://%s:8113/v1" % (
            config, address, address) in actions
        assert any(a.startswith("dormant: beta, replaced by beta-qwen") for a in actions), actions
        gateway = {(g["seat"], g["gate"]): g["ok"] for g in applied["gates"] if g["gate"].startswith("gateway_")}
        assert {key for key, ok in gateway.items() if ok} == set(gateway) and {
            (seat, gate) for seat, gate in gateway if gate in ("gateway_chat", "gateway_chat_before")} == {
            ("route %s" % r, "gateway_chat%s" % phase) for r in ("alpha", "gamma", "char-rp") for phase in ("_before", "")}
        assert [(t["route"], t["status"]) for t in applied["gateway_routes"]["targets"]] == [
            ("alpha", "ok"), ("gamma", "ok"), ("char-rp", "ok")]
        markdown = (tmp_path / "passes" / "report" / "report.md").read_text()
        assert "### Through the gateway during the window" in markdown
        assert "### The gateway's routes after the window" in markdown
        root = Path(fleet.find_host("twin1").path("/srv/compose"))
        assert _container("vllm-beta") == ("created", "no", "beta-qwen"), "stopped, labelled, never restarted"
        assert live(state("twin1")["files"])["beta/compose.yaml"] == before["twin1"]["files"]["beta/compose.yaml"], \
            "the dormant seat's own files are as they were"
        written = config.read_text()

        proc, again = window("again", routes, changes("again"))
        assert proc.returncode == 0 and again["status"] == "unchanged" and again["changed_seats"] == []
        assert re.search(r"twin1\s+: ok=\d+\s+changed=0 ", proc.stdout), "a second run changes nothing"
        assert not any(a.startswith(("dormant: ", "stopped", "gateway config")) for a in again["actions"]), \
            again["actions"]
        assert config.read_text() == written and _container("vllm-beta")[0] == "created", "kept until retired"

        # the operator retires the dormant beta: its container goes after every gate, its files stay
        retire = fleet_with(tmp_path / "retire", alpha={"max_model_len": 16384}, gamma={"port": 8113},
                            beta=dict(swap, replaces=None))
        path = retire.parent / "host_vars" / "twin1.yml"
        path.write_text(path.read_text() + "llmfleet_retire: [beta]\n")
        proc, retired = window("retire", routes, retire)
        assert proc.returncode == 0 and "retired (was dormant; its files stay): beta" in retired["actions"]
        assert "vllm-beta" not in state("twin1")["containers"] and (root / "beta" / "compose.yaml").exists()

        # back as the module began: beta listed again, its replacement retired
        back = fleet_with(tmp_path / "back")
        path = back.parent / "host_vars" / "twin1.yml"
        path.write_text(path.read_text() + "llmfleet_retire: [beta-qwen]\n")
        proc, restored = window("back", routes, back)
        assert proc.returncode == 0 and restored["status"] == "applied", restored.get("error")
        assert config.read_text() == original, "the collection's edits of the config undo exactly"
        wait_healthy("twin1")
    finally:
        proxy.close()
