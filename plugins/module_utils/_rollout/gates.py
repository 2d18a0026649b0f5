# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The rebalance's gates, and reading what they measure: each compares a measured value with
what the plan expects and says both, so a failed gate reads as a sentence with numbers in it
(``_common.gate``). Every seat's gates are here (free memory, container running, health), and
after a boot the engine's are composed here from what it declares (``MODELS_PATH``,
``LOG_GATE`` with ``log_gates``, ``probe_gates``); ``SeatHost`` reads the seat's container,
endpoints and log for them.
"""

from __future__ import annotations

import threading
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import seat_mib
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    HEALTH_INTERVAL_S,
    HEALTH_TIMEOUT_S,
    MARGIN_MIB,
    SPARE_GATE,
    TOLERANCE_MIB,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import CommandError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import failed, gate, num, summary, unreadable
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Client, Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of, own_api_key
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import runtime_of

PHASES = ("before_start", "after_boot", "after_boot_memory", "plateau")
# The phases whose every input is in the arguments: they read nothing from the host.
COMPUTED_PHASES = ("before_start", "after_boot_memory", "plateau")

SEAT_GATES_SPEC = {
    "phase": {"type": "str", "required": True, "choices": list(PHASES)},
    "seats": {"type": "list", "elements": "dict", "default": []},
    "cards": {"type": "dict"},
    "plan_gpus": {"type": "list", "elements": "dict", "default": []},
    "gpus": {"type": "list", "elements": "str", "default": []},
    "margin_mib": {"type": "int", "default": MARGIN_MIB},
    "tolerance_mib": {"type": "int", "default": TOLERANCE_MIB},
    "spare_gate": {"type": "bool", "default": SPARE_GATE},
    "health_timeout": {"type": "int", "default": HEALTH_TIMEOUT_S},
    "health_interval": {"type": "int", "default": HEALTH_INTERVAL_S},
    "runtime_probe": {"type": "bool", "default": False},
    "runtime_probe_fraction": {"type": "float", "default": 0.9},
    "address": {"type": "str", "default": "127.0.0.1"},
    "api_key": {"type": "str", "no_log": True},
    # {seat: {NAME: value}} as seat_files takes them: a seat's API key is among them
    "secrets": {"type": "dict", "no_log": True},
    "docker_host": {"type": "str"},
}
SEAT_GATES_REQUIRED_IF = [("phase", phase, ["cards"]) for phase in COMPUTED_PHASES]


class GateInputError(ValueError):
    """seats/cards/plan_gpus that are not a plan's and gpu_info's."""


def _cards_by_uuid(cards):
    return {gpu["uuid"]: gpu for gpu in cards.get("gpus", [])}


def before_start(seat, cards, margin_mib):
    """Free memory on each of the seat's GPUs, counting what the seat itself holds now (it is
    recreated), must cover its footprint plus the margin; and the engine's own checks (vLLM's
    startup check, ``free >= ceil(total * util)`` in bytes; the host memory a seat pins). A seat that
    keeps its own headroom (``KEEPS_OWN_HEADROOM``) is not asked for the margin."""
    gates = []
    by_uuid = _cards_by_uuid(cards)
    own = seat_mib(cards).get(seat["name"], {})
    for uuid in seat["gpus"]:
        card = by_uuid.get(uuid)
        if card is None:
            gates.append(gate(seat["name"], "gpu_present", False, None, uuid,
                              "GPU %s is not on this host (the cards: %s)"
                              % (uuid, ", ".join(sorted(by_uuid)) or "none")))
            continue
        free = card["memory_free_mib"] + own.get(uuid, 0)
        need = seat["footprint_mib"] + (0 if engine_of(seat).KEEPS_OWN_HEADROOM else margin_mib)
        margin = need - seat["footprint_mib"]
        gates.append(gate(
            seat["name"], "free_mib_before_start", free >= need, free, need,
            "GPU %d has %s MiB free%s; the seat needs %s MiB (footprint %s + margin %s)"
            % (card["index"], "{:,}".format(free),
               " (with the %s MiB it holds now)" % "{:,}".format(own[uuid]) if own.get(uuid) else "",
               "{:,}".format(need), "{:,}".format(seat["footprint_mib"]),
               "{:,}".format(margin) if margin else "0: its own headroom is the margin")))
        gates.extend(engine_of(seat).before_start_gates(seat, card, free))
    return gates + engine_of(seat).host_gates(seat, cards)


def container_gate(seat, inspect):
    """The container runs and has not restarted (``docker inspect``'s State)."""
    if inspect is None:
        return gate(seat["name"], "container_running", False, None, "running",
                    "no container named %s" % seat["container"])
    state = inspect.get("State", {})
    running = state.get("Running") and not state.get("Restarting")
    restarts = inspect.get("RestartCount", 0)
    return gate(seat["name"], "container_running", running and restarts == 0,
                {"status": state.get("Status"), "restarts": restarts, "exit_code": state.get("ExitCode")},
                {"status": "running", "restarts": 0},
                "container %s is %s after %d restart(s), last exit code %s"
                % (seat["container"], state.get("Status"), restarts, state.get("ExitCode")))


def rank_memory_gate(seat, cards):
    """A seat on several GPUs (one tensor-parallel rank each) holds memory on every one of
    them: a rank whose worker never came up holds none."""
    held = seat_mib(cards).get(seat["name"], {})
    index = {gpu["uuid"]: gpu["index"] for gpu in cards.get("gpus", [])}
    measured = {"GPU %s" % index.get(uuid, uuid): held.get(uuid, 0) for uuid in seat["gpus"]}
    missing = [gpu for gpu, mib in measured.items() if not mib]
    return gate(seat["name"], "memory_per_rank", not missing, measured, "memory held on each of its %d GPUs"
                % len(seat["gpus"]), "the seat holds %s%s" % (
                    ", ".join("%s MiB on %s" % (num(mib), gpu) for gpu, mib in measured.items()),
                    "; nothing on %s" % ", ".join(missing) if missing else ""))


def health_gate(seat, status, waited_s, timeout_s):
    return gate(seat["name"], "health", status == 200, status, 200,
                "GET /health answered %s after %.0f s (timeout %d s)"
                % (status if status is not None else "nothing", waited_s, timeout_s))


def memory_gates(plan_gpus, cards, gpu_uuids, margin_mib, tolerance_mib, phase, spare_gate=SPARE_GATE):
    """Free memory on each GPU touched now: at least the margin, and (with ``spare_gate``) at
    least the plan's spare at plateau less the tolerance. Right after a boot there must already be
    that much (seats only grow towards the plateau); a GPU below it means a footprint was
    under-counted. Without ``spare_gate`` (a ladder's rung, which measures the spare) the margin
    alone is gated."""
    gates = []
    by_uuid = _cards_by_uuid(cards)
    for planned in plan_gpus:
        if planned["uuid"] not in gpu_uuids:
            continue
        card = by_uuid.get(planned["uuid"])
        free = card["memory_free_mib"] if card else None
        margin = 0 if planned.get("own_headroom_seat") else margin_mib
        if spare_gate:
            floor = max(margin, planned["spare_mib"] - tolerance_mib)
            wanted = "(less tolerance %s, at least the margin %s)" % (num(tolerance_mib), num(margin))
        else:
            floor = margin
            wanted = "(not gated: at least the margin %s)" % num(margin)
        gates.append(gate(
            "GPU %d" % planned["index"], "free_mib_%s" % phase, free is not None and free >= floor,
            free, floor, "GPU %d has %s MiB free %s; the plan's spare at plateau is %s MiB %s"
            % (planned["index"], num(free), "at plateau" if phase == "plateau" else "after boot",
               num(planned["spare_mib"]), wanted)))
    return gates


# When the gateway's routes are checked: before the window, after it, and after its rollback.
SMOKE_PHASES = ("before", "after", "rolled_back")


def _smoke_results(results, what):
    if not isinstance(results, list) or not all(isinstance(item, dict) for item in results):
        raise GateInputError("smoke_gates: expected gateway_smoke's 'results' list%s" % what)
    return results


def smoke_gates(results, before=None, accepted=None, phase="after"):
    """gateway_smoke's per-route results as rebalance gates. ``phase="before"``: the baseline the
    window starts from (gate ``gateway_<check>_before``), a failing check passing only on a route
    in ``accepted`` (the operator's list of routes broken before the window). After the window
    (``after``) or its rollback (``rolled_back``, gate ``gateway_<check>_rolled_back``),
    ``before`` (the baseline's results) tells a check the window broke from one that was broken
    before on an accepted route, which passes as no worse than it was."""
    if phase not in SMOKE_PHASES:
        raise GateInputError("smoke_gates: phase: expected one of %s, got %r" % (", ".join(SMOKE_PHASES), phase))
    results = _smoke_results(results, "")
    accepted = set(accepted) if isinstance(accepted, list) else set()
    failed_before = {(item.get("model"), item.get("check")) for item in _smoke_results(before or [], " as before")
                     if not item.get("ok")}
    gates = []
    for item in results:
        key, ok, detail = (item.get("model"), item.get("check")), item.get("ok"), item.get("detail")
        if not ok and item.get("model") in accepted and (phase == "before" or key in failed_before):
            ok = True
            detail = "broken before the window too, accepted (seat_rebalance_gateway_broken_routes): %s" % detail
        elif not ok and phase != "before" and before is not None:
            detail = "%s before the window: %s" % ("broken" if key in failed_before else "passed", detail)
        gates.append(gate("route %s" % item.get("model"),
                          "gateway_%s%s" % (item.get("check"), "" if phase == "after" else "_" + phase), ok,
                          {"latency_s": item.get("latency_s"), "reasoning_key": item.get("reasoning_key")},
                          "ok", detail))
    return gates


class SeatHost:
    """The target's side of the gates: a seat's container (docker inspect), its endpoints at
    ``address`` and its log."""

    def __init__(self, docker, address="127.0.0.1", api_key=None, health_timeout=HEALTH_TIMEOUT_S,
                 health_interval=HEALTH_INTERVAL_S, runtime_probe=False, runtime_probe_fraction=0.9,
                 read_cards=None, secrets=None):
        self.docker = docker
        # {seat: {NAME: value}}: a seat's own API key (its engine's API_KEY_VARIABLE) is here
        self.secrets = secrets if isinstance(secrets, dict) else {}
        # gpu_info's reading now, for the free memory a gate reports (None: not read)
        self.read_cards = read_cards
        # set when a boot elsewhere on the host failed: waiting on this one is pointless
        self.abandon = threading.Event()
        self.address = address
        self.api_key = api_key
        self.health_timeout = health_timeout
        self.health_interval = health_interval
        self.runtime_probe = runtime_probe
        self.runtime_probe_fraction = runtime_probe_fraction

    def client(self, seat):
        """The seat at its bind address, where it is published on one; on all IPv4 interfaces, at
        ``address``; on all IPv6 ones, at ::1."""
        bound = (seat.get("launch") or {}).get("bind_address")
        address = {None: self.address, "0.0.0.0": self.address, "::": "::1"}.get(bound, bound)
        host = "[%s]" % address if ":" in address else address
        # asked with the seat's own API key as a Bearer token, else the one for every seat
        return Client("http://%s:%d" % (host, seat["port"]), self.seat_api_key(seat) or self.api_key, timeout=10)

    def seat_api_key(self, seat):
        """The key the seat's engine reads from its env file (vLLM's VLLM_API_KEY), or None."""
        return own_api_key(seat, self.secrets)

    def inspect(self, seat):
        return self.docker.inspect_one(seat["container"])

    def container_gate(self, seat):
        return container_gate(seat, self.inspect(seat))

    def free_mib(self, seat):
        """``{"GPU <index>": free MiB}`` on the seat's GPUs now, or None without a reader."""
        if self.read_cards is None:
            return None
        by_uuid = _cards_by_uuid(self.read_cards())
        return {"GPU %d" % by_uuid[uuid]["index"]: by_uuid[uuid]["memory_free_mib"]
                for uuid in seat["gpus"] if uuid in by_uuid}

    def log(self, seat):
        """The seat's log since its start, as its runtime keeps it (docker's, the journal)."""
        return runtime_of(seat).log(seat, self.docker)

    def wait_healthy(self, seat):
        """Poll the health path until 200, the timeout, or the container stops or restarts: with
        ``restart: always`` a seat that dies at boot comes back, and would die again. When the boot
        is abandoned, returns at once with no status."""
        client, path = self.client(seat), seat.get("health_path", "/health")
        started = time.time()
        while not self.abandon.is_set():
            try:
                status = client.call("GET", path)[0]
            except Unreachable:
                status = None
            waited = time.time() - started
            if status == 200 or waited >= self.health_timeout:
                return status, waited
            inspect = self.inspect(seat) or {}
            state = inspect.get("State", {})
            if not state.get("Running") or state.get("Restarting") or inspect.get("RestartCount"):
                return status, waited
            self.abandon.wait(min(self.health_interval, max(self.health_timeout - waited, 0.1)))
        return None, time.time() - started


def boot_gates(host, seat):
    """Every seat's gates after its boot, then its engine's; and the seconds its health took to
    answer 200 (None when it did not)."""
    status, waited = host.wait_healthy(seat)
    gates = [host.container_gate(seat), health_gate(seat, status, waited, host.health_timeout)]
    gates += engine_after_boot_gates(seat, host, status == 200)
    return gates, waited if status == 200 else None


def engine_after_boot_gates(seat, host, healthy):
    """The engine's gates after its boot, composed here from what it declares: the names it
    serves (MODELS_PATH, asked once healthy), its boot log (LOG_GATE, log_gates), and with
    ``host.runtime_probe`` its probe (probe_gates)."""
    engine, gates = engine_of(seat), []
    if healthy and engine.MODELS_PATH:
        try:
            status, models = host.client(seat).call_json("GET", engine.MODELS_PATH)
        except Unreachable:
            status, models = None, None
        gates.append(models_gate(seat, models if status == 200 else None))
    if engine.LOG_GATE:
        try:
            log = host.log(seat)
        except CommandError as exc:   # the runtime could not give it
            gates.append(unreadable(seat, engine.LOG_GATE, exc))
        else:
            gates.extend(engine.log_gates(seat, log))
    if healthy and host.runtime_probe:
        gates.extend(engine.probe_gates(seat, host))
    return gates


def models_gate(seat, models):
    """The server lists every served name with the planned max_model_len."""
    expected = {name: seat["max_model_len"] for name in seat["served_model_names"]}
    measured = {}
    for card in (models or {}).get("data", []):
        measured[card.get("id")] = card.get("max_model_len")
    missing = [name for name, length in expected.items() if measured.get(name) != length]
    return gate(seat["name"], "served_models", not missing, measured, expected,
                "/v1/models lists %s; expected %s" % (
                    ", ".join("%s (%s)" % (k, v) for k, v in sorted(measured.items())) or "nothing",
                    ", ".join("%s (%s)" % (k, v) for k, v in sorted(expected.items()))))


def after_boot(host, seat):
    """Every seat's gates after its boot, then its engine's."""
    return boot_gates(host, seat)[0]


def run_gates(phase, seats=(), cards=None, plan_gpus=(), gpus=(), margin_mib=MARGIN_MIB,
              tolerance_mib=TOLERANCE_MIB, host=None, spare_gate=SPARE_GATE):
    """The gates of one phase of a wave (seat_gates): ``(gates, message)``, where the message
    names every failed gate, or is None when all passed."""
    try:
        if phase == "before_start":
            gates = [g for seat in seats for g in before_start(seat, cards, margin_mib)]
        elif phase == "after_boot":
            gates = [g for seat in seats for g in after_boot(host, seat)]
        elif phase in ("after_boot_memory", "plateau"):
            gates = memory_gates(plan_gpus, cards, set(gpus), margin_mib, tolerance_mib,
                                 "plateau" if phase == "plateau" else "boot", spare_gate)
        else:
            raise GateInputError("phase: expected one of %s, got %r" % (", ".join(PHASES), phase))
    except (KeyError, TypeError) as exc:
        raise GateInputError("seats/cards/plan_gpus: expected seat_plan and gpu_info results, "
                             "missing or malformed %s" % exc) from None
    return gates, ("gate failed: %s" % summary(gates) if failed(gates) else None)


def seat_gates(params, host=None):
    """The seat_gates module's result for its validated ``params``: ``host`` (a SeatHost) reads
    the seats for O(phase=after_boot); the other phases need none."""
    gates, failure = run_gates(params["phase"], params["seats"], params["cards"], params["plan_gpus"],
                               params["gpus"], params["margin_mib"], params["tolerance_mib"], host,
                               params["spare_gate"])
    if failure:
        return {"changed": False, "failed": True, "msg": failure, "gates": gates}
    return {"changed": False, "gates": gates}
