# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The rebalance's gates: each compares a measured value with what the plan expects and says
both, so a failed gate reads as a sentence with numbers in it.

A gate is ``{"seat", "gate", "ok", "measured", "expected", "detail"}``. The functions here only
evaluate; reading the card, the container, the endpoints and the log is the module's job.
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.steps import seat_usage_mib
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import reserved_matches

MIB = 1024 ** 2


def gate(seat, name, ok, measured, expected, detail):
    return {"seat": seat, "gate": name, "ok": bool(ok), "measured": measured,
            "expected": expected, "detail": detail}


def _cards_by_uuid(cards):
    return {gpu["uuid"]: gpu for gpu in cards.get("gpus", [])}


def before_start(seat, cards, margin_mib):
    """Free memory on each of the seat's GPUs, counting what the seat itself holds now (it is
    recreated), must cover its footprint plus the margin; for vLLM it must also pass vLLM's own
    startup check, ``free >= ceil(total * util)`` in bytes."""
    gates = []
    by_uuid = _cards_by_uuid(cards)
    own = seat_usage_mib(cards, seat["name"])
    for uuid in seat["gpus"]:
        card = by_uuid.get(uuid)
        if card is None:
            gates.append(gate(seat["name"], "gpu_present", False, None, uuid,
                              "GPU %s is not on this host (the cards: %s)"
                              % (uuid, ", ".join(sorted(by_uuid)) or "none")))
            continue
        free = card["memory_free_mib"] + own.get(uuid, 0)
        need = seat["footprint_mib"] + margin_mib
        gates.append(gate(
            seat["name"], "free_mib_before_start", free >= need, free, need,
            "GPU %d has %s MiB free%s; the seat needs %s MiB (footprint %s + margin %s)"
            % (card["index"], "{:,}".format(free),
               " (with the %s MiB it holds now)" % "{:,}".format(own[uuid]) if own.get(uuid) else "",
               "{:,}".format(need), "{:,}".format(seat["footprint_mib"]),
               "{:,}".format(margin_mib))))
        if seat["engine"] == "vllm":
            util = seat["gpu_memory_utilization"]
            requested = math.ceil(card["memory_total_mib"] * MIB * util)
            free_bytes = free * MIB
            gates.append(gate(
                seat["name"], "vllm_startup_check", free_bytes >= requested, free_bytes, requested,
                "vLLM refuses to start when free memory (%.2f GiB) is less than "
                "ceil(total x %.2f) = %.2f GiB" % (free_bytes / 1024 ** 3, util,
                                                   requested / 1024 ** 3)))
    return gates


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


def health_gate(seat, status, waited_s, timeout_s):
    return gate(seat["name"], "health", status == 200, status, 200,
                "GET /health answered %s after %.0f s (timeout %d s)"
                % (status if status is not None else "nothing", waited_s, timeout_s))


def models_gate(seat, models):
    """/v1/models lists every served name with the planned max_model_len."""
    expected = {name: seat["max_model_len"] for name in seat["served_model_names"]}
    measured = {}
    for card in (models or {}).get("data", []):
        measured[card.get("id")] = card.get("max_model_len")
    missing = [name for name, length in expected.items() if measured.get(name) != length]
    return gate(seat["name"], "served_models", not missing, measured, expected,
                "/v1/models lists %s; expected %s" % (
                    ", ".join("%s (%s)" % (k, v) for k, v in sorted(measured.items())) or "nothing",
                    ", ".join("%s (%s)" % (k, v) for k, v in sorted(expected.items()))))


def _logged(value, sentence):
    """The sentence about a value the boot log gave, or why there is none."""
    return "the boot log has no such line" if value is None else sentence


def boot_log_gates(seat, boot):
    """The boot log's reserved KV and capacity line equal the plan; no OOM or fall-back."""
    name = seat["name"]
    planned = seat["kv_cache_memory_bytes"]
    gates = [
        gate(name, "kv_reserved", reserved_matches(planned, boot), boot.get("kv_cache_memory_bytes"),
             planned, "%s; the plan pins %s bytes" % (_logged(
                 boot.get("kv_cache_memory_bytes"), "the log's reserved KV line says %s GiB (%s bytes)"
                 % (boot.get("reserved_kv_gib"), boot.get("kv_cache_memory_bytes"))), planned)),
        gate(name, "kv_cache_tokens", boot.get("kv_cache_tokens") == seat["kv_cache_tokens"],
             boot.get("kv_cache_tokens"), seat["kv_cache_tokens"],
             "%s; the plan computed %s" % (_logged(
                 boot.get("kv_cache_tokens"), "the log's GPU KV cache size is %s tokens"
                 % _num(boot.get("kv_cache_tokens"))), _num(seat["kv_cache_tokens"]))),
        gate(name, "max_concurrency", boot.get("max_concurrency") == seat["max_concurrency"],
             boot.get("max_concurrency"), seat["max_concurrency"],
             "%s; the plan computed %sx" % (_logged(
                 boot.get("max_concurrency"), "the log's maximum concurrency is %sx at %s tokens"
                 % (boot.get("max_concurrency"), _num(boot.get("max_model_len")))),
                 seat["max_concurrency"])),
        gate(name, "no_oom", boot.get("oom_events", 0) == 0 and boot.get("autotuner_oom_fallbacks", 0) == 0,
             {"oom_events": boot.get("oom_events", 0),
              "autotuner_oom_fallbacks": boot.get("autotuner_oom_fallbacks", 0)},
             {"oom_events": 0, "autotuner_oom_fallbacks": 0},
             "%d OOM event(s) and %d FlashInfer autotuner OOM fall-back(s) in the boot log%s"
             % (boot.get("oom_events", 0), boot.get("autotuner_oom_fallbacks", 0),
                ": " + boot["errors"][0] if boot.get("errors") else "")),
    ]
    return gates


def runtime_probe_gate(seat, prompt_tokens, status, detail):
    return gate(seat["name"], "runtime_probe", status == 200, status, 200,
                "a %s-token request (max_model_len %s) answered %s%s"
                % (_num(prompt_tokens), _num(seat["max_model_len"]), status,
                   ": " + detail if detail else ""))


def memory_gates(plan_gpus, cards, gpu_uuids, margin_mib, tolerance_mib, phase):
    """Free memory on each GPU touched now: at least the margin, and at least the plan's spare at
    plateau less the tolerance. Right after a boot there must already be that much (seats only
    grow towards the plateau); a GPU below it means a footprint was under-counted (seed 001)."""
    gates = []
    by_uuid = _cards_by_uuid(cards)
    for planned in plan_gpus:
        if planned["uuid"] not in gpu_uuids:
            continue
        card = by_uuid.get(planned["uuid"])
        free = card["memory_free_mib"] if card else None
        floor = max(margin_mib, planned["spare_mib"] - tolerance_mib)
        gates.append(gate(
            "GPU %d" % planned["index"], "free_mib_%s" % phase, free is not None and free >= floor,
            free, floor, "GPU %d has %s MiB free %s; the plan's spare at plateau is %s MiB (less "
            "tolerance %s, at least the margin %s)"
            % (planned["index"], _num(free), "at plateau" if phase == "plateau" else "after boot",
               _num(planned["spare_mib"]), _num(tolerance_mib), _num(margin_mib))))
    return gates


def failed(gates):
    return [g for g in gates if not g["ok"]]


def summary(gates):
    """One line per failed gate, for the module's failure message."""
    return "; ".join("%s %s: %s" % (g["seat"], g["gate"], g["detail"]) for g in failed(gates))


def _num(value):
    return "?" if value is None else "{:,}".format(value)
