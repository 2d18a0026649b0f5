# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Before a seat that serves is stopped: wait, bounded, until the requests it is working on reach
zero, so a long answer finishes rather than being cut off and asked again elsewhere.

A file-configured LiteLLM cannot be told to stop sending a seat requests (its per-deployment
block needs a database-backed proxy), so the gateway's side of a restart is its own failover: a
route with another deployment (a lower ``order`` tier or a ``fallbacks`` entry) and retries
sends a request the stopped seat refuses, or cuts off, to the other deployment. The wait here
keeps what is cut off to the requests that arrive in the last poll before the stop.
"""

from __future__ import annotations

import threading
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import SEAT_GATES_SPEC, GateInputError, SeatHost

DRAINED = "drained"              # nothing in flight when it was stopped
TIMED_OUT = "timed_out"          # requests still in flight at the deadline: stopped anyway
NOT_ANSWERING = "not_answering"  # nothing answers at the seat's address: nothing to wait for
NOT_COUNTED = "not_counted"      # its engine counts no requests in flight: stopped at once
UNREADABLE = "unreadable"        # something answers there, but not with the count: stopped at once
COUNT_LOST = "count_lost"        # counted, then the count could not be read until the deadline


def wait_drained(seat, client, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Wait until ``seat``'s engine, asked through ``client``, has no request in flight, at
    most ``timeout`` seconds; the outcome for the report."""
    path = engine_of(seat).IN_FLIGHT_PATH
    result = {"seat": seat["name"], "outcome": NOT_COUNTED, "in_flight_at_start": None,
              "in_flight_left": None, "waited_s": 0.0}
    if path is None or timeout <= 0:
        return result
    began = clock()
    while True:
        try:
            status, text = client.call("GET", path)
        except Unreachable:
            status, text = None, ""
        count = engine_of(seat).in_flight(text) if status == 200 else None
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
    "timeout": {"type": "float", "default": 30.0},
    "interval": {"type": "float", "default": 0.2},
}
SEAT_DRAIN_SPEC.update({key: SEAT_GATES_SPEC[key] for key in ("address", "api_key", "secrets")})


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
    if not params["timeout"] >= 0:
        raise GateInputError("timeout: expected seconds >= 0 (0: stop at once), got %r" % params["timeout"])
    if not params["interval"] > 0:
        raise GateInputError("interval: expected seconds > 0, got %r" % params["interval"])


def seat_drain(params, check_mode=False):
    """The seat_drain module's result for its validated ``params``: every seat drained side by
    side (their deadlines run together), in the order given."""
    _check_drain_input(params)
    if check_mode:
        return {"changed": False, "drains": [], "actions": []}
    host = SeatHost(None, params["address"], params["api_key"], secrets=params["secrets"])
    drains = [None] * len(params["seats"])

    def drain(index, seat):
        drains[index] = wait_drained(seat, host.client(seat), params["timeout"], params["interval"])

    threads = [threading.Thread(target=drain, args=pair, daemon=True) for pair in enumerate(params["seats"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    actions = ["before its stop: %s: %s" % (result["seat"], drain_words(result))
               for result in drains if drain_words(result)]
    return {"changed": False, "drains": drains, "actions": actions}
