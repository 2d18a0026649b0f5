"""Gate evaluation: each gate says what it measured against what the plan expects."""

from __future__ import annotations

import http.server
import threading

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import gates as _gates

GIB = 1024 ** 3
SEAT = {"name": "voices", "engine": "vllm", "gpus": ["GPU-0"], "footprint_mib": 30000,
        "gpu_memory_utilization": 0.33, "container": "vllm-voices", "port": 8014,
        "served_model_names": ["voices"], "max_model_len": 40960,
        "kv_cache_memory_bytes": 6979321856, "kv_cache_tokens": 47328, "max_concurrency": 1.16}


def _cards(free, total=97887, holders=()):
    return {"gpus": [{"index": 0, "uuid": "GPU-0", "memory_total_mib": total,
                      "memory_free_mib": free,
                      "processes": [{"used_mib": mib, "compose_service": name} for name, mib in holders]}]}


def _by_name(gates):
    return {g["gate"]: g for g in gates}


def test_before_start_passes_with_room_and_names_the_numbers():
    gates = _by_name(_gates.before_start(SEAT, _cards(33000), 512))
    assert gates["free_mib_before_start"]["ok"] and gates["free_mib_before_start"]["expected"] == 30512
    # vLLM's own check: ceil(97887 MiB x 0.33) = 32,303 MiB; 33,000 MiB free passes
    assert gates["vllm_startup_check"]["ok"]
    assert gates["vllm_startup_check"]["expected"] == -(-97887 * 1024 ** 2 * 33 // 100)


def test_before_start_fails_vllms_check_even_when_the_footprint_fits():
    gates = _by_name(_gates.before_start(SEAT, _cards(31000), 512))
    assert gates["free_mib_before_start"]["ok"]
    check = gates["vllm_startup_check"]
    assert not check["ok"] and "ceil(total x 0.33)" in check["detail"]


def test_before_start_counts_what_the_recreated_seat_holds_now():
    gates = _by_name(_gates.before_start(SEAT, _cards(10000, holders=[("voices", 25000)]), 512))
    assert gates["free_mib_before_start"]["measured"] == 35000
    assert "with the 25,000 MiB it holds now" in gates["free_mib_before_start"]["detail"]


def test_before_start_on_a_gpu_the_host_does_not_have():
    gates = _gates.before_start(dict(SEAT, gpus=["GPU-9"]), _cards(90000), 0)
    assert gates == [_gates.gate("voices", "gpu_present", False, None, "GPU-9",
                                 "GPU GPU-9 is not on this host (the cards: GPU-0)")]


def test_container_gate_fails_on_restarts():
    running = {"State": {"Running": True, "Status": "running", "ExitCode": 0}, "RestartCount": 0}
    assert _gates.container_gate(SEAT, running)["ok"]
    restarted = dict(running, RestartCount=1)
    assert not _gates.container_gate(SEAT, restarted)["ok"]
    assert not _gates.container_gate(SEAT, None)["ok"]


def test_memory_gates_want_the_planned_spare_less_the_tolerance():
    plan_gpus = [{"index": 0, "uuid": "GPU-0", "spare_mib": 2300, "spare_at_boot_mib": 4000}]
    assert _gates.memory_gates(plan_gpus, _cards(1800), {"GPU-0"}, 512, 512, "boot")[0]["ok"]
    low = _gates.memory_gates(plan_gpus, _cards(1700), {"GPU-0"}, 512, 512, "boot")[0]
    assert not low["ok"] and low["expected"] == 1788 and "after boot" in low["detail"]
    plateau = _gates.memory_gates(plan_gpus, _cards(1900), {"GPU-0"}, 512, 512, "plateau")[0]
    assert plateau["ok"] and plateau["gate"] == "free_mib_plateau"
    tight = [{"index": 0, "uuid": "GPU-0", "spare_mib": 600, "spare_at_boot_mib": 900}]
    assert not _gates.memory_gates(tight, _cards(400), {"GPU-0"}, 512, 512, "boot")[0]["ok"], \
        "never below the margin, whatever the plan says"
    assert _gates.memory_gates(plan_gpus, _cards(9000), set(), 512, 512, "boot") == []


def test_without_the_spare_gate_a_card_is_held_to_the_margin_alone():
    plan_gpus = [{"index": 0, "uuid": "GPU-0", "spare_mib": 30000, "spare_at_boot_mib": 31000}]
    assert not _gates.memory_gates(plan_gpus, _cards(600), {"GPU-0"}, 512, 512, "boot")[0]["ok"]
    rung = _gates.memory_gates(plan_gpus, _cards(600), {"GPU-0"}, 512, 512, "boot", spare_gate=False)[0]
    assert rung["ok"] and rung["expected"] == 512 and "not gated: at least the margin 512" in rung["detail"]
    assert not _gates.memory_gates(plan_gpus, _cards(400), {"GPU-0"}, 512, 512, "boot", spare_gate=False)[0]["ok"]


def _serving_models(headers_seen):
    """A /v1/models that answers 200 and records each request's Authorization header."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            headers_seen.append(self.headers.get("Authorization"))
            body = b'{"data": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("engine, secrets, api_key, sent", [
    ("vllm", {"alpha": {"VLLM_API_KEY": "sk-seat", "HF_TOKEN": "hf_x"}}, "sk-all", "Bearer sk-seat"),
    ("vllm", {"beta": {"VLLM_API_KEY": "sk-other"}}, "sk-all", "Bearer sk-all"),
    ("vllm", None, None, None),
    ("fixed", {"alpha": {"VLLM_API_KEY": "sk-seat"}}, None, None),
])
def test_a_seat_is_asked_with_its_own_api_key(engine, secrets, api_key, sent):
    seen = []
    server = _serving_models(seen)
    try:
        host = _gates.SeatHost(None, api_key=api_key, secrets=secrets)
        seat = {"name": "alpha", "engine": engine, "port": server.server_address[1]}
        status, _body = host.client(seat).call_json("GET", "/v1/models")
    finally:
        server.shutdown()
    assert status == 200 and seen == [sent]


class _LogOnly:
    """A host whose seats answer nothing over HTTP; their log is ``log``, or the runtime's error."""
    runtime_probe = False

    def __init__(self, log):
        self.asked_log = 0
        self._log = log

    def client(self, seat):
        raise AssertionError("asked %s over HTTP" % seat["name"])

    def log(self, seat):
        self.asked_log += 1
        if isinstance(self._log, Exception):
            raise self._log
        return self._log


def test_after_a_boot_an_engine_is_asked_only_for_what_it_declares():
    vllm_seat = {"name": "coder", "engine": "vllm", "container": "vllm-coder"}
    # unhealthy: not asked what it serves; its log is read all the same
    unreadable = _gates.engine_after_boot_gates(vllm_seat, _LogOnly(DockerError("docker logs: no such container")), False)
    assert [(g["gate"], g["ok"], g["detail"]) for g in unreadable] == [
        ("boot_log", False, "container vllm-coder: docker logs: no such container")]
    fixed, host = {"name": "asr", "engine": "fixed", "container": "asr"}, _LogOnly("")
    assert _gates.engine_after_boot_gates(fixed, host, True) == [] and host.asked_log == 0, \
        "a fixed tenant declares no server API and no boot log"
