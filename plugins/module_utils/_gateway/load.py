# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What the gateway's clients saw during a window: a light, bounded stream of real chat
completions per route, sent while the window runs, each route counted apart (requests sent,
failed, and the longest stretch without a successful reply).

The stream is bounded three ways: one request in flight per route, a pause between requests,
and a deadline; it stops early when the stop file appears (the window creates it when it ends)
or when the run it measures is gone (a window cut short never reaches its stop file).
"""

from __future__ import annotations

import json
import os
import threading
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import seconds_problem
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import CONTROL_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Client, Unreachable, error_message
from ansible_collections.llmfleet.seats.plugins.module_utils._common.proc import still_runs
from ansible_collections.llmfleet.seats.plugins.module_utils._gateway.smoke import api_root

# the distinct failures a route keeps, for the report: the first few say what went wrong
FAILURES_KEPT = 3

GATEWAY_LOAD_SPEC = {
    "url": {"type": "str", "required": True},
    "api_key": {"type": "str", "no_log": True},
    "routes": {"type": "list", "elements": "str", "required": True},
    "stop_file": {"type": "path", "required": True},
    "max_seconds": {"type": "float", "default": 1800.0},
    "interval": {"type": "float", "default": 0.5},
    "timeout": {"type": "float", "default": 60.0},
    "max_tokens": {"type": "int", "default": 8, "no_log": False},
    "validate_certs": {"type": "bool", "default": True},
    "run": {"type": "dict"},
}


class GatewayLoadError(ValueError):
    """Arguments the load cannot run with; the message names the argument."""


def check_load_args(params):
    """Refuse, in one line, what the load cannot run with."""
    routes = params["routes"]
    if not routes or not all(isinstance(route, str) and route.strip() and not CONTROL_RE.search(route)
                             for route in routes):
        raise GatewayLoadError("routes: expected a non-empty list of the gateway's model names, each on one line, "
                               "got %r" % (routes,))
    if len(set(routes)) != len(routes):
        raise GatewayLoadError("routes: each route once, got %r" % (routes,))
    for name in ("max_seconds", "interval", "timeout"):
        problem = seconds_problem(name, params[name])
        if problem:
            raise GatewayLoadError(problem)
    if params["max_tokens"] < 1:
        raise GatewayLoadError("max_tokens: expected an integer >= 1, got %r" % params["max_tokens"])
    run = params.get("run")
    if run is not None and not all(isinstance(run.get(key), int) and not isinstance(run.get(key), bool)
                                   and run[key] > 0 for key in ("pid", "started")):
        raise GatewayLoadError("run: expected the llmfleet.seats.controller lookup's record of the run "
                               "(its pid and started), got %r" % (run,))
    api_root(params["url"])


class RouteLoad:
    """One route's stream and its tally. ``send()`` is one request: None when it succeeded,
    else what failed."""

    def __init__(self, route, send, clock):
        self.route, self.send, self.clock = route, send, clock
        self.sent = self.failed = 0
        self.failures = []
        self.longest_gap = 0.0
        self.longest_gap_ends = None

    def run(self, began, done, interval):
        last_success = began
        while not done():
            problem = self.send()
            now = self.clock()
            self.sent += 1
            if problem is None:
                self._gap(last_success, now)
                last_success = now
            else:
                self.failed += 1
                if problem not in self.failures and len(self.failures) < FAILURES_KEPT:
                    self.failures.append(problem)
            if done(interval):
                break
        # a route still failing when the window ended has been without an answer until then
        self._gap(last_success, self.clock())

    def _gap(self, since, now):
        if now - since > self.longest_gap:
            self.longest_gap, self.longest_gap_ends = now - since, now

    def result(self, began):
        return {"route": self.route, "sent": self.sent, "failed": self.failed,
                "longest_gap_s": round(self.longest_gap, 2),
                "longest_gap_ended_at_s": None if self.longest_gap_ends is None
                else round(self.longest_gap_ends - began, 2),
                "failures": self.failures}


def run_load(routes, send, stopped, max_seconds, interval, clock=time.monotonic):
    """Stream requests on every route side by side until ``stopped()`` or ``max_seconds``;
    ``send(route)`` is one request. Returns ``(results, seconds)``, one result per route in
    the order given."""
    began = clock()
    finished = threading.Event()

    def done(wait=0.0):
        """Whether to stop; with ``wait``, pause that long first (less once it is time)."""
        deadline = began + max_seconds
        while wait > 0 and not finished.is_set():
            step = min(wait, 0.1, max(deadline - clock(), 0))
            if step <= 0:
                break
            finished.wait(step)
            wait -= step
        if finished.is_set() or stopped() or clock() >= deadline:
            finished.set()
        return finished.is_set()

    loads = [RouteLoad(route, lambda route=route: send(route), clock) for route in routes]
    threads = [threading.Thread(target=load.run, args=(began, done, interval), daemon=True) for load in loads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [load.result(began) for load in loads], round(clock() - began, 1)


def chat_sender(url, api_key, timeout, max_tokens, validate_certs=True):
    """``send(route)`` for run_load: one non-streamed chat completion through the gateway; a
    reply with a choice is a success, anything else is what failed (the key scrubbed)."""
    client = Client(api_root(url), api_key, timeout=timeout, validate_certs=validate_certs)

    def send(route):
        body = {"model": route, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": "Say OK."}]}
        try:
            status, text = client.call("POST", "/chat/completions", body)
        except Unreachable as error:
            return str(error)
        try:
            reply = json.loads(text)
        except ValueError:
            reply = None
        if status == 200 and isinstance(reply, dict) and reply.get("choices"):
            return None
        return client.redact("HTTP %d: %s" % (status, error_message(text)))
    return send


def gateway_load(params):
    """The gateway_load module's result for its validated ``params``."""
    check_load_args(params)
    send = chat_sender(params["url"], params.get("api_key"), params["timeout"], params["max_tokens"],
                       params["validate_certs"])
    run = params.get("run")

    def stopped():
        return os.path.exists(params["stop_file"]) or (run is not None and not still_runs(run["pid"], run["started"]))
    results, seconds = run_load(params["routes"], send, stopped, params["max_seconds"], params["interval"])
    return {"changed": False, "routes": results, "seconds": seconds}
