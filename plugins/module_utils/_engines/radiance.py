# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The radiance engine (1.8.1): an MoE server that keeps experts on its cards or in a pinned
host pool and gives the KV cache what is left (``_sizing.radiance``).

A seat is sized by its env file's knobs (``GPU_HEADROOM_MIB``, ``HOST_POOL_MIB`` per rank,
``MAX_SEQS`` x ``MAX_MODEL_LEN`` as demand, ``PREFIX_CACHE_MIB``, ``PLACEMENT``,
``CHECKPOINT_SLOTS``, ``TTM_MIN_MIB``, ``TTM_TARGET_MIB``) and its model's profile (the terms a
boot ledger prints: static weights, the expert plane, KV bytes per token...). It takes whole
cards, so it names its GPUs. The plan refuses a ledger ``TTM_MIN_MIB`` does not cover, and a
window that moves the KV pool and the expert placement at once; after boot the ledger it prints
must be the plan's, ``vram_kv`` byte for byte on every card.
"""

from __future__ import annotations

import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import load_json
from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import gate, num, unreadable
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB, human_bytes
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.argv import flag_value
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.radiance_log import (
    RadianceLogError,
    parse_ledger,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.seam import SizingError
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import MODEL_RE, SERVED_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.radiance import (
    CARD_TERMS,
    ENGINE_RELEASE,
    GPU_HEADROOM_MIB,
    LEDGER_TERMS,
    MODEL_TERMS,
    RadianceError,
    funding,
    host_pool_rungs,
    knob_effects,
    pin_ledger,
    plane_from_ledger,
    term_maximum,
)

NAME = "radiance"
FIELDS = frozenset({
    "model", "model_profile", "tensor_parallel_size", "served_model_names", "max_num_seqs", "max_model_len",
    "gpu_headroom_mib", "host_pool_mib", "prefix_cache_mib", "placement", "checkpoint_slots",
    "ttm_min_mib", "ttm_target_mib", "target_tokens"})
SIZE_FIELDS = ()
HOST_IPC = True
# It claims its cards but GPU_HEADROOM_MIB: that headroom, not the operator's margin, stays free.
KEEPS_OWN_HEADROOM = True
# The serve script exits non-zero on every fault.
EXITS_CLEAN_ON_FAULT = False
# Its server lists what it serves as vLLM's does; its boot log is the ledger.
MODELS_PATH = "/v1/models"
LOG_GATE = "boot_ledger"
# The env file's variables, in its order, and the seat fields they hold.
ENV_KNOBS = (("GPU_HEADROOM_MIB", "gpu_headroom_mib"), ("HOST_POOL_MIB", "host_pool_mib"),
             ("MAX_SEQS", "max_num_seqs"), ("MAX_MODEL_LEN", "max_model_len"),
             ("PREFIX_CACHE_MIB", "prefix_cache_mib"), ("PLACEMENT", "placement"),
             ("CHECKPOINT_SLOTS", "checkpoint_slots"), ("TTM_MIN_MIB", "ttm_min_mib"),
             ("TTM_TARGET_MIB", "ttm_target_mib"))
# Its plan seat's fields (_engines.fields): every knob of the env file (placement and checkpoint
# slots, which take words too, are checked by check_plan_seat), then what its serve script needs.
PLAN_SEAT_FIELDS = tuple((field, "count", None) for _var, field in ENV_KNOBS
                         if field not in ("placement", "checkpoint_slots")) + (
    ("launch.model", "text", None),
    ("launch.served_model_names", "texts", None),
    ("launch.tensor_parallel_size", "positive or null", None),
)
# The knobs that move the KV pool; PLACEMENT moves the experts. One of the two a window.
POOL_KNOBS = ("gpu_headroom_mib", "host_pool_mib", "max_num_seqs", "max_model_len", "prefix_cache_mib")
# What the serve script reads from its environment rather than its flags.
SERVE_ENV = ("TTM_MIN_MIB", "TTM_TARGET_MIB")
# The model profile's terms: the card's and the model's, less the seat's own knob.
PROFILE_TERMS = tuple(term for term in CARD_TERMS if term != "gpu_headroom_mib") + MODEL_TERMS + LEDGER_TERMS + (
    "file_tier_staging_mib", "kv_bytes_per_token", "block_size", "checkpoint_retained",
    "printed_experts_mib", "printed_host_pool_mib")
_PROFILE_REQUIRED = ("static_weights_mib", "kv_bytes_per_token")
_PLACEMENT_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.,:=+-]*\Z")
PLANNED_FIELDS = ("capacity_mib", "elastic_mib", "expert_floor_mib", "experts_mib", "kv_cap_tokens", "kv_bytes",
                  "vram_kv_bytes", "kv_blocks", "kv_tokens", "sessions", "binding", "funded_fraction",
                  "binding_card", "card_total_mib", "host_holds_plane")
LEDGER_FIELDS = ("checkpoint_slots", "checkpoint_store_mib", "pin_ledger_mib", "pin_ledger_parts", "pin_ok",
                 "pin_error")


# -- the inventory --------------------------------------------------------------------------------
def gpu_count(check, where, raw):
    return check.positive_int(where, "tensor_parallel_size", raw.get("tensor_parallel_size", 1)) or 1


def container_name(name):
    return "radiance-%s" % name


def normalize(check, where, raw, seat, defaults):
    seat["model"] = check.text(where, "model", raw.get("model"), MODEL_RE, "the model's path in the image")
    seat["model_profile"] = check.text(where, "model_profile", raw.get("model_profile"), None,
                                       "the model's radiance profile (a JSON file of its ledger terms)")
    seat["tensor_parallel_size"] = seat["gpu_count"]
    if raw.get("gpu") is None:
        check.fail(where, "gpu", "the seat's cards (a radiance seat takes whole cards: name them)", None)
    served = raw.get("served_model_names", [seat["name"]] if seat["name"] else ["seat"])
    seat["served_model_names"] = check.string_list(where, "served_model_names", served or None, SERVED_NAME_RE,
                                                   "model names (letters, digits, ._:/@+-)") or [seat["name"]]
    # each knob within its plausible range (term_maximum): a size in bytes is refused here
    for field in ("max_num_seqs", "max_model_len", "host_pool_mib", "ttm_min_mib", "ttm_target_mib"):
        seat[field] = check.positive_int(where, field, raw.get(field), term_maximum(field))
    seat["gpu_headroom_mib"] = check.integer(where, "gpu_headroom_mib", raw.get("gpu_headroom_mib", GPU_HEADROOM_MIB), 0,
                                             term_maximum("gpu_headroom_mib"))
    seat["prefix_cache_mib"] = check.integer(where, "prefix_cache_mib", raw.get("prefix_cache_mib", 0), 0,
                                             term_maximum("prefix_cache_mib"))
    seat["placement"] = check.text(where, "placement", raw.get("placement", "auto"), _PLACEMENT_RE,
                                   "radiance's expert placement (auto, or its placement spec)")
    slots = raw.get("checkpoint_slots", "auto")
    seat["checkpoint_slots"] = slots if slots == "auto" else check.integer(
        where, "checkpoint_slots", slots, 0, term_maximum("checkpoint_slots"))
    seat["target_tokens"] = check.positive_int(where, "target_tokens", raw["target_tokens"], term_maximum("target_tokens")) \
        if raw.get("target_tokens") is not None else None


# -- sizing ---------------------------------------------------------------------------------------
def _profile(seat, inventory_dir):
    path = seat["model_profile"]
    path = path if os.path.isabs(path) else os.path.join(inventory_dir or ".", path)
    where = "seat %s: model_profile %s" % (seat["name"], path)
    try:
        profile = load_json(path)
    except (OSError, ValueError) as exc:
        raise SizingError("%s: cannot be read as JSON (%s)" % (where, getattr(exc, "strerror", None) or exc)) from None
    if not isinstance(profile, dict):
        raise SizingError("%s: expected an object of ledger terms, got %r" % (where, profile))
    unknown = sorted(set(profile) - set(PROFILE_TERMS), key=str)
    missing = [term for term in _PROFILE_REQUIRED if term not in profile]
    # every term is a count (MiB, bytes, tokens, checkpoints)
    wrong = sorted(term for term, value in profile.items() if term in PROFILE_TERMS and (
        isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _profile_maximum(term)))
    if unknown or missing or wrong:
        raise SizingError("%s: %s" % (where, "; ".join(
            ["%s: expected one of %s (unknown term)" % (term, ", ".join(PROFILE_TERMS)) for term in unknown]
            + ["%s: expected a value (required)" % term for term in missing]
            + ["%s: expected an integer from 0 to %d, got %r" % (term, _profile_maximum(term), profile[term])
               for term in wrong])))
    if "plane_mib" not in profile:
        if "printed_experts_mib" not in profile or "printed_host_pool_mib" not in profile:
            raise SizingError("%s: plane_mib: expected the expert plane, or printed_experts_mib and "
                              "printed_host_pool_mib from a live ledger" % where)
        profile["plane_mib"] = plane_from_ledger(profile["printed_experts_mib"], profile["printed_host_pool_mib"],
                                                 profile.get("unit_max_mib", 0))
    # the retention policy's checkpoints per sequence (checkpoint_slots: auto)
    profile["retained"] = profile.pop("checkpoint_retained", 0)
    return {term: value for term, value in profile.items() if not term.startswith("printed_")}


def _profile_maximum(term):
    return term_maximum("retained" if term == "checkpoint_retained" else term)


def terms(seat, profile, card_totals):
    """The funding formula's and the ledger's inputs for the seat."""
    values = dict(profile)
    values.update({field: seat[field] for field in ("gpu_headroom_mib", "host_pool_mib", "max_num_seqs",
                                                    "max_model_len", "prefix_cache_mib", "checkpoint_slots",
                                                    "ttm_min_mib", "ttm_target_mib")})
    values.update(card_total_mib=card_totals, tp=seat["tensor_parallel_size"])
    return values


def size(seat, inventory_dir, options):
    """The funding formula and the ledger on the seat's cards (``options["gpus"]``: the host's
    GPUs in normal form)."""
    totals = {gpu["uuid"]: gpu["memory_total_mib"] for gpu in options.get("gpus") or []}
    try:
        inputs = terms(seat, _profile(seat, inventory_dir), [totals[uuid] for uuid in seat["gpu"]])
        budget, ledger = funding(inputs), pin_ledger(inputs)
        effects = knob_effects(inputs)
        rungs = host_pool_rungs(inputs, seat["target_tokens"]) if seat["target_tokens"] else []
    except RadianceError as exc:
        raise SizingError("seat %s: model_profile or the seat's knobs: %s" % (seat["name"], exc)) from None
    return {"kv": None, "rule": "radiance %s funding formula" % ENGINE_RELEASE, "weights_bytes": None,
            "terms": inputs, "budget": budget, "ledger": ledger, "knob_effects": effects, "host_pool_rungs": rungs}


def boot_problem(seat, sized):
    """The ledger TTM_MIN_MIB and TTM_TARGET_MIB must cover; a card with no room for the cache."""
    if not sized["ledger"]["pin_ok"]:
        return "seat %s: the pinned-RAM ledger: %s" % (seat["name"], sized["ledger"]["pin_error"])
    budget = sized["budget"]
    if budget["kv_blocks"] < 1:
        return "seat %s: the card leaves the cache nothing: elastic %s MiB less the expert floor %s MiB; raise " \
               "host_pool_mib (fewer resident experts) or lower gpu_headroom_mib" % (
                   seat["name"], num(budget["elastic_mib"]), num(budget["expert_floor_mib"]))
    return None


def footprint(seat, sized, plateau, record, default_overhead_mib):
    """The engine claims the smallest card's budget on every card (its context, buffers, weights,
    experts and cache): only the headroom stays free, and the drift grows in after boot."""
    budget, inputs = sized["budget"], sized["terms"]
    claimed = min(budget["card_total_mib"]) - inputs["gpu_headroom_mib"]
    return {"weights_mib": inputs["static_weights_mib"], "kv_mib": -(-budget["kv_bytes"] // MIB), "overhead_mib": None,
            "overhead_source": "radiance ledger", "footprint_mib": claimed,
            "boot_footprint_mib": claimed - inputs.get("drift_mib", 0)}


def ran(process):
    """The knobs the seat's running container was started with (from its arguments)."""
    args = process.get("args") or []
    record = {"image": process.get("image")}
    for flag, field in _FLAG_FIELDS:
        value = flag_value(args, flag)
        if value is None:
            return None
        record[field] = value if field == "placement" else _int_or(value)
    return record


def _int_or(value):
    try:
        return int(value)
    except ValueError:
        return value


def boot_utilization(footprint_mib, margin_mib, total_mib):
    return None


def planned(seat, sized):
    fields = {key: sized["budget"][key] for key in PLANNED_FIELDS}
    fields.update({key: sized["ledger"][key] for key in LEDGER_FIELDS})
    fields.update({field: seat[field] for _var, field in ENV_KNOBS})
    fields["running_pin_ledger_mib"] = _running_ledger(seat, sized)
    fields.update(knob_effects=sized["knob_effects"], host_pool_rungs=sized["host_pool_rungs"],
                  target_tokens=seat["target_tokens"], served_model_names=seat["served_model_names"],
                  radiance_release=ENGINE_RELEASE)
    return fields


def _running(seat, sized):
    """The seat as it runs now (its knobs from ``ran``'s record), or None."""
    running = sized.get("running")
    if not running:
        return None
    return dict(seat, **{field: running[field] for _var, field in ENV_KNOBS if field in running})


def _running_ledger(seat, sized):
    """What the running seat pins now (0 when it does not run): the host gets it back when the
    seat is recreated."""
    now = _running(seat, sized)
    if now is None:
        return 0
    try:
        return pin_ledger(terms(now, sized["terms"], sized["terms"]["card_total_mib"]))["pin_ledger_mib"]
    except RadianceError:
        return 0


def window_problems(seat, sized, running):
    """``(problems, warnings)`` of this window against what the seat runs now (``ran``'s
    record, or None): the KV pool and the expert placement never move together; a smaller pool
    preempts live sequences."""
    if not running:
        return [], []
    moved = [field for field in POOL_KNOBS if running.get(field) != seat[field]]
    problems, warnings = [], []
    if moved and running.get("placement") != seat["placement"]:
        problems.append(
            "seat %s: this window changes the KV pool (%s) and the expert placement (%s -> %s) at once: the "
            "ledger's experts and kv cache lines move together and neither change can be attributed; "
            "deploy one, then the other" % (seat["name"], ", ".join(
                "%s %s -> %s" % (var, running.get(field), seat[field]) for var, field in ENV_KNOBS if field in moved),
                running.get("placement"), seat["placement"]))
    if moved:
        try:
            before = funding(terms(_running(seat, sized), sized["terms"], sized["terms"]["card_total_mib"]))
        except RadianceError:
            before = None
        if before and before["vram_kv_bytes"] > sized["budget"]["vram_kv_bytes"]:
            warnings.append("seat %s: the KV pool shrinks from %s to %s a card: live sequences are preempted "
                            "(vllm:num_preemptions_total jumps); deploy at low traffic" % (
                                seat["name"], human_bytes(before["vram_kv_bytes"]),
                                human_bytes(sized["budget"]["vram_kv_bytes"])))
    return problems, warnings


# -- launch ---------------------------------------------------------------------------------------
def check_plan_seat(seat, fail):
    """The knobs that take words, the model and its names as the serve script reads them, and one
    GPU per tensor-parallel rank (each field's kind is PLAN_SEAT_FIELDS')."""
    if not isinstance(seat.get("placement"), str) or not _PLACEMENT_RE.match(seat["placement"]):
        fail("placement", "radiance's expert placement", seat.get("placement"))
    slots = seat.get("checkpoint_slots")
    if slots != "auto" and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 0):
        fail("checkpoint_slots", "an integer from 0 up, or auto", slots)
    launch = seat["launch"]
    if not MODEL_RE.match(launch["model"]):
        fail("launch.model", "the model's path in the image", launch["model"])
    names = launch.get("served_model_names") or []
    if not all(SERVED_NAME_RE.match(n) for n in names):
        fail("launch.served_model_names", "a list of model names", names)
    tp = launch.get("tensor_parallel_size") or 1
    if tp != len(seat["gpus"]):
        fail("gpus", "one GPU per tensor-parallel rank (%s)" % tp, seat["gpus"])


def environment(seat):
    """The env file's knobs, under the names the endpoint's own env file gives them."""
    return [(var, str(seat[field])) for var, field in ENV_KNOBS]


def container_environment(seat, var):
    """What the serve script reads from its environment: its TTM gate."""
    return [(name, var(name)) for name in SERVE_ENV]


_FLAG_FIELDS = (("--max-num-seqs", "max_num_seqs"), ("--max-model-len", "max_model_len"),
                ("--gpu-headroom-mib", "gpu_headroom_mib"), ("--host-pool-mib", "host_pool_mib"),
                ("--prefix-cache-mib", "prefix_cache_mib"), ("--placement", "placement"),
                ("--checkpoint-slots", "checkpoint_slots"))
_FLAG_VARS = dict((field, var) for var, field in ENV_KNOBS)


def command(seat, var):
    """``radiance serve``'s arguments: the model, its port and ranks, and every knob by its
    variable (there is no KV flag: the budget resolver sizes the cache)."""
    launch = seat["launch"]
    args = [launch["model"], "--port", var("SEAT_PORT"), "--tensor-parallel-size",
            str(launch.get("tensor_parallel_size", 1)), "--served-model-name"]
    args += list(launch.get("served_model_names") or [seat["name"]])
    for flag, field in _FLAG_FIELDS:
        args += [flag, var(_FLAG_VARS[field])]
    return args


def listen_port(seat, var):
    return var("SEAT_PORT")


# -- gates ----------------------------------------------------------------------------------------
def host_gates(seat, cards):
    """The host's RAM must hold the new ledger before anything boots: MemAvailable, with what
    the seat pins now given back, covers it, and the host has the TTM_TARGET_MIB the preflight
    raises the limit to (gpu_info's ``host_memory``)."""
    memory = (cards or {}).get("host_memory")
    name, ledger = seat["name"], seat["pin_ledger_mib"]
    if not memory:
        return [gate(name, "host_pinnable_mib", False, None, ledger,
                     "the reading of the cards has no host memory (gpu_info reads /proc/meminfo): the "
                     "pinned-RAM ledger of %s MiB cannot be checked" % num(ledger))]
    own = seat.get("running_pin_ledger_mib") or 0
    available = memory["available_mib"] + own
    return [gate(name, "host_pinnable_mib", available >= ledger and memory["total_mib"] >= seat["ttm_target_mib"],
                 {"available_mib": available, "total_mib": memory["total_mib"]},
                 {"pin_ledger_mib": ledger, "ttm_target_mib": seat["ttm_target_mib"]},
                 "the host has %s MiB available%s of %s MiB; the seat pins %s MiB and its preflight raises the "
                 "TTM limit to %s MiB" % (
                     num(available), " (with the %s MiB the seat pins now)" % num(own) if own else "",
                     num(memory["total_mib"]), num(ledger), num(seat["ttm_target_mib"])))]


def ledger_gates(seat, ledger):
    """The printed boot ledger is the plan's: the budget's terms, ``vram_kv`` byte for byte on
    every card, the tokens and sessions, the pinned-RAM ledger; and what the mover may re-borrow."""
    name = seat["name"]
    gates = []
    for field, line in (("capacity_mib", "claimable"), ("elastic_mib", "elastic"),
                        ("expert_floor_mib", "expert floor")):
        gates.append(gate(name, "ledger_%s" % field, ledger.get(field) == seat[field], ledger.get(field),
                          seat[field], "the ledger's %s is %s MiB; the plan computed %s MiB" % (
                              line, num(ledger.get(field)), num(seat[field]))))
    cards = ledger.get("pools") or {}
    wrong = {card: kv for card, kv in cards.items() if kv != seat["vram_kv_bytes"]}
    missing = ["[%d]" % rank for rank in range(len(seat["gpus"])) if rank not in cards]
    gates.append(gate(name, "vram_kv", not wrong and not missing and bool(cards),
                      {"[%d]" % card: kv for card, kv in sorted(cards.items())}, seat["vram_kv_bytes"],
                      "%d of %d cards' pools lines hold the plan's vram_kv of %s bytes%s" % (
                          len(cards) - len(wrong), len(seat["gpus"]), num(seat["vram_kv_bytes"]),
                          "; not %s: the knob lost to another claim" % ", ".join(
                              ["[%d] (%s bytes)" % (card, num(kv)) for card, kv in sorted(wrong.items())]
                              + ["%s (no line)" % card for card in missing]) if wrong or missing else "")))
    gates.append(gate(name, "kv_tokens", ledger.get("kv_tokens") == seat["kv_tokens"]
                      and ledger.get("sessions") == seat["sessions"],
                      {"tokens": ledger.get("kv_tokens"), "sessions": ledger.get("sessions")},
                      {"tokens": seat["kv_tokens"], "sessions": seat["sessions"]},
                      "the ledger's kv line says %s tokens of context, %s sessions at %s; the plan computed %s "
                      "and %s" % (num(ledger.get("kv_tokens")), ledger.get("sessions"),
                                  num(ledger.get("session_tokens")), num(seat["kv_tokens"]), seat["sessions"])))
    gates.append(gate(name, "pin_ledger", ledger.get("pin_ledger_mib") == seat["pin_ledger_mib"],
                      ledger.get("pin_ledger_mib"), seat["pin_ledger_mib"],
                      "the engine pinned %s MiB of host RAM; the plan's ledger is %s MiB" % (
                          num(ledger.get("pin_ledger_mib")), num(seat["pin_ledger_mib"]))))
    lent = ledger.get("mover_lent_slots")
    gates.append(gate(name, "mover", True, {"lendable_slots": ledger.get("mover_slots"), "lent_slots": lent,
                                            "lent_mib": ledger.get("mover_lent_mib")}, "reported",
                      "mover: %s slots can be lent out of the activation arena; %s" % (
                          ledger.get("mover_slots"), "the expert slab re-borrowed %s slots (%s MiB) so far: "
                          "that steal is the decode cost of the resize" % (lent, num(ledger.get("mover_lent_mib")))
                          if lent else "nothing re-borrowed yet")))
    return gates


def _ask(seat, host, tokens):
    """A chat request whose prompt is ``tokens`` long: ``(status, detail)``."""
    body = {"model": seat["served_model_names"][0], "max_tokens": PROBE_REPLY_TOKENS,
            "messages": [{"role": "user", "content": "hello " * tokens}]}
    try:
        status, reply = host.client(seat).call_json("POST", "/v1/chat/completions", body, timeout=host.health_timeout)
    except Unreachable as exc:
        return None, exc.detail
    return status, "" if status == 200 else str(reply)[:300]


# The probe's reply, counted in the request's tokens.
PROBE_REPLY_TOKENS = 16


def probe_gates(seat, host):
    """The cache holds what the plan says and no more: a request filling
    ``runtime_probe_fraction`` of one request's depth (max_model_len, or the cache's tokens when
    fewer) is answered, and one a token past it is refused by the engine."""
    depth = min(seat["max_model_len"], seat["kv_tokens"])
    inside = int(depth * host.runtime_probe_fraction) - PROBE_REPLY_TOKENS
    status, detail = _ask(seat, host, inside)
    past_status, past_detail = _ask(seat, host, depth)
    return [
        gate(seat["name"], "runtime_probe", status == 200, {"status": status}, {"status": 200},
             "a %s-token request (a depth of %s: %s) answered %s%s" % (
                 num(inside), num(depth), "max_model_len" if depth == seat["max_model_len"] else "the cache's tokens",
                 status, ": " + detail if detail else "")),
        gate(seat["name"], "probe_refusal", past_status == 400, {"status": past_status}, {"status": 400},
             "a request past the depth of %s answered %s%s" % (
                 num(depth), past_status, ": " + past_detail if past_detail and past_status != 400 else "")),
    ]


def log_gates(seat, log):
    """The boot ledger against the plan, or its unreadable gate when the log holds none."""
    try:
        return ledger_gates(seat, parse_ledger(log))
    except RadianceLogError as exc:
        return [unreadable(seat, LOG_GATE, exc)]


# -- the report -----------------------------------------------------------------------------------
def plan_cells(seat):
    return ("%s (%s binds, funds %.0f %%)" % (human_bytes(seat["vram_kv_bytes"]), seat["binding"],
                                              100 * seat["funded_fraction"]),
            "{:,}".format(seat["kv_tokens"]),
            "%d sessions @ %s" % (seat["sessions"], "{:,}".format(seat["max_model_len"])))


def plan_notes(seat):
    """How the seat is funded, what a step of each knob buys, and the host-pool ladder."""
    lines = ["Radiance seat %s (radiance %s funding formula, card [%d] binds): capacity %s MiB, elastic %s MiB, "
             "expert floor %s MiB; the cache gets %s of demand %s tokens (%s binds: funds %.1f %%); the host pins "
             "%s MiB (TTM_MIN_MIB %s, TTM_TARGET_MIB %s)." % (
                 seat["name"], seat["radiance_release"], seat["binding_card"], num(seat["capacity_mib"]),
                 num(seat["elastic_mib"]), num(seat["expert_floor_mib"]), human_bytes(seat["vram_kv_bytes"]),
                 num(seat["kv_cap_tokens"]), seat["binding"], 100 * seat["funded_fraction"],
                 num(seat["pin_ledger_mib"]), num(seat["ttm_min_mib"]), num(seat["ttm_target_mib"]))]
    lines += ["- %s %s: %+d tokens, demand %+d tokens, pinned %+.2f MiB: %s" % (
        effect["knob"], effect["change"], effect["kv_tokens"], effect["kv_cap_tokens"], effect["pin_ledger_mib"],
        effect["why"]) for effect in seat.get("knob_effects") or []]
    rungs = seat.get("host_pool_rungs") or []
    if rungs:
        steps = " -> ".join("HOST_POOL_MIB %s: %s tokens" % (num(rung["host_pool_mib"]), num(rung["kv_tokens"]))
                            for rung in rungs)
        lines.append("- to fund %s tokens: %s (%s)" % (num(seat["target_tokens"]), steps, _STOPS.get(rungs[-1].get("stopped"), "")))
    return lines


# Why the host-pool rungs stop, in the plan's words.
_STOPS = {"funded": "funded", "host_ram": "the host's RAM stops the ladder",
          "plane_on_host": "the host holds the whole plane: more host RAM buys nothing", "demand": "demand binds"}
