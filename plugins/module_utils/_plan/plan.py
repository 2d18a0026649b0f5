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

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import seat_mib
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    GPU_PROFILE,
    KV_FACTOR,
    KV_ROUND_TO,
    MARGIN_MIB,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.seam import SizingError
from ansible_collections.llmfleet.seats.plugins.module_utils._placement import PlacementError, place
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import normalize_host
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import (
    DEFAULT_OVERHEAD_MIB,
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
}
# What the rendered files need of every seat, as the inventory declared it (an engine adds its
# own LAUNCH_FIELDS).
LAUNCH_FIELDS = ("image", "environment", "secret_environment", "volumes", "command", "health_interval",
                 "health_start_period")


class PlanError(ValueError):
    """A plan that cannot be made; the message names the host, the seat and the reason."""


def _card_memory(host, gpus, reading, names, what):
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
    held = seat_mib(reading.get("gpus", []))
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
    return {key: seat[key] for key in LAUNCH_FIELDS + engine.LAUNCH_FIELDS}


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


def size_seats(host, gpus, seats, inventory_dir=None, seat_defaults=None, kv_factor=KV_FACTOR,
               kv_round_to=KV_ROUND_TO, gpu_profile=GPU_PROFILE,
               default_overhead_mib=DEFAULT_OVERHEAD_MIB):
    """Every seat of a host sized by its engine as the plan sizes it, without placing it (what
    playbooks/kv-sizing.yml prints): ``{"seats": [...], "problems": [...]}``, each seat with its
    ``name``, ``engine``, ``kv_rule``, the planned numbers, its footprint with the default
    overhead, ``boot_ok`` and ``boot_error``."""
    spec = normalize_host(host, gpus, seats, kv_factor, seat_defaults)
    sized, problems = _size(spec, inventory_dir, {"gpu_profile": gpu_profile, "kv_round_to": kv_round_to})
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


def build_plan(host, gpus, seats, inventory_dir=None, cards=None, plateau=None, plateau_kv=None,
               plateau_kv_planned=False, seat_defaults=None, kv_factor=KV_FACTOR, kv_round_to=KV_ROUND_TO,
               gpu_profile=GPU_PROFILE, min_spare_mib=0, boot_margin_mib=MARGIN_MIB,
               default_overhead_mib=DEFAULT_OVERHEAD_MIB):
    """The plan of one host (see the module doc of llmfleet.seats.seat_plan for its keys).

    ``cards``: a gpu_info result read now; ``plateau``: one recorded at the plateau;
    ``plateau_kv``: seat -> the KV bytes it ran with when the plateau was recorded;
    ``plateau_kv_planned``: the plateau was recorded with the budgets this plan computes.
    """
    spec = normalize_host(host, gpus, seats, kv_factor, seat_defaults)
    names = {seat["name"] for seat in spec["seats"]}
    now = _card_memory(host, spec["gpus"], cards, names, "reading of the cards")
    at_plateau = _card_memory(host, spec["gpus"], plateau, names, "plateau snapshot")
    options = {"gpu_profile": gpu_profile, "kv_round_to": kv_round_to}

    sized, problems = _size(spec, inventory_dir, options)
    if problems:
        raise PlanError("host %s: %d seat(s) cannot be sized:\n- %s"
                        % (host, len(problems), "\n- ".join(problems)))
    footprints = {}
    for seat in spec["seats"]:
        engine, sizing = engine_of(seat), sized[seat["name"]]
        kv = engine.kv_bytes(sizing)
        ran_with = kv if plateau_kv_planned else (plateau_kv or {}).get(seat["name"])
        footprints[seat["name"]] = engine.footprint(seat, sizing, plateau, ran_with, default_overhead_mib)

    memory = {}
    for gpu in spec["gpus"]:
        card = at_plateau.get(gpu["uuid"]) or now.get(gpu["uuid"]) or {
            "total": gpu["memory_total_mib"], "reserved": 0, "not_ours": 0}
        memory[gpu["uuid"]] = card
    try:
        placed = place(
            [{"id": gpu["uuid"], "keep_clear": gpu["keep_clear"],
              "capacity_mib": memory[gpu["uuid"]]["total"] - memory[gpu["uuid"]]["reserved"]
              - memory[gpu["uuid"]]["not_ours"]} for gpu in spec["gpus"]],
            [{"name": seat["name"], "need_mib": footprints[seat["name"]]["footprint_mib"],
              "gpu_count": seat["gpu_count"],
              "gpu": _one_or_list(seat["gpu"]), "avoid_gpus": seat["avoid_gpus"],
              "current_gpu": _one_or_list(seat["current_gpu"])} for seat in spec["seats"]],
            min_spare_mib=min_spare_mib)
    except PlacementError as exc:
        raise PlanError("host %s: %s" % (host, exc))
    return _assemble(host, spec, sized, footprints, memory, now, placed, boot_margin_mib)


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
            "name": seat["name"], "engine": seat["engine"], "gpus": gpus,
            "gpu_indices": [index[uuid] for uuid in gpus],
            "current_gpus": seat["current_gpu"] or [],
            "moved": seat["name"] in placed["moves"],
            "container": seat["container_name"], "port": seat["port"],
            "health_path": seat["health_path"], "kv_rule": sizing["rule"],
            "gpu_memory_utilization": engine.boot_utilization(footprint["footprint_mib"],
                                                              boot_margin_mib, total),
            "launch": _launch(seat),
        }
        entry.update(footprint)
        entry.update(engine.planned(seat, sizing))
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
        "optimal": placed["optimal"], "warnings": warnings,
    }
