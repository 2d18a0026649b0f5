# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Booting a host's changed seats at the floor. Each GPU boots its seats one at a time, in the
order of the boot waves (largest footprint first), and the GPUs boot side by side: a seat starts
as soon as the seat before it on each of its GPUs has booted and passed its gates, not when a
whole wave has. So a window lasts about as long as its busiest GPU's boots one after another,
the floor, and no two seats ever co-boot on one card.

Every seat is gated before its start (free memory on its GPUs, read just then), after its boot
(container, health, the engine's own gates) and on its GPUs' free memory after. The first
failed gate abandons the boots still under way and starts no further seat; the rollback puts
the host back.
"""

from __future__ import annotations

import os
import threading
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.read import read_cards
from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import seconds_problems
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import SEAT_NAME_EXPECTED, SEAT_NAME_RE, SPARE_GATE
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import EXPECTED
from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import failed, gate, summary
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.drain import (
    as_running,
    drain_words,
    running_at,
    wait_drained,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import (
    SEAT_GATES_SPEC,
    GateInputError,
    SeatHost,
    before_start,
    boot_gates,
    memory_gates,
    rank_memory_gate,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import DEFAULT_RUNTIME, RUNTIMES, run_seat

# The cards a boot reads must be read now: a snapshot would gate on memory of another day.
LIVE_SOURCES = ("auto", "nvml", "nvidia-smi")

READY, FAILED, ABANDONED, NOT_STARTED = "ready", "failed", "abandoned", "not started"


def boot_after(waves, seats):
    """``{seat: [the seats it waits for]}``: on each of its GPUs, the seat booted last before it
    there, in wave order."""
    gpus_of = {seat["name"]: seat["gpus"] for seat in seats}
    last_on, after = {}, {}
    for wave in waves:
        for name in wave:
            after[name] = sorted({last_on[gpu] for gpu in gpus_of[name] if gpu in last_on})
        for name in wave:
            for gpu in gpus_of[name]:
                last_on[gpu] = name
    return after


def floor_s(boots):
    """The busiest GPU's boot seconds, one seat after another: no window that boots one seat at a
    time per GPU can be shorter."""
    per_gpu = {}
    for boot in boots:
        for gpu in boot["gpus"]:
            per_gpu[gpu] = per_gpu.get(gpu, 0.0) + (boot["boot_s"] or 0.0)
    return max(per_gpu.values(), default=0.0)


class Booter:
    """Boots the seats of ``waves``. ``start(seat)`` starts one and returns a problem or None,
    ``read_cards()`` is gpu_info's reading, ``host`` a gates.SeatHost whose ``abandon`` event
    this sets when a seat fails."""

    def __init__(self, seats, waves, start, read_cards, host, plan_gpus, margin_mib, tolerance_mib,
                 clock=time.monotonic, spare_gate=SPARE_GATE, drain=None):
        by_name = {seat["name"]: seat for seat in seats}
        self.order = [by_name[name] for wave in waves for name in wave]
        self.after = boot_after(waves, self.order)
        self.start, self.read_cards, self.host = start, read_cards, host
        # drain(seat): waits for what the seat serves now to finish, before its restart
        self.drain = drain
        self.plan_gpus, self.margin_mib, self.tolerance_mib = plan_gpus, margin_mib, tolerance_mib
        self.spare_gate = spare_gate
        self.clock = clock
        self.abandon = host.abandon
        self.booted = {seat["name"]: threading.Event() for seat in self.order}
        self.cards_lock = threading.Lock()
        self.gates = {seat["name"]: [] for seat in self.order}
        self.boots = {seat["name"]: {"seat": seat["name"], "gpus": seat["gpus"],
                                     "after": self.after[seat["name"]], "started_s": None,
                                     "boot_s": None, "outcome": NOT_STARTED, "drain": None}
                      for seat in self.order}
        self.problems = []
        self.bugs = []
        self.began = None

    def run(self):
        """``{gates, boots, actions, elapsed_s, floor_s, failed}``; ``failed`` names every failed
        gate, or is None."""
        self.began = self.clock()
        threads = [threading.Thread(target=self._boot, args=(seat,), daemon=True) for seat in self.order]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.bugs:
            raise self.bugs[0]
        elapsed = self.clock() - self.began
        gates = [g for seat in self.order for g in self.gates[seat["name"]]]
        boots = [self.boots[seat["name"]] for seat in self.order]
        message = None
        if failed(gates) or self.problems:
            message = "; ".join(self.problems + (["gate failed: %s" % summary(gates)] if failed(gates) else []))
        return {"gates": gates, "boots": boots, "actions": [_action(boot) for boot in boots],
                "elapsed_s": round(elapsed, 1), "floor_s": round(floor_s(boots), 1),
                "failed": message}

    def cards(self):
        """The cards read now (one reading at a time: the boots share the driver)."""
        with self.cards_lock:
            return self.read_cards()

    def _boot(self, seat):
        name = seat["name"]
        try:
            for before in self.after[name]:
                self.booted[before].wait()
            if not self.abandon.is_set():
                self._gated_boot(seat)
        except EXPECTED as exc:  # one line in the report, then the rollback
            self._problem(name, str(exc))
        except (KeyError, TypeError) as exc:  # a seat that is not a plan's, as run_gates says
            self._problem(name, "expected a seat_plan plan's seat, missing or malformed %s" % exc)
        except BaseException as exc:  # a bug: stop the others, then raise it where run() was called
            self.bugs.append(exc)
            self.abandon.set()
        finally:
            self.booted[name].set()

    def _problem(self, name, text):
        self.problems.append("seat %s: %s" % (name, text))
        self.boots[name]["outcome"] = FAILED
        self.abandon.set()

    def _gated_boot(self, seat):
        name = seat["name"]
        boot = self.boots[name]
        gates = before_start(seat, self.cards(), self.margin_mib)
        self.gates[name].extend(gates)
        if failed(gates):
            boot["outcome"] = FAILED
            self.abandon.set()
            return
        if self.drain is not None:
            boot["drain"] = self.drain(seat)
        started = self.clock()
        boot["started_s"] = round(started - self.began, 1)
        problem = self.start(seat)
        up = self.clock()
        if problem:
            self.gates[name].append(gate(name, "runtime_start", False, problem, "started",
                                         "the runtime could not start it: %s" % problem))
            boot["outcome"] = FAILED
            self.abandon.set()
            return
        gates, healthy_after = boot_gates(self.host, seat)
        if healthy_after is None and self.abandon.is_set():
            boot["outcome"] = ABANDONED  # another seat failed while this one booted
            return
        if healthy_after is not None:
            boot["boot_s"] = round(up - started + healthy_after, 1)
        cards = self.cards()
        if len(seat["gpus"]) > 1:
            gates.append(rank_memory_gate(seat, cards))
        gates += memory_gates(self.plan_gpus, cards, set(seat["gpus"]), self.margin_mib,
                              self.tolerance_mib, "boot", self.spare_gate)
        self.gates[name].extend(gates)
        boot["outcome"] = FAILED if failed(gates) else READY
        if failed(gates):
            self.abandon.set()


def _action(boot):
    drained = drain_words(boot.get("drain"))
    drained = " (restarted: %s)" % drained if drained else ""
    if boot["outcome"] == READY:
        return "booted: %s in %.1f s%s%s" % (boot["seat"], boot["boot_s"], (
            " (after %s)" % ", ".join(boot["after"]) if boot["after"] else ""), drained)
    if boot["outcome"] == ABANDONED:
        return "boot abandoned: %s (another seat failed while it booted)" % boot["seat"]
    if boot["outcome"] == NOT_STARTED:
        return "not started: %s (a seat before it failed)" % boot["seat"]
    if boot["started_s"] is None:
        return "not started: %s (its gate before the start failed)" % boot["seat"]
    return "boot failed: %s%s" % (boot["seat"], drained)


SEAT_BOOT_SPEC = {
    "seats": {"type": "list", "elements": "dict", "required": True},
    "waves": {"type": "list", "elements": "list", "required": True},
    "root": {"type": "path", "required": True},
    "runtimes": {"type": "dict", "default": {}},
    "gpu_source": {"type": "str", "default": "auto", "choices": list(LIVE_SOURCES)},
    "drain_timeout": {"type": "float", "default": 0.0},
    "drain_interval": {"type": "float", "default": 0.2},
}
SEAT_BOOT_SPEC.update({key: SEAT_GATES_SPEC[key] for key in (
    "plan_gpus", "margin_mib", "tolerance_mib", "spare_gate", "health_timeout", "health_interval", "runtime_probe",
    "runtime_probe_fraction", "address", "api_key", "secrets", "docker_host")})


def _check_input(seats, waves, runtimes):
    """Refuse, in one line, seats whose names could not name a project directory, waves that
    name other seats or one seat twice, and runtimes there are none of."""
    names = set()
    for index, seat in enumerate(seats):
        name = seat.get("name") if isinstance(seat, dict) else None
        if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
            raise GateInputError("seats[%d].name: expected %s, got %r" % (index, SEAT_NAME_EXPECTED, name))
        gpus = seat.get("gpus")
        if not isinstance(gpus, list) or not gpus or not all(isinstance(gpu, str) for gpu in gpus):
            raise GateInputError("seat %s: gpus: expected a list of GPU UUIDs, got %r" % (name, gpus))
        names.add(name)
    booted = set()
    for index, wave in enumerate(waves):
        for name in wave:
            if name not in names:
                raise GateInputError("waves[%d]: expected names of the seats given (%s), got %r"
                                     % (index, ", ".join(sorted(names)), name))
            if name in booted:
                raise GateInputError("waves[%d]: seat %s boots once, it is listed again" % (index, name))
            booted.add(name)
    for name, runtime in runtimes.items():
        if runtime not in RUNTIMES:
            raise GateInputError("runtimes: seat %s: expected one of %s, got %r"
                                 % (name, ", ".join(sorted(RUNTIMES)), runtime))


def _drainer(host, docker, timeout, interval):
    """drain(seat) for the Booter: the seat asked where its container publishes its port now
    (read once, before any seat restarts), so a seat moving to another port drains at its old one."""
    now = running_at(docker)

    def drain(seat):
        seat = as_running(seat, now.get(seat["name"]))
        return wait_drained(seat, host.client(seat), timeout, interval)
    return drain


def seat_boot(params, docker, check_mode=False):
    """The seat_boot module's result for its validated ``params``."""
    _check_input(params["seats"], params["waves"], params["runtimes"])
    problem = seconds_problems(("drain_timeout", params["drain_timeout"], "restart at once"),
                               ("drain_interval", params["drain_interval"]))
    if problem:
        raise GateInputError(problem)
    host = SeatHost(docker, params["address"], params["api_key"], params["health_timeout"],
                    params["health_interval"], params["runtime_probe"], params["runtime_probe_fraction"],
                    secrets=params["secrets"])
    booter = Booter(
        params["seats"], params["waves"],
        lambda seat: run_seat(params["runtimes"].get(seat["name"], DEFAULT_RUNTIME), "started",
                              os.path.join(params["root"], seat["name"]), docker)[1],
        lambda: read_cards(params["gpu_source"], docker_host=params["docker_host"]),
        host, params["plan_gpus"], params["margin_mib"], params["tolerance_mib"],
        spare_gate=params["spare_gate"],
        drain=_drainer(host, docker, params["drain_timeout"], params["drain_interval"])
        if params["drain_timeout"] > 0 and not check_mode else None)
    # the probe reports what the boot left free, read as the boots read the cards
    host.read_cards = booter.cards
    if check_mode:
        boots = [booter.boots[seat["name"]] for seat in booter.order]
        return {"changed": bool(boots), "gates": [], "boots": boots, "actions": [],
                "elapsed_s": 0.0, "floor_s": 0.0}
    result = booter.run()
    message = result.pop("failed")
    result["changed"] = any(boot["started_s"] is not None for boot in result["boots"])
    if message:
        result.update(failed=True, msg=message)
    return result
