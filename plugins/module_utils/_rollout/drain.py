# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Before a seat that serves is stopped: wait, bounded, until the requests it is working on reach
zero, so a long answer finishes rather than being cut off and asked again elsewhere.

A seat is asked where its container publishes its port now, not where the plan puts it: a
window that moves a seat to another port drains it at the old one, and a seat leaving the host
(in no plan any more) is drained too, by whichever engine counts at its address.

A file-configured LiteLLM cannot be told to stop sending a seat requests (its per-deployment
block needs a database-backed proxy), so the gateway's side of a restart is its own failover: a
route with another deployment (a lower ``order`` tier or a ``fallbacks`` entry) and retries
sends a request the stopped seat refuses, or cuts off, to the other deployment. The wait here
keeps what is cut off to the requests that arrive in the last poll before the stop.
"""

from __future__ import annotations

import ipaddress
import threading
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import seconds_problems
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import SEAT_NAME_EXPECTED, SEAT_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import SEAT_GATES_SPEC, GateInputError, SeatHost
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.host import host_containers, is_running

DRAINED = "drained"              # nothing in flight when it was stopped
TIMED_OUT = "timed_out"          # requests still in flight at the deadline: stopped anyway
NOT_ANSWERING = "not_answering"  # nothing answers at the seat's address: nothing to wait for
NOT_COUNTED = "not_counted"      # its engine counts no requests in flight: stopped at once
UNREADABLE = "unreadable"        # something answers there, but not with the count: stopped at once
COUNT_LOST = "count_lost"        # counted, then the count could not be read until the deadline


def wait_drained(seat, client, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Wait until ``seat``'s engine, asked through ``client``, has no request in flight, at
    most ``timeout`` seconds; the outcome for the report. A seat without an ``engine`` (one
    leaving the host) is counted by whichever engine's count answers at its address."""
    engines = [engine_of(seat)] if seat.get("engine") else [engine for _name, engine in sorted(ENGINES.items())]
    engines = [engine for engine in engines if engine.IN_FLIGHT_PATH is not None]
    result = {"seat": seat["name"], "outcome": NOT_COUNTED, "in_flight_at_start": None,
              "in_flight_left": None, "waited_s": 0.0}
    if not engines or timeout <= 0:
        return result
    began = clock()
    while True:
        status, count, engines = _count(client, engines)
        waited = clock() - began
        result["waited_s"] = round(waited, 1)
        if count is None and result["in_flight_at_start"] is None:
            # nothing runs there (a seat not started yet), or something that does not count
            result["outcome"] = NOT_ANSWERING if status is None else UNREADABLE
            result["status"] = status
            return result
        if count is not None:
            result["in_flight_left"] = count
            if result["in_flight_at_start"] is None:
                result["in_flight_at_start"] = count
            if count == 0:
                result["outcome"] = DRAINED
                return result
        if waited >= timeout:
            # a busy seat may miss a reading: only the deadline ends a wait that has counted
            result["outcome"] = TIMED_OUT if count is not None else COUNT_LOST
            return result
        sleep(min(interval, max(timeout - waited, 0.01)))


def _count(client, engines):
    """``(status, count, engines)``: the first engine whose count answers (the engines narrowed
    to it once one has), or the last status and None."""
    status = None
    for engine in engines:
        try:
            status, text = client.call("GET", engine.IN_FLIGHT_PATH)
        except Unreachable:
            return None, None, engines
        count = engine.in_flight(text) if status == 200 else None
        if count is not None:
            return status, count, [engine]
    return status, None, engines


def running_at(docker):
    """``{seat: (bind address or None, port)}``: where each managed seat's running container
    publishes its one port now; {} when the engine cannot be asked (the plan's port is asked
    instead). A host's answer is data: only a port number and an address literal are kept."""
    try:
        records = host_containers(docker)
    except DockerError:
        return {}
    found = {}
    for record in records:
        ports = {(port["host_ip"], port["host_port"]) for port in record["ports"]}
        if record["seat"] and is_running(record) and len(ports) == 1:
            host_ip, port = ports.pop()
            if not 0 < port <= 65535:
                continue
            if host_ip:
                try:
                    host_ip = str(ipaddress.ip_address(host_ip))
                except ValueError:
                    continue   # not an address: the plan's is asked
            found[record["seat"]] = (host_ip or None, port)
    return found


def as_running(seat, where):
    """The seat to ask: at the address and port its container publishes now, when known."""
    if where is None:
        return seat
    bind, port = where
    return dict(seat, port=port, launch=dict(seat.get("launch") or {}, bind_address=bind))


def drain_words(drain):
    """The drain of a seat as the report's actions say it; None when there was nothing to wait for."""
    if drain is None or drain["outcome"] in (NOT_COUNTED, NOT_ANSWERING):
        return None
    if drain["outcome"] == UNREADABLE:
        return "its count of requests in flight could not be read (HTTP %s), not waited for" % drain["status"]
    if drain["outcome"] == COUNT_LOST:
        return "%d request(s) in flight at its last count, none read after, stopped anyway after %.1f s" % (
            drain["in_flight_left"], drain["waited_s"])
    if drain["outcome"] == TIMED_OUT:
        return "%d request(s) still in flight after %.1f s, stopped anyway" % (
            drain["in_flight_left"], drain["waited_s"])
    if drain["in_flight_at_start"]:
        return "drained %d request(s) in flight in %.1f s" % (drain["in_flight_at_start"], drain["waited_s"])
    return "nothing in flight"


# seat_drain's arguments: the seats as a plan has them, and how to reach them (as the gates do)
SEAT_DRAIN_SPEC = {
    "seats": {"type": "list", "elements": "dict", "required": True},
    "leaving": {"type": "list", "elements": "str", "default": []},
    "timeout": {"type": "float", "default": 30.0},
    "interval": {"type": "float", "default": 0.2},
}
SEAT_DRAIN_SPEC.update({key: SEAT_GATES_SPEC[key] for key in ("address", "api_key", "secrets", "docker_host")})


def _check_drain_input(params):
    for index, seat in enumerate(params["seats"]):
        name = seat.get("name") if isinstance(seat, dict) else None
        if not isinstance(name, str) or not name:
            raise GateInputError("seats[%d].name: expected a seat_plan plan's seat, got %r" % (index, seat))
        if seat.get("engine") not in ENGINES:
            raise GateInputError("seat %s: engine: expected one of %s, got %r"
                                 % (name, ", ".join(sorted(ENGINES)), seat.get("engine")))
        port = seat.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535:
            raise GateInputError("seat %s: port: expected a TCP port (1-65535), got %r" % (name, port))
    for name in params["leaving"]:
        if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
            raise GateInputError("leaving: expected seat names (%s), got %r" % (SEAT_NAME_EXPECTED, name))
    problem = seconds_problems(("timeout", params["timeout"], "stop at once"), ("interval", params["interval"]))
    if problem:
        raise GateInputError(problem)


def seat_drain(params, docker=None, check_mode=False):
    """The seat_drain module's result for its validated ``params``: every seat drained side by
    side (their deadlines run together), in the order given, then the seats leaving the host;
    each where ``docker`` says its container publishes its port now."""
    _check_drain_input(params)
    if check_mode:
        return {"changed": False, "drains": [], "actions": []}
    host = SeatHost(docker, params["address"], params["api_key"], secrets=params["secrets"])
    now = running_at(docker) if docker is not None else {}
    # a leaving seat is asked only where it runs: the plan no longer says where that is
    seats = list(params["seats"]) + [{"name": name} for name in params["leaving"] if name in now]
    drains, raised = [None] * len(seats), []

    def drain(index, seat):
        try:
            seat = as_running(seat, now.get(seat["name"]))
            drains[index] = wait_drained(seat, host.client(seat), params["timeout"], params["interval"])
        except Exception as exc:  # pylint: disable=broad-except  # raised again below, in the module's own thread
            raised.append(exc)

    threads = [threading.Thread(target=drain, args=pair, daemon=True) for pair in enumerate(seats)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if raised:
        raise raised[0]
    actions = ["before its stop: %s: %s" % (result["seat"], drain_words(result))
               for result in drains if drain_words(result)]
    actions += ["leaving: %s: no running container of it found publishing one port; not drained" % name
                for name in params["leaving"] if name not in now]
    return {"changed": False, "drains": drains, "actions": actions}
