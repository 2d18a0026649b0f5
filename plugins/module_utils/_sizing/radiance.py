# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A radiance seat's budget: radiance 1.8.1's funding formula and its pinned-RAM ledger.

radiance keeps an MoE model's experts on the card or in a pinned host pool, and gives its KV
cache what is left; there is no KV flag (1.8.1 refuses ``--vram-weights-mib`` and
``--vram-kv-mib``). Per card, in MiB::

    capacity     = card_total - already_held - drift - headroom - arena - step_staging
                   - hw_queues - prefetch
    elastic      = capacity - static_weights
    expert_floor = min(plane + spare, max(plane + 2 * unit_max - host_room, 0))
    host_room    = host_pool (less the file tier's staging when disk tiering is on)
    kv           = min(kv_cap, elastic - expert_floor)      kv_cap = max_num_seqs x max_model_len

``kv_cap`` is demand in tokens and the rest are bytes: tokens become bytes at the engine's KV
bytes per token on one card. The cache is cut into whole blocks, and the printed tokens are
blocks x block size. Cards differ (26.0 and 26.68 GiB on one host): the smallest card's
capacity is every card's budget.

The host pins ``tp x host_pool + PLE/n-gram table + prefix cache + statics and arena (~2,048)
+ checkpoint_slots x 111.98``; ``checkpoint_slots: auto`` is ``max_num_seqs x (1 + retained)``,
so one more sequence raises the ledger twice (its state and its checkpoints). The serve script
refuses to start below ``TTM_MIN_MIB``, and the preflight raises the kernel's limit to
``TTM_TARGET_MIB``: both must cover the ledger.
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB

ENGINE_RELEASE = "1.8.1"
# radiance 1.8.1's own figures, as its resize procedure gives them.
CHECKPOINT_SLOT_MIB = 111.98
STATICS_ARENA_MIB = 2048
GPU_HEADROOM_MIB = 96
BLOCK_SIZE = 16
# The procedure's steps: the host pool grows by 1,024 MiB a rung; 48 MiB is the first headroom
# measured decode-neutral.
HOST_POOL_STEP_MIB = 1024
HEADROOM_RUNG_MIB = 48
# 4 TiB of host pool added a rung at a time: the longest under-funded ladder worth printing.
HOST_POOL_RUNGS_MAX = 4096
# How far TTM_TARGET_MIB must clear the ledger.
TTM_SLACK_MIB = 1024

# The funding formula's terms, each in MiB a card unless the name says otherwise.
CARD_TERMS = ("already_held_mib", "drift_mib", "gpu_headroom_mib", "arena_mib", "step_staging_mib",
              "hw_queues_mib", "prefetch_mib")
MODEL_TERMS = ("static_weights_mib", "plane_mib", "spare_mib", "unit_max_mib")
FUNDING_TERMS = CARD_TERMS + MODEL_TERMS + ("host_pool_mib", "file_tier_staging_mib")
LEDGER_TERMS = ("ple_table_mib", "prefix_cache_mib", "statics_arena_mib")


class RadianceError(ValueError):
    """A funding input that is not one: ``field``, what was expected and what was given."""

    def __init__(self, field, expected, got):
        super().__init__("%s: expected %s, got %r" % (field, expected, got))
        self.field, self.expected, self.got = field, expected, got


# The largest plausible value of each input, checked before anything is computed from it: a
# size written in bytes where MiB were meant (or 10**18) is refused, not laddered 1 GiB a rung.
CARD_MAX_MIB = 1024 * 1024  # 1 TiB: more than any card holds
HOST_MAX_MIB = 64 * 1024 * 1024  # 64 TiB: more than any host holds
COUNT_MAX = {"max_num_seqs": 65536, "max_model_len": 2 ** 24, "kv_bytes_per_token": 2 ** 24, "block_size": 4096,
             "tp": 64, "retained": 1024, "checkpoint_slots": 2 ** 24, "target_tokens": 2 ** 40,
             "printed_experts_mib": HOST_MAX_MIB}


def term_maximum(field):
    """The largest value ``field`` may take: a card's MiB, a host's MiB, or a count's own bound."""
    if field in COUNT_MAX:
        return COUNT_MAX[field]
    return CARD_MAX_MIB if field in CARD_TERMS or field == "card_total_mib" else HOST_MAX_MIB


def _whole(field, value, minimum=0):
    maximum = term_maximum(field)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise RadianceError(field, "an integer from %d to %d%s" % (
            minimum, maximum, " (MiB: was it written in bytes?)" if field.endswith("_mib") else ""), value)
    return value


def plane_from_ledger(printed_experts_mib, host_pool_mib, unit_max_mib):
    """The expert plane from a live boot ledger: ``plane + 2 x unit ~ printed experts + host
    pool`` (what the card holds plus what the host holds)."""
    return printed_experts_mib + host_pool_mib - 2 * unit_max_mib


def checkpoint_slots(slots, max_num_seqs, retained):
    """``--checkpoint-slots``: a number, or ``auto`` = max_num_seqs x (1 + retained)."""
    if slots == "auto":
        return max_num_seqs * (1 + retained)
    return _whole("checkpoint_slots", slots)


def funding(terms):
    """The funding formula on ``terms`` (FUNDING_TERMS, ``card_total_mib``: one per card,
    ``max_num_seqs``, ``max_model_len``, ``kv_bytes_per_token``, ``block_size``)."""
    cards = terms.get("card_total_mib")
    if not isinstance(cards, list) or not cards:
        raise RadianceError("card_total_mib", "one total per card (a non-empty list of MiB)", cards)
    cards = [_whole("card_total_mib", card, 1) for card in cards]
    value = {field: _whole(field, terms.get(field, 0)) for field in FUNDING_TERMS}
    for field in ("max_num_seqs", "max_model_len", "kv_bytes_per_token"):
        value[field] = _whole(field, terms.get(field), 1)
    value["block_size"] = _whole("block_size", terms.get("block_size", BLOCK_SIZE), 1)
    smallest = min(cards)
    capacity = smallest - sum(value[field] for field in CARD_TERMS)
    elastic = capacity - value["static_weights_mib"]
    host_room = max(value["host_pool_mib"] - value["file_tier_staging_mib"], 0)
    plane = value["plane_mib"]
    expert_floor = min(plane + value["spare_mib"], max(plane + 2 * value["unit_max_mib"] - host_room, 0))
    demand_tokens = value["max_num_seqs"] * value["max_model_len"]
    per_token = value["kv_bytes_per_token"]
    supply_bytes = max(elastic - expert_floor, 0) * MIB
    demand_bytes = demand_tokens * per_token
    kv_bytes = min(demand_bytes, supply_bytes)
    blocks = kv_bytes // (value["block_size"] * per_token)
    tokens = blocks * value["block_size"]
    return {
        "card_total_mib": cards, "binding_card": cards.index(smallest),
        "capacity_mib": capacity, "elastic_mib": elastic, "expert_floor_mib": expert_floor,
        "kv_cap_tokens": demand_tokens, "kv_bytes": kv_bytes, "kv_mib": round(kv_bytes / MIB, 2),
        # what the engine allocates: whole blocks
        "vram_kv_bytes": blocks * value["block_size"] * per_token,
        "kv_blocks": blocks, "kv_tokens": tokens, "sessions": tokens // value["max_model_len"],
        "experts_mib": max(elastic - math.ceil(kv_bytes / MIB), expert_floor),
        "binding": "demand" if demand_bytes <= supply_bytes else "supply",
        "funded_fraction": round(tokens / demand_tokens, 4),
        "host_holds_plane": plane + 2 * value["unit_max_mib"] <= host_room,
    }


def _pinned(terms):
    """``(slots, checkpoint store MiB, total MiB, the sum in words)``: what the seat pins of the
    host (``terms``: ``tp``, ``host_pool_mib``, LEDGER_TERMS, ``checkpoint_slots``,
    ``max_num_seqs``, ``retained``)."""
    tp = _whole("tp", terms.get("tp", 1), 1)
    pool = _whole("host_pool_mib", terms.get("host_pool_mib", 0))
    value = {field: _whole(field, terms.get(field, STATICS_ARENA_MIB if field == "statics_arena_mib" else 0))
             for field in LEDGER_TERMS}
    slots = checkpoint_slots(terms.get("checkpoint_slots", "auto"), _whole("max_num_seqs", terms.get("max_num_seqs"), 1),
                             _whole("retained", terms.get("retained", 0)))
    store = round(slots * CHECKPOINT_SLOT_MIB, 2)
    parts = "%d x HOST_POOL_MIB %s + PLE table %s + PREFIX_CACHE_MIB %s + statics and arena %s + %d checkpoint " \
        "slots x %s = %s MiB" % (tp, _mib(pool), _mib(value["ple_table_mib"]), _mib(value["prefix_cache_mib"]),
                                 _mib(value["statics_arena_mib"]), slots, CHECKPOINT_SLOT_MIB, _mib(store))
    return slots, store, round(tp * pool + sum(value.values()) + store, 2), parts


def pin_ledger(terms):
    """The pinned host RAM the seat needs (``_pinned``), against TTM_MIN_MIB and TTM_TARGET_MIB
    (``terms`` also: ``ttm_min_mib``, ``ttm_target_mib``, ``ttm_slack_mib``)."""
    slots, store, total, parts = _pinned(terms)
    ttm_min = _whole("ttm_min_mib", terms.get("ttm_min_mib"))
    ttm_target = _whole("ttm_target_mib", terms.get("ttm_target_mib"))
    slack = _whole("ttm_slack_mib", terms.get("ttm_slack_mib", TTM_SLACK_MIB))
    error = None
    if ttm_min < total:
        error = "TTM_MIN_MIB %s is below the pinned-RAM ledger %s MiB (%s): the serve script would refuse to " \
                "start; raise TTM_MIN_MIB to at least %s with the pool or the slots" % (
                    _mib(ttm_min), _mib(total), parts, _mib(math.ceil(total)))
    elif ttm_target < total + slack:
        error = "TTM_TARGET_MIB %s does not clear the pinned-RAM ledger %s MiB by the slack of %s MiB (%s): raise " \
                "it to at least %s" % (_mib(ttm_target), _mib(total), _mib(slack), parts, _mib(math.ceil(total + slack)))
    return {"checkpoint_slots": slots, "checkpoint_store_mib": store, "pin_ledger_mib": total,
            "pin_ledger_parts": parts, "pin_ok": error is None, "pin_error": error}


def _mib(value):
    return "{:,}".format(value) if isinstance(value, int) or value != int(value) else "{:,}".format(int(value))


def knob_effects(terms):
    """What one step of each knob buys, from ``terms`` (funding's and pin_ledger's): the change
    in KV tokens, in demand and in the pinned-RAM ledger, and why."""
    base, ledger = funding(terms), pin_ledger(terms)
    effects = []

    def effect(knob, change, changed, why):
        after, after_ledger = funding(changed), pin_ledger(changed)
        effects.append({"knob": knob, "change": change,
                        "kv_tokens": after["kv_tokens"] - base["kv_tokens"],
                        "kv_cap_tokens": after["kv_cap_tokens"] - base["kv_cap_tokens"],
                        "pin_ledger_mib": round(after_ledger["pin_ledger_mib"] - ledger["pin_ledger_mib"], 2),
                        "why": why(after)})

    pool = dict(terms, host_pool_mib=terms.get("host_pool_mib", 0) + HOST_POOL_STEP_MIB)
    effect("HOST_POOL_MIB", "+%d" % HOST_POOL_STEP_MIB, pool, lambda after: (
        "the host already holds the whole expert plane: more host RAM buys nothing" if base["host_holds_plane"]
        else "demand binds: the cache already funds every sequence; the MiB return to the experts"
        if base["binding"] == "demand" else
        "lowers the expert floor by %s MiB; the cache takes it" % _mib(base["expert_floor_mib"] - after["expert_floor_mib"])))
    seqs = dict(terms, max_num_seqs=terms["max_num_seqs"] + 1)
    effect("MAX_SEQS", "+1", seqs, lambda after: (
        "raises demand by %s tokens and not capacity: the tokens stay put" % _mib(terms["max_model_len"])
        if base["binding"] == "supply" else "demand binds: one more sequence is funded while supply lasts")
        + ("; with checkpoint_slots auto the ledger grows by %s slots" % (1 + terms.get("retained", 0))
           if terms.get("checkpoint_slots", "auto") == "auto" else ""))
    headroom = terms.get("gpu_headroom_mib", GPU_HEADROOM_MIB)
    if headroom > HEADROOM_RUNG_MIB:
        lower = dict(terms, gpu_headroom_mib=HEADROOM_RUNG_MIB)
        effect("GPU_HEADROOM_MIB", "%d -> %d" % (headroom, HEADROOM_RUNG_MIB), lower, lambda after: (
            "the freed MiB go to the cache (48 MiB was measured decode-neutral)" if base["binding"] == "supply"
            else "demand binds: the freed MiB go to the experts"))
    return effects


def host_pool_rungs(terms, target_tokens, host_limit_mib=None):
    """The under-funded ladder: HOST_POOL_MIB raised 1,024 MiB a rung until ``target_tokens``
    are funded, the ledger would pass ``host_limit_mib`` (the host's RAM says no), or the host
    holds the whole plane (more buys nothing). Demand is never touched. Each rung:
    ``{host_pool_mib, kv_tokens, pin_ledger_mib, funded}``; the last says why it stopped
    (``stopped``: funded, host_ram, plane_on_host)."""
    rungs = []
    pool = _whole("host_pool_mib", terms.get("host_pool_mib", 0))
    # the ladder ends by the rung whose pool holds the whole plane: bounded before it is climbed
    top = _whole("plane_mib", terms.get("plane_mib", 0)) + 2 * _whole("unit_max_mib", terms.get("unit_max_mib", 0)) \
        + _whole("file_tier_staging_mib", terms.get("file_tier_staging_mib", 0))
    if (top - pool) // HOST_POOL_STEP_MIB + 1 > HOST_POOL_RUNGS_MAX:
        raise RadianceError("host_pool_mib", "a pool within %d rungs of %d MiB of holding the plane (%d MiB), "
                            "the most the ladder climbs" % (HOST_POOL_RUNGS_MAX, HOST_POOL_STEP_MIB, top), pool)
    while True:
        step = dict(terms, host_pool_mib=pool)
        sized, pinned = funding(step), _pinned(step)[2]
        if host_limit_mib is not None and pinned > host_limit_mib:
            if rungs:
                rungs[-1]["stopped"] = "host_ram"
            return rungs
        rung = {"host_pool_mib": pool, "kv_tokens": sized["kv_tokens"], "pin_ledger_mib": pinned,
                "funded": sized["kv_tokens"] >= target_tokens}
        rungs.append(rung)
        if rung["funded"]:
            rung["stopped"] = "funded"
            return rungs
        if sized["host_holds_plane"] or sized["binding"] == "demand":
            rung["stopped"] = "plane_on_host" if sized["host_holds_plane"] else "demand"
            return rungs
        pool += HOST_POOL_STEP_MIB


def radiance_budget(terms):
    """The radiance_budget module's and filter's result: funding's figures, the pinned-RAM
    ledger's, what a step of each knob buys, and with ``target_tokens`` the under-funded ladder.
    Without ``plane_mib``, the plane is derived from a live ledger's ``printed_experts_mib`` at
    the ledger's ``host_pool_mib``."""
    terms = {key: value for key, value in terms.items() if value is not None}
    if "plane_mib" not in terms:
        if "printed_experts_mib" not in terms:
            raise RadianceError("plane_mib", "the expert plane in MiB, or printed_experts_mib from a live ledger",
                                None)
        terms["plane_mib"] = plane_from_ledger(_whole("printed_experts_mib", terms["printed_experts_mib"]),
                                               _whole("host_pool_mib", terms.get("host_pool_mib", 0)),
                                               _whole("unit_max_mib", terms.get("unit_max_mib", 0)))
    result = dict(funding(terms), plane_mib=terms["plane_mib"])
    result.update(pin_ledger(terms))
    result["knob_effects"] = knob_effects(terms)
    target = terms.get("target_tokens")
    result["host_pool_rungs"] = host_pool_rungs(terms, _whole("target_tokens", target, 1), terms.get(
        "host_limit_mib")) if target is not None else []
    return result


# The radiance_budget module's arguments (its documentation: plugins/modules/radiance_budget.py).
RADIANCE_BUDGET_SPEC = {
    "card_total_mib": {"type": "list", "elements": "int", "required": True},
    "already_held_mib": {"type": "int", "default": 0},
    "drift_mib": {"type": "int", "default": 0},
    "gpu_headroom_mib": {"type": "int", "default": GPU_HEADROOM_MIB},
    "arena_mib": {"type": "int", "default": 0},
    "step_staging_mib": {"type": "int", "default": 0},
    "hw_queues_mib": {"type": "int", "default": 0},
    "prefetch_mib": {"type": "int", "default": 0},
    "static_weights_mib": {"type": "int", "required": True},
    "plane_mib": {"type": "int"},
    "printed_experts_mib": {"type": "int"},
    "spare_mib": {"type": "int", "default": 0},
    "unit_max_mib": {"type": "int", "default": 0},
    "host_pool_mib": {"type": "int", "required": True},
    "file_tier_staging_mib": {"type": "int", "default": 0},
    "max_num_seqs": {"type": "int", "required": True},
    "max_model_len": {"type": "int", "required": True},
    "kv_bytes_per_token": {"type": "int", "required": True, "no_log": False},
    "block_size": {"type": "int", "default": BLOCK_SIZE},
    "tp": {"type": "int", "default": 1},
    "ple_table_mib": {"type": "int", "default": 0},
    "prefix_cache_mib": {"type": "int", "default": 0},
    "statics_arena_mib": {"type": "int", "default": STATICS_ARENA_MIB},
    "checkpoint_slots": {"type": "raw", "default": "auto"},
    "retained": {"type": "int", "default": 0},
    "ttm_min_mib": {"type": "int", "required": True},
    "ttm_target_mib": {"type": "int", "required": True},
    "ttm_slack_mib": {"type": "int", "default": TTM_SLACK_MIB},
    "target_tokens": {"type": "int", "no_log": False},
    "host_limit_mib": {"type": "int"},
}
