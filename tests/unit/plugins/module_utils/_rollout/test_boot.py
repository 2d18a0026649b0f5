"""Booting at the floor: each GPU one seat at a time in wave order, the GPUs side by side, a
multi-GPU seat after the seat before it on each of its GPUs; the first failed gate abandons the
boots under way and starts nothing more."""

from __future__ import annotations

import threading

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import gate
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import boot as _boot

# a boot that never comes is a bug in the order, not a slow machine: fail instead of hanging
NEVER_S = 30


def _seat(name, *gpus, footprint=1000):
    return {"name": name, "engine": "fixed", "gpus": list(gpus), "footprint_mib": footprint,
            "container": name, "port": 8000}


def _cards(free=80000):
    return {"gpus": [{"index": i, "uuid": uuid, "memory_total_mib": 81559, "memory_free_mib": free,
                      "processes": []} for i, uuid in enumerate(("GPU-a", "GPU-b"))]}


class Host:
    """The seats' side: a seat is healthy once the test says so (``ready[seat].set()``), or
    never, when the test makes it fail; it records the order of events."""

    def __init__(self, fail=()):
        self.abandon = threading.Event()
        self.health_timeout = NEVER_S
        self.runtime_probe = False
        self.ready = {}
        self.fail = set(fail)
        self.events = []
        self.lock = threading.Lock()

    def note(self, event):
        with self.lock:
            self.events.append(event)

    def start(self, seat):
        self.ready.setdefault(seat["name"], threading.Event())
        self.note(("start", seat["name"]))

    def wait_healthy(self, seat):
        ready = self.ready[seat["name"]]
        if seat["name"] in self.fail:
            self.note(("unhealthy", seat["name"]))
            return 503, 0.0
        while not ready.wait(0.01):
            if self.abandon.is_set():
                self.note(("abandoned", seat["name"]))
                return None, 0.0
        self.note(("healthy", seat["name"]))
        return 200, 0.0

    def container_gate(self, seat):
        return gate(seat["name"], "container_running", True, "running", "running", "")


def _booter(host, seats, waves, cards=_cards):
    return _boot.Booter(seats, waves, host.start, cards, host, [], 512, 512)


def _run(booter):
    result = {}
    thread = threading.Thread(target=lambda: result.update(booter.run()), daemon=True)
    thread.start()
    return thread, result


def _wait_for(host, event):
    for _tick in range(NEVER_S * 100):
        with host.lock:
            if event in host.events:
                return
        threading.Event().wait(0.01)
    pytest.fail("never happened: %s (events: %s)" % (event, host.events))


def test_each_seat_waits_for_the_one_before_it_on_each_of_its_gpus():
    seats = [_seat("tp", "GPU-a", "GPU-b"), _seat("a1", "GPU-a"), _seat("b1", "GPU-b"), _seat("a2", "GPU-a")]
    assert _boot.boot_after([["tp"], ["a1", "b1"], ["a2"]], seats) == {
        "tp": [], "a1": ["tp"], "b1": ["tp"], "a2": ["a1"]}


def test_a_gpu_does_not_wait_for_another_gpus_slow_boot():
    # waves [a1, b1], [a2, b2]: b2 must start while a1 still boots (a wave would hold it back)
    host = Host()
    seats = [_seat("a1", "GPU-a"), _seat("b1", "GPU-b"), _seat("a2", "GPU-a"), _seat("b2", "GPU-b")]
    thread, result = _run(_booter(host, seats, [["a1", "b1"], ["a2", "b2"]]))
    _wait_for(host, ("start", "b1"))
    host.ready["b1"].set()
    _wait_for(host, ("start", "b2"))
    assert ("start", "a2") not in host.events, "a2 waits for a1, still booting on its GPU"
    for name in ("b2", "a1"):
        host.ready[name].set()
    _wait_for(host, ("start", "a2"))
    host.ready["a2"].set()
    thread.join(NEVER_S)
    assert result["failed"] is None
    assert [boot["outcome"] for boot in result["boots"]] == ["ready"] * 4
    assert [boot["after"] for boot in result["boots"]] == [[], [], ["a1"], ["b1"]]
    assert result["actions"][2].startswith("booted: a2 in ") and result["actions"][2].endswith("(after a1)")
    # one seat at a time per GPU: a seat starts only after the one before it was healthy
    events = host.events
    assert events.index(("healthy", "a1")) < events.index(("start", "a2"))
    assert events.index(("healthy", "b1")) < events.index(("start", "b2"))


def test_the_first_failed_gate_abandons_the_boots_under_way_and_starts_nothing_more():
    host = Host(fail={"b1"})
    seats = [_seat("a1", "GPU-a"), _seat("b1", "GPU-b"), _seat("a2", "GPU-a"), _seat("b2", "GPU-b")]
    thread, result = _run(_booter(host, seats, [["a1", "b1"], ["a2", "b2"]]))
    thread.join(NEVER_S)
    assert not thread.is_alive(), "a1 never became healthy: its wait must end when b1 fails"
    outcomes = {boot["seat"]: boot["outcome"] for boot in result["boots"]}
    assert outcomes == {"a1": "abandoned", "b1": "failed", "a2": "not started", "b2": "not started"}
    assert ("start", "a2") not in host.events and ("start", "b2") not in host.events
    assert result["failed"] == "gate failed: b1 health: GET /health answered 503 after 0 s (timeout 30 s)"
    assert [(g["seat"], g["gate"]) for g in result["gates"] if g["seat"] == "a1"] == [
        ("a1", "free_mib_before_start")], "an abandoned boot has no gates after its start"
    assert [g["gate"] for g in result["gates"] if not g["ok"]] == ["health"]
    assert "not started: a2 (a seat before it failed)" in result["actions"]


def test_a_seat_without_room_is_not_started():
    host = Host()
    seats = [_seat("big", "GPU-a", footprint=90000), _seat("next", "GPU-a")]
    thread, result = _run(_booter(host, seats, [["big"], ["next"]]))
    thread.join(NEVER_S)
    assert host.events == [] and result["failed"].startswith("gate failed: big free_mib_before_start")
    assert result["actions"] == ["not started: big (its gate before the start failed)",
                                 "not started: next (a seat before it failed)"]


def test_a_runtime_that_cannot_start_a_seat_fails_its_boot_in_one_line():
    host = Host()
    booter = _boot.Booter([_seat("a1", "GPU-a")], [["a1"]], lambda seat: "compose: no such image",
                          _cards, host, [], 512, 512)
    result = booter.run()
    assert result["failed"] == ("gate failed: a1 runtime_start: the runtime could not start it: "
                                "compose: no such image")


def test_an_operators_error_is_one_line_and_stops_the_rest_and_a_bug_is_raised():
    host = Host()

    def broken_cards():
        raise OSError("NVML: driver not loaded")

    seats = [_seat("a1", "GPU-a"), _seat("a2", "GPU-a")]
    result = _booter(host, seats, [["a1"], ["a2"]], broken_cards).run()
    assert result["failed"] == "seat a1: NVML: driver not loaded"
    assert [boot["outcome"] for boot in result["boots"]] == ["failed", "not started"]

    def buggy_cards():
        raise ZeroDivisionError("a bug")

    with pytest.raises(ZeroDivisionError):
        _booter(Host(), seats, [["a1"], ["a2"]], buggy_cards).run()

    # a seat without the plan's fields is the input's fault, said in one line
    result = _booter(Host(), [{"name": "a1", "gpus": ["GPU-a"]}], [["a1"]]).run()
    assert result["failed"] == ("seat a1: expected a seat_plan plan's seat, missing or malformed "
                                "'footprint_mib'")


def test_the_floor_is_the_busiest_gpus_boots_one_after_another():
    boots = [{"gpus": ["a"], "boot_s": 30.0}, {"gpus": ["a", "b"], "boot_s": 20.0},
             {"gpus": ["b"], "boot_s": 45.0}, {"gpus": ["a"], "boot_s": None}]
    assert _boot.floor_s(boots) == 65.0


def _params(**changes):
    params = {"seats": [_seat("a1", "GPU-a"), _seat("b1", "GPU-b")], "waves": [["a1", "b1"]],
              "root": "/srv/compose", "runtimes": {}, "gpu_source": "auto", "plan_gpus": [],
              "margin_mib": 512, "tolerance_mib": 512, "spare_gate": True, "health_timeout": 1, "health_interval": 1,
              "runtime_probe": False, "runtime_probe_fraction": 0.9, "address": "127.0.0.1",
              "api_key": None, "secrets": None, "docker_host": None, "drain_timeout": 0.0, "drain_interval": 0.2}
    params.update(changes)
    return params


@pytest.mark.parametrize("changes, message", [
    ({"seats": [_seat("../etc", "GPU-a")], "waves": [["../etc"]]},
     "seats[0].name: expected lowercase letters, digits, '-' or '_', starting with a letter or digit, "
     "got '../etc'"),
    ({"seats": [_seat("a1\n", "GPU-a")], "waves": [["a1\n"]]}, "got 'a1\\n'"),
    ({"seats": [_seat("a1; rm -rf /", "GPU-a")], "waves": [["a1; rm -rf /"]]}, "got 'a1; rm -rf /'"),
    ({"seats": [7], "waves": []}, "seats[0].name: expected"),
    ({"seats": [dict(_seat("a1", "GPU-a"), gpus="GPU-a")], "waves": [["a1"]]},
     "seat a1: gpus: expected a list of GPU UUIDs, got 'GPU-a'"),
    ({"seats": [dict(_seat("a1", "GPU-a"), gpus=[0])], "waves": [["a1"]]},
     "seat a1: gpus: expected a list of GPU UUIDs, got [0]"),
    ({"waves": [["a1"], ["c1"]]}, "waves[1]: expected names of the seats given (a1, b1), got 'c1'"),
    ({"waves": [["a1"], ["a1", "b1"]]}, "waves[1]: seat a1 boots once, it is listed again"),
    ({"runtimes": {"a1": "podman"}}, "runtimes: seat a1: expected one of compose, systemd, got 'podman'"),
    ({"drain_timeout": -1.0}, "drain_timeout: expected a finite number of seconds >= 0 (0: restart at once), got -1.0"),
    ({"drain_timeout": float("nan")}, "drain_timeout: expected a finite number of seconds >= 0"),
    ({"drain_timeout": float("inf")}, "drain_timeout: expected a finite number of seconds >= 0"),
    ({"drain_interval": 0.0}, "drain_interval: expected a finite number of seconds > 0, got 0.0"),
])
def test_seat_boot_refuses_input_before_it_starts_anything(changes, message):
    with pytest.raises(_boot.GateInputError) as refused:
        _boot.seat_boot(_params(**changes), docker=None)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_seat_boot_in_check_mode_lists_the_order_and_starts_nothing():
    result = _boot.seat_boot(_params(waves=[["a1"], ["b1"]]), docker=None, check_mode=True)
    assert result["changed"] and result["gates"] == [] and result["actions"] == []
    assert [(boot["seat"], boot["outcome"]) for boot in result["boots"]] == [
        ("a1", "not started"), ("b1", "not started")]


def test_a_seat_drains_right_before_its_restart_and_the_action_says_so():
    host = Host()
    seats = [_seat("a1", "GPU-a"), _seat("a2", "GPU-a")]

    def drain(seat):
        host.note(("drain", seat["name"]))
        if seat["name"] == "a1":
            return {"seat": "a1", "outcome": "drained", "in_flight_at_start": 3, "in_flight_left": 0, "waited_s": 4.2}
        return {"seat": "a2", "outcome": "not_answering", "in_flight_at_start": None, "in_flight_left": None,
                "waited_s": 0.0}

    booter = _boot.Booter(seats, [["a1"], ["a2"]], host.start, _cards, host, [], 512, 512, drain=drain)
    thread, result = _run(booter)
    _wait_for(host, ("start", "a1"))
    host.ready["a1"].set()
    _wait_for(host, ("start", "a2"))
    host.ready["a2"].set()
    thread.join(NEVER_S)
    events = [event for event in host.events if event[0] in ("drain", "start", "healthy")]
    assert events == [("drain", "a1"), ("start", "a1"), ("healthy", "a1"), ("drain", "a2"), ("start", "a2"),
                      ("healthy", "a2")], "each seat drains only when its turn to restart has come"
    assert result["boots"][0]["drain"]["in_flight_at_start"] == 3
    assert result["actions"][0].endswith(" (restarted: drained 3 request(s) in flight in 4.2 s)")
    assert "restarted" not in result["actions"][1], "a seat that was not serving had nothing to drain"
