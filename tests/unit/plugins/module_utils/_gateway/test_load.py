"""The load a window sends through the gateway: real HTTP requests to a local server that
fails one route for a while, counted per route as the report shows them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.proc import process_stat
from ansible_collections.llmfleet.seats.plugins.module_utils._gateway.load import GatewayLoadError, gateway_load
from support.local_http import serving as local_serving
from support.wait import wait_for

KEY = "sk-load-test-0123456789"


class Gateway(ThreadingHTTPServer):
    """Answers chat completions. Route ``restarts`` gets the 500 a gateway sends when its
    deployment is gone for its requests number ``outage`` (a range); once it has had
    ``stop_after`` requests, the stop file appears."""
    daemon_threads = True

    def __init__(self, outage=range(0), stop_after=None, stop_file=None):
        super().__init__(("127.0.0.1", 0), Handler)
        self.outage, self.stop_after, self.stop_file = outage, stop_after, stop_file
        self.seen, self.restarts = [], []   # every request; (number, ok, monotonic time) of route restarts

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        server.seen.append((self.path, self.headers.get("Authorization"), body["model"], body["max_tokens"]))
        down = False
        if body["model"] == "restarts":
            number = len(server.restarts)
            down = number in server.outage
            if server.stop_after is not None and number + 1 >= server.stop_after:
                server.stop_file.touch()
        if down:
            status, reply = 500, {"error": {"message": "Connection error. key=%s" % KEY}}
        else:
            status, reply = 200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]}
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if body["model"] == "restarts":
            server.restarts.append((number, not down, time.monotonic()))


def serving(**kwargs):
    return local_serving(Gateway(**kwargs))


@pytest.fixture
def gateway():
    with serving() as server:
        yield server


def params(gateway, stop_file, **extra):
    return dict({"url": gateway.url + "/v1", "api_key": KEY, "routes": ["steady", "restarts"],
                 "stop_file": str(stop_file), "max_seconds": 30.0, "interval": 0.02, "timeout": 5.0,
                 "max_tokens": 8, "validate_certs": True}, **extra)


def test_each_route_is_counted_apart_and_the_outage_is_its_longest_gap(tmp_path):
    stop = tmp_path / "stop"
    with serving(outage=range(10, 20), stop_after=30, stop_file=stop) as gateway:
        result = gateway_load(params(gateway, stop))
    steady, restarts = result["routes"]
    assert steady["route"] == "steady" and steady["failed"] == 0 and steady["sent"] > 10
    assert restarts["failed"] == 10 and restarts["sent"] >= 30
    # the gateway's own clock: from the last reply before the outage to the first after it
    times = {number: at for number, _ok, at in gateway.restarts}
    assert restarts["longest_gap_s"] == pytest.approx(times[20] - times[9], abs=0.25)
    assert restarts["longest_gap_s"] > steady["longest_gap_s"]
    assert restarts["failures"] == ["HTTP 500: Connection error. key=********"], "the key never comes back"
    assert result["changed"] is False
    assert {seen[:2] for seen in gateway.seen} == {("/v1/chat/completions", "Bearer " + KEY)}
    assert {seen[3] for seen in gateway.seen} == {8}


def test_a_route_down_to_the_end_is_without_an_answer_until_the_end(tmp_path):
    with serving(outage=range(10 ** 6)) as gateway:
        result = gateway_load(params(gateway, tmp_path / "never", max_seconds=0.5))
    restarts = result["routes"][1]
    assert restarts["failed"] == restarts["sent"] > 0
    assert restarts["longest_gap_s"] >= 0.5 and restarts["longest_gap_ended_at_s"] >= 0.5


def test_an_unreachable_gateway_is_a_failure_per_request_not_an_error(tmp_path):
    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as closed:
        port = closed.server_address[1]
    result = gateway_load({"url": "http://127.0.0.1:%d" % port, "api_key": None, "routes": ["r"],
                           "stop_file": str(tmp_path / "stop"), "max_seconds": 0.3, "interval": 0.05,
                           "timeout": 2.0, "max_tokens": 8, "validate_certs": True})
    only = result["routes"][0]
    assert only["failed"] == only["sent"] > 0 and only["failures"][0].startswith("cannot reach http://127.0.0.1:")


def test_the_load_ends_with_the_run_it_measures(tmp_path):
    """A window cut short never writes its stop file: the load stops when its ansible-playbook is gone."""
    run_process = subprocess.Popen(["sleep", "600"])
    try:
        run = {"pid": run_process.pid, "started": process_stat(run_process.pid)[1]}
        with serving() as gateway:
            def cut_short():
                wait_for(lambda: len(gateway.seen) >= 6, 30, "the load's first requests")
                run_process.kill()
                run_process.wait()
            killer = threading.Thread(target=cut_short, daemon=True)
            killer.start()
            result = gateway_load(params(gateway, tmp_path / "never", max_seconds=600.0, run=run))
            killer.join()
    finally:
        run_process.kill()
        run_process.wait()
    assert result["seconds"] < 600 and all(route["sent"] >= 3 for route in result["routes"])
    # an id the kernel gave to a later process is not the run
    reused = gateway_load(params(gateway, tmp_path / "never", max_seconds=600.0,
                                 run={"pid": os.getpid(), "started": process_stat(os.getpid())[1] + 1}))
    assert reused["seconds"] < 600


@pytest.mark.parametrize("change, message", [
    ({"routes": []}, "routes: expected a non-empty list of the gateway's model names"),
    ({"routes": ["a", "a"]}, "routes: each route once"),
    ({"routes": ["gen-small\nX-Injected: 1"]},
     "routes: expected a non-empty list of the gateway's model names, each on one line"),
    ({"interval": 0.0}, "interval: expected a finite number of seconds > 0"),
    ({"max_seconds": float("inf")}, "max_seconds: expected a finite number of seconds > 0, got inf"),
    ({"timeout": float("nan")}, "timeout: expected a finite number of seconds > 0, got nan"),
    ({"max_tokens": 0}, "max_tokens: expected an integer >= 1"),
    ({"url": "fv-gw:4000"}, "url: expected http(s)://host:port"),
    ({"run": {"pid": "1; kill"}}, "run: expected the llmfleet.seats.controller lookup's record of the run"),
])
def test_arguments_it_cannot_run_with_are_refused_in_one_line(gateway, tmp_path, change, message):
    with pytest.raises(GatewayLoadError if "url" not in change else ValueError, match="^" + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        gateway_load(dict(params(gateway, tmp_path / "stop"), **change))
