# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A host's plan: every seat sized in bytes, its footprint counted, the seats placed.

inventory (GPUs, seats) + model configs + the cards (now, and at the plateau)
  -> seat spec in normal form (seat_spec)
  -> each seat sized by its engine: a vLLM seat's KV budget exactly as vLLM 0.33 (_sizing)
  -> footprint per seat per GPU, measured at the plateau where possible (_sizing.footprint)
  -> provably best placement for the worst spare at plateau, fewest moves (_placement)
  -> per GPU: seats, spare at plateau and at boot; per seat: each planned number once (KV
     tokens, concurrency, the util that gates its boot) and its launch inputs
"""

from __future__ import annotations

import math
import os

from ansible.module_utils.common.validation import check_type_float, check_type_int
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import ReadingError, check_reading, seat_mib
from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import Checker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    DEMAND_FACTOR,
    GPU_PROFILE,
    KV_FACTOR,
    KV_ROUND_TO,
    MARGIN_MIB,
    SEAT_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB, bytes_to_mib, human_bytes
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.fields import launch_fields
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.seam import SizingError
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import checked_running
from ansible_collections.llmfleet.seats.plugins.module_utils._placement import PlacementError, place
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.demand import DemandSnapshotError, read_demand
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import (
    SeatSpecError, gpus_as_far_as_valid, normalize_host)
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.variables import unknown_variables
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.card_profiles import profile_of_card
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import KV_FACTOR_MAX
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import (
    DEFAULT_OVERHEAD_MIB,
    RAN_FIELDS,
    FootprintError,
)

# The arguments seat_plan and seat_sizing share: a host's GPUs and seats, and the sizing rule
# (their docs: plugins/doc_fragments/_host_seats.py).
HOST_OPTIONS = {
    "host": {"type": "str", "required": True},
    "gpus": {"type": "list", "elements": "dict", "required": True},
    "seats": {"type": "list", "elements": "dict", "required": True},
    "seat_defaults": {"type": "dict"},
    "inventory_dir": {"type": "path"},
    "kv_factor": {"type": "float", "default": KV_FACTOR},
    "kv_round_to": {"type": "str", "default": KV_ROUND_TO},
    "gpu_profile": {"type": "str", "default": GPU_PROFILE},
    "demand_snapshot": {"type": "path"},
    "demand_factor": {"type": "float", "default": DEMAND_FACTOR},
    "demand_required": {"type": "bool", "default": True},
}
# What the rendered files need of every seat, as the inventory declared it (an engine adds the
# launch. rows of its PLAN_SEAT_FIELDS).
LAUNCH_FIELDS = ("image", "environment", "secret_environment", "volumes", "command", "health_interval",
                 "health_start_period", "restart", "bind_address", "networks")


class PlanError(ValueError):
    """A plan that cannot be made; the message names the host, the seat and the reason."""


def _card_memory(host, gpus, reading, names, what, containers=None):
    """Per GPU UUID from a gpu_info reading: total, reserved, and memory not ours (used less what
    the plan's seats hold)."""
    if not reading:
        return {}
    by_uuid = {gpu["uuid"]: gpu for gpu in reading.get("gpus", [])}
    missing = [gpu["uuid"] for gpu in gpus if gpu["uuid"] not in by_uuid]
    if missing:
        shown = ", ".join(sorted(by_uuid)) or "no GPU"
        raise PlanError("host %s: the %s has no GPU %s; it shows %s. Are the inventory's UUIDs "
                        "this host's (llmfleet_gpus)?" % (host, what, ", ".join(missing), shown))
    held = seat_mib(reading.get("gpus", []), containers=containers)
    memory = {}
    for gpu in gpus:
        card = by_uuid[gpu["uuid"]]
        ours = sum(held.get(name, {}).get(gpu["uuid"], 0) for name in names)
        memory[gpu["uuid"]] = {
            "total": card["memory_total_mib"],
            "reserved": card.get("memory_reserved_mib") or 0,
            "not_ours": max(card["memory_used_mib"] - ours, 0),
        }
    return memory


def _launch(seat):
    """The seat's launch inputs (what the runtime renders besides the planned numbers)."""
    engine = engine_of(seat)
    return {key: seat[key] for key in LAUNCH_FIELDS + launch_fields(engine.PLAN_SEAT_FIELDS)}


def _size(spec, inventory_dir, options):
    """``({seat: its engine's sizing}, [why a seat cannot be sized, in seat order])``."""
    sized, problems = {}, []
    for seat in spec["seats"]:
        engine = engine_of(seat)
        try:
            sized[seat["name"]] = engine.size(seat, inventory_dir, options)
        except (SizingError, FootprintError) as exc:
            problems.append(str(exc))
            continue
        problem = engine.boot_problem(seat, sized[seat["name"]])
        if problem:
            problems.append(problem)
    return sized, problems


def _demand_options(host, demand_snapshot, demand_factor, accept=None, demand_required=True):
    """The sizing options a demand snapshot gives (``demand``: seat -> figures, None without a
    snapshot; ``demand_factor``; ``demand_required``: whether a seat sized by demand without
    figures is refused, or sized by the rule as a calibration that is yet to measure it needs),
    or PlanError naming the variable."""
    check = Checker(host)
    # headroom over the measured peak: below 1 would size a seat under what it was asked for
    check.number("llmfleet_demand_factor", None, demand_factor, minimum=1, exclusive=False, maximum=KV_FACTOR_MAX)
    if check.errors:
        raise PlanError(check.errors[0])
    options = {"demand": None, "demand_factor": demand_factor, "demand_required": demand_required}
    if not demand_snapshot or not demand_required and not os.path.exists(demand_snapshot):
        return options
    try:
        options["demand"] = read_demand(demand_snapshot, host, (accept or {}).get("snapshot_host"))
    except DemandSnapshotError as exc:
        raise PlanError("host %s: %s" % (host, exc)) from None
    return options


def size_seats(host, gpus, seats, inventory_dir=None, seat_defaults=None, kv_factor=KV_FACTOR,
               kv_round_to=KV_ROUND_TO, gpu_profile=GPU_PROFILE,
               default_overhead_mib=DEFAULT_OVERHEAD_MIB, demand_snapshot=None, demand_factor=DEMAND_FACTOR,
               demand_required=True, snapshot_host=None):
    """Every seat of a host sized by its engine as the plan sizes it, without placing it (what
    playbooks/kv_sizing.yml prints): ``{"seats": [...], "problems": [...]}``, each seat with its
    ``name``, ``engine``, ``kv_rule``, the planned numbers, its footprint with the default
    overhead, ``boot_ok`` and ``boot_error``. ``snapshot_host``: the other host a demand
    snapshot may come from, as the plan's accept.snapshot_host."""
    spec = normalize_host(host, gpus, seats, kv_factor, seat_defaults)
    options = {"gpu_profile": gpu_profile, "kv_round_to": kv_round_to, "gpus": spec["gpus"]}
    options.update(_demand_options(host, demand_snapshot, demand_factor, {"snapshot_host": snapshot_host},
                                   demand_required))
    sized, problems = _size(spec, inventory_dir, options)
    out = []
    for seat in spec["seats"]:
        if seat["name"] not in sized:
            continue
        engine, sizing = engine_of(seat), sized[seat["name"]]
        problem = engine.boot_problem(seat, sizing)
        entry = {"name": seat["name"], "engine": seat["engine"], "kv_rule": sizing["rule"],
                 "boot_ok": problem is None, "boot_error": problem}
        entry.update(engine.planned(seat, sizing))
        entry.update(engine.footprint(seat, sizing, None, None, default_overhead_mib))
        out.append(entry)
    return {"seats": out, "problems": problems}


# The cross-checks an operator may pass on purpose, each by name (``accept``).
ACCEPT_KEYS = {
    "snapshot_host": "the host a snapshot given for this one was recorded on",
    "unknown_plateau_seats": "seats the plateau shows that the inventory no longer has",
    "fixed_cap_below_plateau": "fixed tenants whose cap is below what the plateau shows them holding",
    "gpu_profile": "a GPU profile other than the one the cards' names say",
}


def _check_options(check, gpus, accept, kv_round_to, **mib):
    """The plan's own options (the role's seat_plan_* variables); the ``accept`` to use."""
    for field, value in sorted(mib.items()):
        check.integer("seat_plan_%s" % field, None, value, 0)
    smallest = min((gpu["memory_total_mib"] or 0 for gpu in gpus), default=0)
    margin = mib["boot_margin_mib"]
    if isinstance(margin, int) and smallest and margin >= smallest:
        check.fail("seat_plan_boot_margin_mib", None, "less than the smallest GPU (%d MiB)" % smallest, margin)
    check.size("llmfleet_kv_round_to", None, kv_round_to, MIB)
    if not isinstance(accept, dict) or set(accept) - set(ACCEPT_KEYS):
        check.fail("llmfleet_plan_accept", None, "a dict with %s" % ", ".join(sorted(ACCEPT_KEYS)), accept)
        return {}
    for key in ("unknown_plateau_seats", "fixed_cap_below_plateau"):
        if key in accept:
            check.string_list("llmfleet_plan_accept", key, accept[key], SEAT_NAME_RE, "seat names")
    if "snapshot_host" in accept:
        check.text("llmfleet_plan_accept", "snapshot_host", accept["snapshot_host"])
    return accept


def _ran_records(check, spec, plateau, plateau_ran, plateau_kv):
    """``{seat: what it ran when the plateau was recorded}``: from its container in the
    snapshot, else the operator's ``plateau_ran`` record, else ``plateau_kv`` (its KV alone)."""
    records, processes = {}, {}
    for variable, value in (("llmfleet_plateau_ran", plateau_ran), ("seat_plan_plateau_kv", plateau_kv)):
        if value is not None and not isinstance(value, dict):
            check.problem(variable, "expected a dict of seat name: record", value)
            return records, processes
    for gpu in (plateau or {}).get("gpus") or []:
        for process in gpu.get("processes") or []:
            if process.get("seat"):
                processes.setdefault(process["seat"], process)
    for seat in spec["seats"]:
        name = seat["name"]
        if name in processes:
            records[name] = engine_of(seat).ran(processes[name])
            continue
        where = "llmfleet_plateau_ran.%s" % name
        given = (plateau_ran or {}).get(name)
        if given is not None:
            if not isinstance(given, dict) or set(given) - set(RAN_FIELDS) - {"kv_cache_memory_bytes"}:
                check.fail(where, None, "{kv_cache_memory_bytes, max_model_len, image, model}", given)
                continue
            record = dict(given)
            if "kv_cache_memory_bytes" in given:
                record["kv_cache_memory_bytes"] = check.size(where, "kv_cache_memory_bytes",
                                                             given["kv_cache_memory_bytes"], MIB)
            if "max_model_len" in given:
                check.positive_int(where, "max_model_len", given["max_model_len"])
            for field in ("image", "model"):
                if field in given:
                    check.text(where, field, given[field])
            records[name] = record
        elif (plateau_kv or {}).get(name) is not None:
            records[name] = {"kv_cache_memory_bytes": check.size(
                "seat_plan_plateau_kv", name, plateau_kv[name], MIB)}
    return records, processes


def _cross_checks(host, check, spec, cards, plateau, processes, retire, accept):
    """What the inventory, the cards and the snapshots must agree on; each disagreement names
    both values."""
    for what, reading in (("reading of the cards", cards), ("plateau snapshot", plateau)):
        if not reading:
            continue
        recorded_on = (reading.get("snapshot") or {}).get("host")
        if recorded_on and recorded_on != host and accept.get("snapshot_host") != recorded_on:
            check.problem("the %s" % what, "recorded on host %s, not %s (%s); expected a snapshot of "
                          "this host, or llmfleet_plan_accept.snapshot_host: %s to use it on purpose"
                          % (recorded_on, host, (reading.get("snapshot") or {}).get("path"), recorded_on))
        by_uuid = {gpu.get("uuid"): gpu for gpu in reading.get("gpus") or []}
        for position, gpu in enumerate(spec["gpus"]):
            card = by_uuid.get(gpu["uuid"])
            if card and card.get("memory_total_mib") != gpu["memory_total_mib"]:
                check.problem("llmfleet_gpus[%d]" % position, "memory_total_mib is %s in the inventory "
                              "but %s on the card (%s); expected the card's value"
                              % (gpu["memory_total_mib"], card.get("memory_total_mib"), what))
    listed = {seat["name"] for seat in spec["seats"]}
    replaced = {seat["replaces"] for seat in spec["seats"] if seat["replaces"]}
    for name in sorted(set(processes) - listed - set(retire) - replaced
                       - set(accept.get("unknown_plateau_seats") or [])):
        check.problem("the plateau snapshot", "it shows seat %s, which the inventory does not list (renamed? "
                      "its memory would be counted twice); expected a plateau of these seats, or "
                      "llmfleet_plan_accept.unknown_plateau_seats: [%s] to count it as another tenant's"
                      % (name, name))
    held = seat_mib(plateau.get("gpus", [])) if plateau else {}
    for position, seat in enumerate(spec["seats"]):
        if seat["engine"] != "fixed" or seat["name"] in (accept.get("fixed_cap_below_plateau") or []):
            continue
        most = max(held.get(seat["name"], {}).values(), default=0)
        if most > bytes_to_mib(seat["memory_cap_bytes"]):
            check.problem("seat %s: llmfleet_seats[%d]" % (seat["name"], position),
                          "memory_cap_bytes is %s MiB but the plateau snapshot shows the seat holding "
                          "%s MiB; expected a cap at least that, or llmfleet_plan_accept.fixed_cap_below_plateau: "
                          "[%s]" % (bytes_to_mib(seat["memory_cap_bytes"]), most, seat["name"]))


def _profile_check(check, spec, cards, gpu_profile, accept):
    """The GPU profile the seats are sized by is the cards' own (their names as the reading of
    the cards gives them, else as the inventory lists them), unless accepted on purpose."""
    named = {gpu.get("uuid"): gpu.get("name") for gpu in (cards or {}).get("gpus") or []}
    for gpu in spec["gpus"]:
        name = named.get(gpu["uuid"]) or gpu.get("name")
        profile = profile_of_card(name)
        if profile and profile != gpu_profile and accept.get("gpu_profile") != gpu_profile:
            check.problem("llmfleet_gpu_profile", "%s, but GPU %s is an %s, whose profile is %s; expected "
                          "llmfleet_gpu_profile: %s, or llmfleet_plan_accept.gpu_profile: %s to size by %s on "
                          "purpose" % (gpu_profile, gpu["index"], name, profile, profile, gpu_profile, gpu_profile))
            return


def inventory_problems(host, gpus, seats, seat_defaults=None, retire=None, kv_factor=KV_FACTOR,
                       kv_round_to=KV_ROUND_TO, min_spare_mib=0, boot_margin_mib=MARGIN_MIB,
                       default_overhead_mib=DEFAULT_OVERHEAD_MIB, plateau_ran=None, plateau_kv=None,
                       plateau_kv_planned=False, accept=None, variables=None, known_variables=(),
                       demand_factor=DEMAND_FACTOR):
    """Every problem of a host's inventory that needs neither the host nor its cards, as a list
    (empty when there is none): what the plan role refuses before it reads the host. Options
    are read as seat_plan's argument spec reads them (``-e`` gives strings). ``variables``: the
    names of the host's variables, each of the collection's prefixes checked against
    ``known_variables``."""
    check = Checker(host)
    unknown_variables(check, variables or (), known_variables)
    kv_factor = _as_number(kv_factor, check_type_float)
    check.number("llmfleet_demand_factor", None, _as_number(demand_factor, check_type_float), minimum=1,
                 exclusive=False, maximum=KV_FACTOR_MAX)
    min_spare_mib, boot_margin_mib, default_overhead_mib = (
        _as_number(value, check_type_int) for value in (min_spare_mib, boot_margin_mib, default_overhead_mib))
    try:
        spec = normalize_host(host, gpus, seats, kv_factor, seat_defaults, retire)
        seat_problems = []
    except SeatSpecError as exc:
        seat_problems = str(exc).split("\n- ")[1:]
        # the plan's options are checked all the same, so one run names every problem of the host
        spec = {"gpus": gpus_as_far_as_valid(gpus), "seats": [
            {"name": seat["name"]} for seat in seats if isinstance(seat, dict) and isinstance(seat.get("name"), str)
        ] if isinstance(seats, list) else []}
    named = len(check.errors)
    _check_plan_inputs(check, spec, None, plateau_ran, plateau_kv, plateau_kv_planned, accept, kv_round_to,
                       min_spare_mib=min_spare_mib, boot_margin_mib=boot_margin_mib,
                       default_overhead_mib=default_overhead_mib)
    return check.errors[:named] + seat_problems + check.errors[named:]


# What the plan shows of a seat's container as it runs now, beside the planned value.
NOW_FIELDS = ("max_model_len", "kv_cache_memory_bytes", "kv_cache_tokens", "max_concurrency")


def _as_number(value, convert):
    """``value`` converted as the module's argument spec converts it (``-e
    seat_plan_min_spare_mib=1024`` is text); what it cannot convert as it is, for the checks to
    refuse."""
    try:
        return convert(value)
    except (TypeError, ValueError, ArithmeticError):  # ArithmeticError: .inf as an integer
        return value


def _check_plan_inputs(check, spec, plateau, plateau_ran, plateau_kv, plateau_kv_planned, accept, kv_round_to,
                       **mib):
    """``(accept, records, processes)`` (``_ran_records``); the problems are in ``check``."""
    if boolean(plateau_kv_planned, strict=False):  # a filter gets -e's "false" as a string
        check.problem("seat_plan_plateau_kv_planned", "a plateau's measurement is only reused for what the "
                      "seat ran then, so this claim is not taken on trust (a changed pin would be "
                      "absorbed silently); expected false, with the snapshot's own record of each seat "
                      "(gpu_info records it) or llmfleet_plateau_ran")
    accept = _check_options(check, spec["gpus"], accept or {}, kv_round_to, **mib)
    records, processes = _ran_records(check, spec, plateau, plateau_ran, plateau_kv)
    return accept, records, processes


def build_plan(host, gpus, seats, inventory_dir=None, cards=None, plateau=None, plateau_kv=None,
               plateau_kv_planned=False, seat_defaults=None, kv_factor=KV_FACTOR, kv_round_to=KV_ROUND_TO,
               gpu_profile=GPU_PROFILE, min_spare_mib=0, boot_margin_mib=MARGIN_MIB,
               default_overhead_mib=DEFAULT_OVERHEAD_MIB, plateau_ran=None, accept=None, retire=None,
               demand_snapshot=None, demand_factor=DEMAND_FACTOR, demand_required=True):
    """The plan of one host (see the module doc of llmfleet.seats.seat_plan for its keys).

    ``cards``: a gpu_info result read now; ``plateau``: one recorded at the plateau;
    ``plateau_ran``: seat -> what it ran when the plateau was recorded (for snapshots that do
    not record it); ``plateau_kv``: seat -> the KV bytes it ran with then; ``accept``: the
    cross-checks passed on purpose (ACCEPT_KEYS); ``retire``: seats no longer listed;
    ``demand_snapshot``: what playbooks/calibrate.yml measured, for the seats sized by demand and
    the budget demand needs beside every seat's.
    """
    spec = normalize_host(host, gpus, seats, kv_factor, seat_defaults, retire)
    try:
        for reading, what in ((cards, "cards"), (plateau, "plateau")):
            if reading:
                check_reading(reading, what)
    except ReadingError as exc:
        raise PlanError("host %s: %s" % (host, exc)) from None
    check = Checker(host)
    accept, records, processes = _check_plan_inputs(
        check, spec, plateau, plateau_ran, plateau_kv, plateau_kv_planned, accept, kv_round_to,
        min_spare_mib=min_spare_mib, boot_margin_mib=boot_margin_mib, default_overhead_mib=default_overhead_mib)
    _cross_checks(host, check, spec, cards, plateau, processes, spec["retire"], accept)
    _profile_check(check, spec, cards, gpu_profile, accept)
    options = {"gpu_profile": gpu_profile, "kv_round_to": kv_round_to, "gpus": spec["gpus"]}
    options.update(_demand_options(host, demand_snapshot, demand_factor, accept, demand_required))
    # the seats that cannot be sized are named with the other problems, not after they are fixed
    sized, problems = _size(spec, inventory_dir, options)
    if check.errors or problems:
        raise PlanError("host %s: %d problem(s) before planning:\n- %s"
                        % (host, len(check.errors) + len(problems), "\n- ".join(check.errors + problems)))
    # what a retired or replaced seat holds is freed before anything boots: not another tenant's
    names = {seat["name"] for seat in spec["seats"]} | set(spec["retire"]) | {
        seat["replaces"] for seat in spec["seats"] if seat["replaces"]}
    # a container started with docker run is its seat's by the seat's container name
    containers = {seat["container_name"]: seat["name"] for seat in spec["seats"]}
    now = _card_memory(host, spec["gpus"], cards, names, "reading of the cards", containers)
    current_warnings = _current_from_cards(spec, cards)
    _hand_started_from_cards(spec, cards)
    at_plateau = _card_memory(host, spec["gpus"], plateau, names, "plateau snapshot", containers)

    problems, window_warnings = _window(spec, sized, cards)
    if problems:
        raise PlanError("host %s: %d seat(s) cannot change as asked in one window:\n- %s"
                        % (host, len(problems), "\n- ".join(problems)))
    footprints = {}
    for seat in spec["seats"]:
        engine, sizing = engine_of(seat), sized[seat["name"]]
        footprints[seat["name"]] = engine.footprint(seat, sizing, plateau, records.get(seat["name"]),
                                                    default_overhead_mib)

    memory = {}
    for gpu in spec["gpus"]:
        card = at_plateau.get(gpu["uuid"]) or now.get(gpu["uuid"]) or {
            "total": gpu["memory_total_mib"], "reserved": 0, "not_ours": 0}
        memory[gpu["uuid"]] = card
    owned = _owned_cards(host, spec, footprints, memory)
    try:
        placed = place(
            [{"id": gpu["uuid"], "keep_clear": gpu["keep_clear"],
              "capacity_mib": memory[gpu["uuid"]]["total"] - memory[gpu["uuid"]]["reserved"]
              - memory[gpu["uuid"]]["not_ours"]} for gpu in spec["gpus"] if gpu["uuid"] not in owned],
            [{"name": seat["name"], "need_mib": footprints[seat["name"]]["footprint_mib"],
              "gpu_count": seat["gpu_count"],
              "gpu": _one_or_list(seat["gpu"]),
              "avoid_gpus": [uuid for uuid in seat["avoid_gpus"] if uuid not in owned],
              # a seat on a card another now claims whole moves, wherever it goes
              "current_gpu": None if set(seat["current_gpu"] or []) & set(owned) else _one_or_list(seat["current_gpu"])}
             for seat in spec["seats"] if not engine_of(seat).KEEPS_OWN_HEADROOM],
            min_spare_mib=min_spare_mib)
    except PlacementError as exc:
        raise PlanError("host %s: %s" % (host, exc))
    for seat in spec["seats"]:
        if engine_of(seat).KEEPS_OWN_HEADROOM:
            placed["assignment"][seat["name"]] = _one_or_list(seat["gpu"])
    plan = _assemble(host, spec, sized, footprints, memory, now, placed, boot_margin_mib)
    plan["warnings"] = current_warnings + window_warnings + plan["warnings"]
    plan["retire"] = spec["retire"]
    if plateau and plateau.get("watch"):
        # how the cards settled after the window before, as playbooks/watch_plateau.yml saw it
        plan["last_watch"] = dict(plateau["watch"], snapshot=(plateau.get("snapshot") or {}).get("path"))
    return plan


def _current_from_cards(spec, cards):
    """Set each seat's ``current_gpu`` from what the cards show it holding (its container, the
    collection's or a hand-started compose service of its name), so moves are counted from the
    host, not from the inventory. A live reading that does not show a seat means it does not run
    (it boots; it does not move); a recorded snapshot that does not show it leaves the
    inventory's ``current_gpu``. Returns a warning for each seat the two disagree on."""
    if not cards:
        return []
    order = {gpu["uuid"]: gpu["index"] for gpu in spec["gpus"]}
    held = seat_mib(cards.get("gpus", []), containers={seat["container_name"]: seat["name"] for seat in spec["seats"]})
    live = cards.get("source") != "snapshot"
    warnings = []
    for seat in spec["seats"]:
        shown = sorted((uuid for uuid in held.get(seat["name"], {}) if uuid in order), key=order.get) or None
        written = seat["current_gpu"]
        if shown is None and not live:
            continue
        if written and set(written) != set(shown or []):
            warnings.append("seat %s: current_gpu says GPU %s, but the cards show it %s; moves are counted from "
                            "the cards" % (seat["name"], ", ".join(str(order[u]) for u in written),
                                           "on GPU %s" % ", ".join(str(order[u]) for u in shown) if shown
                                           else "running nowhere"))
        seat["current_gpu"] = shown
        seat["held_now_mib"] = sum(held.get(seat["name"], {}).values()) if shown else None
    return warnings


def _hand_started_from_cards(spec, cards):
    """Set ``running_now`` on each seat whose place a vLLM container started outside the
    collection holds (its compose service or its container name), to what that container runs:
    the numbers gpu_info read, checked again here (a snapshot is a file anyone may edit)."""
    containers = {seat["container_name"]: seat["name"] for seat in spec["seats"]}
    names = {seat["name"] for seat in spec["seats"]}
    found = {}
    for gpu in (cards or {}).get("gpus") or []:
        for process in gpu.get("processes") or []:
            if process.get("seat") or not process.get("running"):
                continue
            service = process.get("compose_service")
            name = service if service in names else containers.get(process.get("container"))
            if name:
                found.setdefault(name, checked_running(process["running"]))
    for seat in spec["seats"]:
        seat["running_now"] = found.get(seat["name"])


def _window(spec, sized, cards):
    """``(problems, warnings)`` of this window against what each seat runs now (its container
    in the reading of the cards, as its engine reads it)."""
    running = {}
    for gpu in (cards or {}).get("gpus") or []:
        for process in gpu.get("processes") or []:
            if process.get("seat"):
                running.setdefault(process["seat"], process)
    problems, warnings = [], []
    for seat in spec["seats"]:
        engine = engine_of(seat)
        record = engine.ran(running[seat["name"]]) if seat["name"] in running else None
        # what the seat runs now stays with its sizing: an engine may plan around it
        sized[seat["name"]]["running"] = record
        found, noted = engine.window_problems(seat, sized[seat["name"]], record)
        problems += found
        warnings += noted
    return problems, warnings


def _owned_cards(host, spec, footprints, memory):
    """``{GPU UUID: seat}``: the cards a seat that claims them whole (all but its own headroom)
    owns. They are out of the placement: no other seat may be pinned there, and each must hold
    the seat's footprint."""
    owned, problems = {}, []
    for seat in spec["seats"]:
        if not engine_of(seat).KEEPS_OWN_HEADROOM:
            continue
        for uuid in seat["gpu"]:
            card = memory[uuid]
            room = card["total"] - card["reserved"] - card["not_ours"]
            if uuid in owned:
                problems.append("seats %s and %s both claim GPU %s whole" % (owned[uuid], seat["name"], uuid))
            elif room < footprints[seat["name"]]["footprint_mib"]:
                problems.append("seat %s claims %s MiB of GPU %s but %s MiB are free of other tenants" % (
                    seat["name"], "{:,}".format(footprints[seat["name"]]["footprint_mib"]), uuid, "{:,}".format(room)))
            owned[uuid] = seat["name"]
    for seat in spec["seats"]:
        if engine_of(seat).KEEPS_OWN_HEADROOM:
            continue
        taken = [uuid for uuid in seat["gpu"] or [] if uuid in owned]
        if taken:
            problems.append("seat %s is pinned to GPU %s, which seat %s claims whole (all but its own "
                            "headroom); expected another GPU" % (seat["name"], taken[0], owned[taken[0]]))
    if problems:
        raise PlanError("host %s: %s" % (host, "; ".join(problems)))
    return owned


def _one_or_list(uuids):
    if uuids is None:
        return None
    return uuids[0] if len(uuids) == 1 else uuids


def _assemble(host, spec, sized, footprints, memory, now, placed, boot_margin_mib):
    index = {gpu["uuid"]: gpu["index"] for gpu in spec["gpus"]}
    warnings, plan_seats = [], []
    for seat in spec["seats"]:
        engine = engine_of(seat)
        sizing, footprint = sized[seat["name"]], footprints[seat["name"]]
        assigned = placed["assignment"][seat["name"]]
        gpus = assigned if isinstance(assigned, list) else [assigned]
        total = min(memory[uuid]["total"] for uuid in gpus)
        entry = {
            "name": seat["name"], "engine": seat["engine"], "runtime": seat["runtime"], "gpus": gpus,
            "gpu_indices": [index[uuid] for uuid in gpus],
            "current_gpus": seat["current_gpu"] or [],
            "moved": seat["name"] in placed["moves"],
            "container": seat["container_name"], "port": seat["port"], "take_over": seat["take_over"],
            "replaces": seat["replaces"],
            "health_path": seat["health_path"], "kv_rule": sizing["rule"],
            "gpu_memory_utilization": engine.boot_utilization(footprint["footprint_mib"],
                                                              boot_margin_mib, total),
            "launch": _launch(seat),
            # every size the inventory wrote, as written and in GiB: 22GB is 20.49 GiB
            "declared_sizes": {field: "%s = %s" % (written, human_bytes(seat[field], "GiB"))
                               for field, written in sorted(seat["declared_sizes"].items())},
        }
        entry.update(footprint)
        entry.update(engine.planned(seat, sizing))
        # as it runs now, beside the plan: what the cards show it holding, what its container ran
        # (the collection's own command, else the numbers read from a hand-started container)
        running = sizing.get("running") or seat.get("running_now") or {}
        entry["now"] = {"gpus": seat["current_gpu"] or [], "held_mib": seat.get("held_now_mib")}
        entry["now"].update({field: running.get(field) for field in NOW_FIELDS})
        plan_seats.append(entry)

    plan_gpus = []
    for gpu in spec["gpus"]:
        mine = [s for s in plan_seats if gpu["uuid"] in s["gpus"]]
        card = memory[gpu["uuid"]]
        capacity = card["total"] - card["reserved"] - card["not_ours"]
        footprint = sum(s["footprint_mib"] for s in mine)
        not_ours_now = now.get(gpu["uuid"], card)["not_ours"]
        spare_at_boot = card["total"] - card["reserved"] - not_ours_now \
            - sum(s["boot_footprint_mib"] for s in mine)
        plan_gpus.append({
            "index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"],
            "keep_clear": gpu["keep_clear"], "total_mib": card["total"],
            "background_mib": card["reserved"] + card["not_ours"], "capacity_mib": capacity,
            "seats": [s["name"] for s in mine], "footprint_mib": footprint,
            "spare_mib": capacity - footprint, "spare_at_boot_mib": spare_at_boot,
            # a seat that leaves only its own headroom free: the margin is not asked for here
            "own_headroom_seat": next((s["name"] for s in mine if engine_of(s).KEEPS_OWN_HEADROOM), None),
        })
        for seat in mine:
            if seat["gpu_memory_utilization"] is None:
                continue
            # The seat that boots last on this GPU sees its neighbours at plateau at worst.
            free_when_booting = capacity - footprint + seat["footprint_mib"]
            requested = math.ceil(card["total"] * seat["gpu_memory_utilization"])
            if free_when_booting < requested:
                warnings.append(
                    "seat %s on GPU %d: with its neighbours at plateau only %s MiB are free when "
                    "it boots, below the %s MiB its gpu_memory_utilization %.2f asks vLLM's "
                    "startup check for; boot it before its neighbours settle, or free memory"
                    % (seat["name"], gpu["index"], "{:,}".format(free_when_booting),
                       "{:,}".format(int(requested)), seat["gpu_memory_utilization"]))
    return {
        "host": host, "gpus": plan_gpus, "seats": plan_seats,
        "worst_spare_mib": placed["worst_spare_mib"], "moves": placed["moves"],
        "optimal": placed["optimal"], "bound_mib": placed["bound_mib"], "warnings": warnings,
    }
