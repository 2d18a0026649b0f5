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

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import LADDER_STEPS

KNOBS = ("max_model_len", "max_num_seqs", "kv_cache_memory_bytes", "host_pool_mib")
# The knobs of one engine only.
RADIANCE_KNOBS = ("host_pool_mib",)
# The knobs each engine's seats have: a fixed tenant is its cap, with nothing to climb.
ENGINE_KNOBS = {"vllm": tuple(k for k in KNOBS if k not in RADIANCE_KNOBS), "radiance": RADIANCE_KNOBS,
                "fixed": ()}
# The most rungs a ladder lays out (it tries about log2 of them): a step of 1 up to 10**15 would
# build a list the controller cannot hold.
MAX_RUNGS = 10000

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
    low, high, step = _positive(low, "ladder low"), _positive(high, "ladder_high"), _positive(step, "ladder_step")
    if high < low:
        raise LadderError("ladder_high: expected at least what the seat runs now (%d), got %d" % (low, high))
    if (high - low) // step + 1 > MAX_RUNGS:
        raise LadderError("ladder_step: expected a step that makes at most %d rungs from %d to %d, got %d"
                          % (MAX_RUNGS, low, high, step))
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
    planned = planned_seat(plan, seat, knob)
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


def planned_seat(plan, seat, knob):
    """The plan's seat ``seat``, refused when the plan has none of that name or its engine has
    no such knob."""
    seats = {s["name"]: s for s in (plan or {}).get("seats", [])}
    if seat not in seats:
        raise LadderError("seat: expected one of the plan's seats (%s), got %r" % (", ".join(sorted(seats)), seat))
    problem = knob_problem(seat, seats[seat].get("engine", "vllm"), knob)
    if problem:
        raise LadderError(problem)
    return seats[seat]


def whole_number(value, name, minimum):
    """``value`` (an int, or digits as ``-e`` gives them) as an int of at least ``minimum``."""
    number = _whole_number(value, minimum)
    if number is None:
        raise LadderError("%s: expected a whole number of at least %d in the knob's unit, got %r"
                          % (name, minimum, value))
    return number


def step_of(knob, step):
    """The step a ladder of ``knob`` climbs by: ``step`` (an int, or digits as ``-e`` gives them),
    else, for 0 or none, the knob's own (``LADDER_STEPS``)."""
    step = whole_number(step or 0, "ladder_step", 0)
    if step:
        return step
    if knob not in KNOBS:
        raise LadderError("ladder_knob: expected one of %s, got %r" % (", ".join(KNOBS), knob))
    return LADDER_STEPS[knob]


def knob_problem(seat, engine, knob):
    """Why ``knob`` cannot be laddered on a seat of ``engine`` (None when it can)."""
    fits = ENGINE_KNOBS.get(engine, ())
    if not fits:
        return "seat %s: ladder_knob: a %s seat has no knob to ladder (its memory is its cap)" % (seat, engine)
    if knob not in fits:
        return "seat %s: ladder_knob: expected %s for a %s seat, got %r" % (seat, " or ".join(fits), engine, knob)
    return None


def _whole_number(value, minimum):
    """``value`` as an int when it is one written as digits (``-e`` gives text), else None."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    return None


def options_problems(seat, seats_by_host, knob, step, high, report_dir, target="gpu_hosts"):
    """Every problem of a ladder's own variables (``-e seat=... ladder_knob=... ladder_step=...
    ladder_high=... llmfleet_report_dir=...``) against the seats of the play's hosts
    (``{host: llmfleet_seats}``), as a list; empty when the ladder can start. A step of 0 is the
    knob's own (``LADDER_STEPS``)."""
    problems = []
    engines = {}
    for seats in (seats_by_host or {}).values():
        for entry in seats if isinstance(seats, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                engines.setdefault(entry["name"], entry.get("engine"))
    if seat not in engines:
        problems.append("seat: expected the name of a seat of %s (%s), got %r"
                        % (target, ", ".join(engines) or "none", seat))
    elif knob not in KNOBS:
        problems.append("ladder_knob: expected one of %s, got %r" % (", ".join(KNOBS), knob))
    else:
        problem = knob_problem(seat, engines[seat], knob)
        if problem:
            problems.append(problem)
    whole_step, whole_high = _whole_number(step, 0), _whole_number(high, 0)
    if whole_step is None:
        problems.append("ladder_step: expected a whole number in the knob's unit (0: the knob's own step), got %r"
                        % (step,))
    elif not whole_step:
        whole_step = LADDER_STEPS.get(knob)
    if whole_high is None:
        problems.append("ladder_high: expected a whole number in the knob's unit (0: the arithmetic's upper "
                        "end), got %r" % (high,))
    elif whole_step and whole_high // whole_step + 1 > MAX_RUNGS:
        problems.append("ladder_step: expected a step that makes at most %d rungs up to ladder_high %d, got %d"
                        % (MAX_RUNGS, whole_high, whole_step))
    if not isinstance(report_dir, str) or not report_dir.strip():
        problems.append("llmfleet_report_dir: expected a directory on the controller for ladder.json, got %r"
                        % (report_dir,))
    return problems


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
