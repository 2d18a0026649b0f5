"""The wait before a seat restarts: the count its engine publishes, read until it reaches zero
or the deadline, and what the report says of it."""

from __future__ import annotations

import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import in_flight
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.boot import _drainer
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.drain import drain_words, running_at, seat_drain, wait_drained
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import GateInputError, SeatHost
from support.local_http import serving

# vLLM's exposition format, two engines of one server (data parallel), as its /metrics prints it
TWO_ENGINES = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="gen-small"} 2.0
vllm:num_requests_running{engine="1",model_name="gen-small"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="gen-small"} 4.0
vllm:num_requests_waiting{engine="1",model_name="gen-small"} 0.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="gen-small",reason="capacity"} 9.0
"""


def metrics(running, waiting=0):
    return ('vllm:num_requests_running{engine="0",model_name="m"} %s\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} %s\n' % (float(running), float(waiting)))


def test_in_flight_sums_running_and_waiting_over_the_engines_and_nothing_else():
    assert in_flight(TWO_ENGINES) == 7
    assert in_flight("vllm:num_requests_running 0.0\n") == 0
    assert in_flight("process_cpu_seconds_total 3.0\n") is None
    assert in_flight("") is None and in_flight(None) is None


class Scripted:
    """A seat's /metrics as a sequence of replies, one per reading; the clock moves a second per
    reading."""

    def __init__(self, replies):
        self.replies, self.now, self.asked = list(replies), 0.0, 0

    def call(self, method, path):
        assert (method, path) == ("GET", "/metrics")
        self.asked += 1
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


SEAT = {"name": "chat", "engine": "vllm"}


def drain(replies, timeout=10.0, seat=None):
    client = Scripted(replies)
    return wait_drained(seat or SEAT, client, timeout, 1.0, clock=client.clock, sleep=client.sleep), client


def test_the_wait_ends_when_the_count_reaches_zero():
    result, client = drain([(200, metrics(2, 1)), (200, metrics(1)), (200, metrics(0))])
    assert result == {"seat": "chat", "outcome": "drained", "in_flight_at_start": 3, "in_flight_left": 0,
                      "waited_s": 2.0}
    assert client.asked == 3
    assert drain_words(result) == "drained 3 request(s) in flight in 2.0 s"


def test_a_seat_still_busy_at_the_deadline_is_stopped_anyway_and_said_so():
    result = drain([(200, metrics(5))], timeout=3.0)[0]
    assert result["outcome"] == "timed_out" and result["in_flight_left"] == 5 and result["waited_s"] == 3.0
    assert drain_words(result) == "5 request(s) still in flight after 3.0 s, stopped anyway"


def test_nothing_running_there_is_not_waited_for():
    result, client = drain([Unreachable("cannot reach http://127.0.0.1:8101: refused")])
    assert result["outcome"] == "not_answering" and client.asked == 1 and result["waited_s"] == 0.0
    assert drain_words(result) is None


@pytest.mark.parametrize("reply, status", [((503, ""), 503), ((200, "no counts here\n"), 200), ((401, "no key"), 401)])
def test_something_that_answers_without_the_count_is_said_and_not_waited_for(reply, status):
    result, client = drain([reply])
    assert result["outcome"] == "unreadable" and client.asked == 1
    assert drain_words(result) == "its count of requests in flight could not be read (HTTP %d), not waited for" % status


def test_a_reading_missed_while_draining_does_not_end_the_wait():
    result = drain([(200, metrics(2)), Unreachable("timed out"), (200, metrics(1)), (200, metrics(0))])[0]
    assert result["outcome"] == "drained" and result["in_flight_at_start"] == 2 and result["waited_s"] == 3.0


def test_a_count_lost_until_the_deadline_is_said():
    result = drain([(200, metrics(5)), Unreachable("timed out")], timeout=3.0)[0]
    assert result["outcome"] == "count_lost" and result["in_flight_left"] == 5
    assert drain_words(result) == "5 request(s) in flight at its last count, none read after, stopped anyway after 3.0 s"


@pytest.mark.parametrize("engine", ["fixed", "radiance"])
def test_an_engine_that_counts_nothing_is_not_asked(engine):
    result, client = drain([(200, metrics(9))], seat={"name": "asr", "engine": engine})
    assert result["outcome"] == "not_counted" and client.asked == 0


def test_no_timeout_means_no_wait():
    result, client = drain([(200, metrics(9))], timeout=0)
    assert result["outcome"] == "not_counted" and client.asked == 0


class Metrics(ThreadingHTTPServer):
    """A seat's /metrics over real HTTP: ``counts`` are the in-flight counts it answers, one per
    reading, the last repeated; the Authorization header of each reading is kept."""
    daemon_threads = True

    def __init__(self, counts):
        super().__init__(("127.0.0.1", 0), MetricsHandler)
        self.counts, self.auth = list(counts), []


class MetricsHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        server = self.server
        server.auth.append(self.headers.get("Authorization"))
        count = server.counts.pop(0) if len(server.counts) > 1 else server.counts[0]
        data = metrics(count).encode()
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def seat_metrics(counts):
    return serving(Metrics(counts))


def drain_params(seats, **changes):
    return dict({"seats": seats, "leaving": [], "timeout": 5.0, "interval": 0.01, "address": "127.0.0.1", "api_key": None,
                 "secrets": {"busy": {"VLLM_API_KEY": "sk-seat-own"}}}, **changes)


def test_seat_drain_waits_for_each_seat_side_by_side_with_its_own_key():
    with seat_metrics([3, 2, 1, 0]) as busy, seat_metrics([0]) as idle:
        seats = [{"name": "busy", "engine": "vllm", "port": busy.server_address[1]},
                 {"name": "idle", "engine": "vllm", "port": idle.server_address[1]},
                 {"name": "asr", "engine": "fixed", "port": 9}]
        result = seat_drain(drain_params(seats))
    outcomes = [(d["seat"], d["outcome"], d["in_flight_at_start"], d["in_flight_left"]) for d in result["drains"]]
    assert outcomes == [("busy", "drained", 3, 0), ("idle", "drained", 0, 0), ("asr", "not_counted", None, None)]
    assert set(busy.auth) == {"Bearer sk-seat-own"} and set(idle.auth) == {None}
    assert result["actions"][0].startswith("before its stop: busy: drained 3 request(s) in flight in ")
    assert result["actions"][1] == "before its stop: idle: nothing in flight" and len(result["actions"]) == 2
    assert result["changed"] is False


def test_seat_drain_asks_nothing_in_check_mode():
    with seat_metrics([5]) as busy:
        result = seat_drain(drain_params([{"name": "busy", "engine": "vllm", "port": busy.server_address[1]}]),
                            check_mode=True)
        assert busy.auth == [] and result["drains"] == []


@pytest.mark.parametrize("change, message", [
    ({"seats": [{"engine": "vllm", "port": 1}]}, "seats[0].name: expected a seat_plan plan's seat"),
    ({"seats": [{"name": "a", "engine": "tgi", "port": 1}]}, "seat a: engine: expected one of fixed, radiance, vllm"),
    ({"seats": [{"name": "a", "engine": "vllm", "port": "8000; true"}]}, "seat a: port: expected a TCP port"),
    ({"timeout": -1.0}, "timeout: expected a finite number of seconds >= 0 (0: stop at once), got -1.0"),
    # an endless wait would hold the window on a seat that never drains
    ({"timeout": float("inf")}, "timeout: expected a finite number of seconds >= 0 (0: stop at once), got inf"),
    ({"timeout": float("nan")}, "timeout: expected a finite number of seconds >= 0 (0: stop at once), got nan"),
    ({"interval": 0.0}, "interval: expected a finite number of seconds > 0"),
    ({"leaving": ["../etc"]}, "leaving: expected seat names (lowercase letters, digits"),
])
def test_seat_drain_refuses_what_it_cannot_ask_in_one_line(change, message):
    with pytest.raises(GateInputError, match=re.escape(message)):
        seat_drain(dict(drain_params([{"name": "a", "engine": "vllm", "port": 1}]), **change))


class PublishingDocker:
    """The container engine as host_containers reads it: each running seat container publishes
    one port (``{seat: port}``); a container of something else publishes its own."""

    def __init__(self, published):
        self.published = published

    def run(self, args, timeout=None):
        assert args[:2] == ["ps", "--all"], args
        return 0, "\n".join(["other"] + ["id-" + seat for seat in self.published]) + "\n", ""

    def inspect(self, ids):
        found = {"other": {"Id": "other", "Name": "/grafana", "Config": {"Labels": {}}, "State": {"Status": "running"},
                           "HostConfig": {"PortBindings": {"3000/tcp": [{"HostIp": "", "HostPort": "3000"}]}}}}
        for seat, port in self.published.items():
            found["id-" + seat] = {
                "Id": "id-" + seat, "Name": "/" + seat, "Config": {"Labels": {"io.llmfleet.seat": seat}},
                "State": {"Status": "running"},
                "HostConfig": {"PortBindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}}}
        return {key: found[key] for key in ids}, None


def test_seat_drain_asks_where_a_seat_runs_now_and_drains_the_seats_leaving_the_host():
    with seat_metrics([2, 0]) as moving, seat_metrics([1, 0]) as leaving:
        # the plan moves "moving" to port 9 (nothing there yet): it still runs at its old port
        docker = PublishingDocker({"moving": moving.server_address[1], "retired": leaving.server_address[1]})
        result = seat_drain(drain_params([{"name": "moving", "engine": "vllm", "port": 9}],
                                         leaving=["retired", "gone-already"]), docker)
    outcomes = [(d["seat"], d["outcome"], d["in_flight_at_start"]) for d in result["drains"]]
    # a leaving seat is counted by whichever engine's count answers; one not running is not asked
    assert outcomes == [("moving", "drained", 2), ("retired", "drained", 1)]
    assert moving.auth and leaving.auth
    assert result["actions"][-1] == "leaving: gone-already: no running container of it found publishing one port; not drained"
    assert not any("retired: no running" in action for action in result["actions"])


def test_without_the_container_engine_the_plans_port_is_asked():
    class Unaskable(PublishingDocker):
        def run(self, args, timeout=None):
            raise DockerError("docker: not found")
    with seat_metrics([0]) as seat:
        result = seat_drain(drain_params([{"name": "busy", "engine": "vllm", "port": seat.server_address[1]}],
                                         leaving=["retired"]), Unaskable({}))
    assert [(d["seat"], d["outcome"]) for d in result["drains"]] == [("busy", "drained")]


def test_a_restart_drains_the_seat_at_the_port_it_runs_at_before_the_window():
    with seat_metrics([1, 0]) as old:
        drain = _drainer(SeatHost(None), PublishingDocker({"moving": old.server_address[1]}), 5.0, 0.01)
        result = drain({"name": "moving", "engine": "vllm", "port": 9})
    assert (result["outcome"], result["in_flight_at_start"]) == ("drained", 1)


def test_a_published_address_that_is_not_an_address_is_not_asked():
    class OddBinding(PublishingDocker):
        def inspect(self, ids):
            found, why = super().inspect(ids)
            found["id-moving"]["HostConfig"]["PortBindings"]["8000/tcp"][0]["HostIp"] = "evil.example/x?"
            return found, why
    assert running_at(OddBinding({"moving": 8101, "kept": 8102})) == {"kept": ("127.0.0.1", 8102)}
