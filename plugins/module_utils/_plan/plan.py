# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A host's plan: every seat sized in bytes, its footprint counted, the seats placed.

inventory (GPUs, seats) + model configs + the cards (now, and at the plateau)
  -> seat spec in normal form (_seat_spec)
  -> KV budget per vLLM seat, exactly as vLLM 0.33 (_kv_sizing)
  -> footprint per seat per GPU, measured at the plateau where possible (_footprint)
  -> provably best placement for the worst spare at plateau, fewest moves (_placement)
  -> per GPU: seats, spare at plateau and at boot; per seat: KV tokens, concurrency, the util
     that gates its boot, and the render input for its files (_render)
"""

from __future__ import annotations

import math
import os

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import (
    DEFAULT_OVERHEAD_MIB,
    FootprintError,
    boot_gate_utilization,
    seat_footprint,
    weights_bytes_per_gpu,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import seat_mib
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import (
    KVSizingError,
    evaluate_kv_budget,
    size_kv_budget,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    ModelConfigError,
    load_model_config,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._placement import (
    PlacementError,
    place,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import normalize_host
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import human_bytes


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


def _kv(seat, config, options):
    common = {"seat": seat["name"], "kv_cache_dtype": seat["kv_cache_dtype"],
              "tensor_parallel_size": seat["tensor_parallel_size"], "block_size": seat["block_size"],
              "max_num_seqs": seat["max_num_seqs"],
              "max_num_batched_tokens": seat["max_num_batched_tokens"], "gpu": options["gpu_profile"]}
    if seat["kv_cache_memory_bytes"] is not None:
        result = evaluate_kv_budget(config, seat["max_model_len"], seat["kv_cache_memory_bytes"], **common)
        rule = "pinned %s" % human_bytes(seat["kv_cache_memory_bytes"])
    else:
        result = size_kv_budget(config, seat["max_model_len"], kv_factor=seat["kv_factor"],
                                kv_round_to=options["kv_round_to"], **common)
        rule = "%s %sx" % (seat["kv_rule"], seat["kv_factor"])
    if not result["boot_ok"]:
        raise KVSizingError("seat %s: vLLM would not boot with %s of KV: %s"
                            % (seat["name"], human_bytes(result["kv_cache_memory_bytes"]),
                               result["boot_error"]))
    return result, rule


def _config_path(seat, inventory_dir):
    path = seat["model_config"]
    return path if os.path.isabs(path) else os.path.join(inventory_dir or ".", path)


def _deploy(seat, gpus, kv, util):
    common = ("name", "engine", "image", "port", "container_name", "environment", "volumes",
              "command", "health_path", "health_interval", "health_start_period")
    deploy = {key: seat[key] for key in common}
    deploy["gpu_uuids"] = gpus
    if seat["engine"] == "fixed":
        deploy["container_port"] = seat["container_port"]
    else:
        deploy.update({key: seat[key] for key in (
            "model", "served_model_names", "tensor_parallel_size", "kv_cache_dtype",
            "tool_call_parser", "reasoning_parser", "default_chat_template_kwargs",
            "max_new_tokens", "max_num_seqs", "max_num_batched_tokens", "block_size",
            "extra_args")})
        deploy.update(max_model_len=kv["max_model_len"],
                      kv_cache_memory_bytes=kv["kv_cache_memory_bytes"],
                      gpu_memory_utilization=util)
    return deploy


def build_plan(host, gpus, seats, inventory_dir=None, cards=None, plateau=None, plateau_kv=None,
               plateau_kv_planned=False, seat_defaults=None, kv_factor=1.25, kv_round_to="0.5GiB",
               gpu_profile="h100", min_spare_mib=0, boot_margin_mib=512,
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

    errors, sized = [], {}
    for seat in spec["seats"]:
        try:
            kv, rule, weights = None, "fixed cap", None
            if seat["engine"] == "vllm":
                path = _config_path(seat, inventory_dir)
                kv, rule = _kv(seat, load_model_config(path, seat=seat["name"]), options)
                weights = weights_bytes_per_gpu(seat, path)
            kv_bytes = kv["kv_cache_memory_bytes"] if kv else 0
            ran_with = kv_bytes if plateau_kv_planned else (plateau_kv or {}).get(seat["name"])
            footprint = seat_footprint(seat, kv_bytes, weights, plateau, ran_with,
                                       default_overhead_mib)
            sized[seat["name"]] = (kv, rule, footprint)
        except (ModelConfigError, KVSizingError, FootprintError) as exc:
            errors.append(str(exc))
    if errors:
        raise PlanError("host %s: %d seat(s) cannot be sized:\n- %s"
                        % (host, len(errors), "\n- ".join(errors)))

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
            [{"name": seat["name"], "need_mib": sized[seat["name"]][2]["footprint_mib"],
              "gpu_count": seat["gpu_count"],
              "gpu": _one_or_list(seat["gpu"]), "avoid_gpus": seat["avoid_gpus"],
              "current_gpu": _one_or_list(seat["current_gpu"])} for seat in spec["seats"]],
            min_spare_mib=min_spare_mib)
    except PlacementError as exc:
        raise PlanError("host %s: %s" % (host, exc))
    return _assemble(host, spec, sized, memory, now, placed, boot_margin_mib)


def _one_or_list(uuids):
    if uuids is None:
        return None
    return uuids[0] if len(uuids) == 1 else uuids


def _assemble(host, spec, sized, memory, now, placed, boot_margin_mib):
    index = {gpu["uuid"]: gpu["index"] for gpu in spec["gpus"]}
    warnings, plan_seats = [], []
    for seat in spec["seats"]:
        kv, rule, footprint = sized[seat["name"]]
        assigned = placed["assignment"][seat["name"]]
        gpus = assigned if isinstance(assigned, list) else [assigned]
        total = min(memory[uuid]["total"] for uuid in gpus)
        util = boot_gate_utilization(footprint["footprint_mib"], boot_margin_mib, total) \
            if seat["engine"] == "vllm" else None
        entry = {
            "name": seat["name"], "engine": seat["engine"], "gpus": gpus,
            "gpu_indices": [index[uuid] for uuid in gpus],
            "current_gpus": seat["current_gpu"] or [],
            "moved": seat["name"] in placed["moves"],
            "container": seat["container_name"], "port": seat["port"],
            "health_path": seat["health_path"], "kv_rule": rule,
            "gpu_memory_utilization": util,
            "deploy": _deploy(seat, gpus, kv, util),
        }
        entry.update(footprint)
        if kv:
            entry.update({key: kv[key] for key in (
                "max_model_len", "kv_cache_memory_bytes", "kv_cache_tokens", "max_concurrency",
                "block_size", "num_blocks", "per_token_kv_bytes")})
            entry["served_model_names"] = seat["served_model_names"]
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
            if seat["engine"] != "vllm":
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
