# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The context ladder: the largest value of one of a seat's knobs (``max_model_len``,
``max_num_seqs`` or ``kv_cache_memory_bytes``) that boots **and** survives a request at full
length on the seat's real card. Boot is not runtime: a rung passes only when every gate of its
window passed, the long-request probe included.

The rungs are a grid from the value the seat runs now (it fits: the lower end) to an upper
bound, on the operator's step. The search is a bisection for the last passing rung, on the
premise that a larger value needs more memory: each rung is one gated window of the rebalance
role, rolled back when it fails, so the seat ends on the best passing rung or on what it ran
before, never on a failed one.

A radiance seat's ``host_pool_mib`` is the under-funded ladder: 1,024 MiB rungs up to the pool
the plan says funds the seat's ``target_tokens`` (the host holding the whole plane caps it), each
with TTM_MIN_MIB and TTM_TARGET_MIB raised by what the rung pins more, so a rung the host's RAM
cannot hold fails its pre-gate and the ladder settles on the largest the host holds. Demand is
never touched.
"""

from __future__ import annotations

KNOBS = ("max_model_len", "max_num_seqs", "kv_cache_memory_bytes", "host_pool_mib")
# The knobs of one engine only.
RADIANCE_KNOBS = ("host_pool_mib",)

# A failed gate -> the kind of failure a rung reports, in the order they are told apart.
_FAILURE_KINDS = (
    ("runtime_probe", "oom at runtime"),
    ("host_pinnable_mib", "host RAM"),
    ("no_oom", "oom at boot"),
    ("vllm_startup_check", "startup check"),
    ("free_mib_before_start", "startup check"),
    ("runtime_start", "start"),
    ("container_running", "health"),
    ("health", "health"),
)


class LadderError(ValueError):
    """Ladder inputs that cannot make a ladder; the message names the variable."""


def _positive(value, name):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LadderError("%s: expected a positive integer, got %r" % (name, value))
    return value


def rungs(low, high, step):
    """The values a ladder may try: ``low`` (what runs now), then ``low + k * step`` up to
    ``high``, and ``high`` itself when the step does not land on it."""
    low, high, step = _positive(low, "ladder low"), _positive(high, "ladder high"), _positive(step, "ladder_step")
    if high < low:
        raise LadderError("ladder high: expected at least what the seat runs now (%d), got %d" % (low, high))
    values = list(range(low, high + 1, step))
    if values[-1] != high:
        values.append(high)
    return values


def upper_bound(plan, seat, knob, published=None):
    """The arithmetic's upper end of a ladder from the host's plan: for ``max_model_len`` the
    model's published window (``published``), capped at the KV tokens a pinned budget holds
    (a budget the plan sizes grows with the context);
    for ``max_num_seqs`` the contexts of ``max_model_len`` the KV holds; for
    ``kv_cache_memory_bytes`` the budget plus the smallest spare at plateau of its GPUs."""
    seats = {s["name"]: s for s in (plan or {}).get("seats", [])}
    if seat not in seats:
        raise LadderError("seat: expected one of the plan's seats (%s), got %r" % (", ".join(sorted(seats)), seat))
    planned = seats[seat]
    engine = planned.get("engine", "vllm")
    if (knob in RADIANCE_KNOBS) != (engine == "radiance"):
        raise LadderError("seat %s: ladder_knob %s: expected %s for a %s seat" % (
            seat, knob, " or ".join(RADIANCE_KNOBS if engine == "radiance"
                                    else [k for k in KNOBS if k not in RADIANCE_KNOBS]), engine))
    if knob == "host_pool_mib":
        if not planned.get("host_pool_rungs"):
            raise LadderError("seat %s: the pool that funds the seat is unknown: set its target_tokens (or ladder_high)"
                              % seat)
        return planned["host_pool_rungs"][-1]["host_pool_mib"]
    if knob == "max_model_len":
        pinned = planned["kv_rule"].startswith("pinned")
        if not published:
            raise LadderError("seat %s: the model's published context window is unknown: set ladder_high" % seat)
        return min(planned["kv_cache_tokens"], published) if pinned else published
    if knob == "max_num_seqs":
        return max(1, planned["kv_cache_tokens"] // planned["max_model_len"])
    spare = min(gpu["spare_mib"] for gpu in plan["gpus"] if gpu["uuid"] in planned["gpus"])
    return planned["kv_cache_memory_bytes"] + max(spare, 0) * 2 ** 20


def current_value(plan, seat, knob):
    """What the seat runs with now, as the plan sizes it (vLLM's default max_num_seqs, 256 on a
    small card and 1024 on a large one, when the seat sets none)."""
    planned = {s["name"]: s for s in (plan or {}).get("seats", [])}[seat]
    if knob == "max_num_seqs":
        return (planned.get("launch") or {}).get("max_num_seqs") or 1024
    return planned[knob]


def next_rung(values, results):
    """The next value to try, or None when the search is over. ``results``: ``{value: passed}``
    of the rungs tried; ``values[0]`` passes (the seat runs it)."""
    low, high = 0, len(values) - 1
    for index, value in enumerate(values):
        if index and value in results:
            if results[value]:
                low = max(low, index)
            else:
                high = min(high, index - 1)
    if low >= high:
        return None
    # the upper end first: the cheapest proof when the whole range fits
    return values[high] if not any(v in results for v in values[1:]) else values[(low + high + 1) // 2]


def failure_kind(section):
    """What a failed rung's window says went wrong: the first failed gate's kind, or the
    error that stopped it."""
    failed = [gate for gate in section.get("gates", []) if not gate.get("ok")]
    names = [gate.get("gate") for gate in failed]
    for name, kind in _FAILURE_KINDS:
        if name in names:
            # the boot log says where: weights, profile, graph capture, runtime
            phases = next(((g.get("measured") or {}).get("phases") for g in failed if g.get("gate") == "no_oom"), None)
            return "oom at %s" % phases[0] if name == "no_oom" and phases else kind
    if failed:
        return "gate %s" % names[0]
    return "refused: %s" % section["error"] if section.get("error") else None


def rung_record(knob, value, seat_name, section, passed):
    """One rung of the ladder from its window's report section."""
    plan = {s["name"]: s for s in (section.get("plan") or {}).get("seats", [])}.get(seat_name, {})
    probe = next((g["measured"] for g in section.get("gates", [])
                  if g.get("gate") == "runtime_probe" and g.get("seat") == seat_name), None) or {}
    boot_free = {g["seat"]: g["measured"] for g in section.get("gates", []) if g.get("gate") == "free_mib_boot"}
    kind = None if passed else failure_kind(section) or "failed"
    return {
        "knob": knob, "value": value, "passed": bool(passed), "failure_kind": kind,
        "max_model_len": plan.get("max_model_len"),
        "kv_cache_memory_bytes": plan.get("kv_cache_memory_bytes"),
        "kv_cache_tokens": plan.get("kv_cache_tokens"),
        "max_concurrency": plan.get("max_concurrency"),
        "max_num_seqs": (plan.get("launch") or {}).get("max_num_seqs") or plan.get("max_num_seqs"),
        # a radiance seat's funding
        "kv_tokens": plan.get("kv_tokens"), "funded_fraction": plan.get("funded_fraction"),
        "pin_ledger_mib": plan.get("pin_ledger_mib"), "ttm_min_mib": plan.get("ttm_min_mib"),
        "ttm_target_mib": plan.get("ttm_target_mib"),
        # what the boot left free (read just before the probe), and what the probe left
        "free_mib_after_boot": probe.get("free_mib_before"),
        "free_mib_after_probe": dict(sorted(boot_free.items())) if passed else None,
        "failed_gates": ["%s %s: %s" % (g.get("seat"), g.get("gate"), g.get("detail"))
                         for g in section.get("gates", []) if not g.get("ok")],
        "status": section.get("status"),
        "summary": "%s: %s" % (value, "passed" if passed else "failed (%s)" % kind),
    }


def with_knob(seats, name, knob, value):
    """The inventory's seats with one seat's knob set to ``value`` (the others as they are). A
    host pool moves TTM_MIN_MIB and TTM_TARGET_MIB with it, by what each rank pins more: never
    one without the other."""
    if knob not in KNOBS:
        raise LadderError("ladder_knob: expected one of %s, got %r" % (", ".join(KNOBS), knob))
    if not isinstance(seats, list) or name not in [s.get("name") for s in seats if isinstance(s, dict)]:
        raise LadderError("seat: expected the name of one of the host's llmfleet_seats, got %r" % (name,))
    return [_with(seat, knob, value) if isinstance(seat, dict) and seat.get("name") == name else seat
            for seat in seats]


def _with(seat, knob, value):
    changed = dict(seat, **{knob: value})
    if knob == "host_pool_mib":
        try:
            more = (value - seat["host_pool_mib"]) * seat.get("tensor_parallel_size", 1)
            changed.update(ttm_min_mib=seat["ttm_min_mib"] + more, ttm_target_mib=seat["ttm_target_mib"] + more)
        except (KeyError, TypeError) as exc:
            raise LadderError("seat %s: host_pool_mib, ttm_min_mib, ttm_target_mib and tensor_parallel_size: "
                              "expected integers (%s)" % (seat.get("name"), exc)) from None
    return changed


def result(seat, knob, step, values, records):
    """``ladder.json``: every rung tried, in the order tried, the best passing value and the
    inventory change that would keep it."""
    passing = [r["value"] for r in records if r["passed"]]
    best = max(passing) if passing else values[0]
    suggested = None if best == values[0] else {"seat": seat, knob: best}
    if suggested and knob == "host_pool_mib":
        rung = next(r for r in records if r["passed"] and r["value"] == best)
        suggested.update(ttm_min_mib=rung.get("ttm_min_mib"), ttm_target_mib=rung.get("ttm_target_mib"))
    return {
        "seat": seat, "knob": knob, "step": step, "low": values[0], "high": values[-1],
        "rungs": records, "best": best, "before": values[0], "suggested": suggested,
    }
