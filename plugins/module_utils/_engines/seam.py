# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The engine seam, declared in code: ``ENGINE`` names what an engine module defines, each with
its parameters or type and, where an engine may leave it out, the default it gets (the default's
docstring says what the name means). ``ENGINES`` (this package) hands every engine out through
``ENGINE.implement``, and a conformance test asks each registered engine; docs/architecture.md
has the table of who implements what.

The inventory checked into normal form: ``gpu_count``, ``container_name``, ``normalize``. Sized,
its footprint and what a plan seat carries: ``size``, ``boot_problem``, ``footprint``, ``ran``,
``boot_utilization``, ``planned``, ``window_problems``. Its plan seat's fields, one table the
plan, the render and the release check read: ``PLAN_SEAT_FIELDS`` (_engines.fields). What a
runtime needs to run it: ``check_plan_seat``, ``environment``, ``command``, ``container_environment``, ``listen_port``,
``HOST_IPC``. Its gates beside every seat's: ``before_start_gates``, ``host_gates``, and after
its boot (composed by _rollout.gates) ``MODELS_PATH``, ``LOG_GATE``, ``log_gates``,
``probe_gates``. A server started outside the collection: ``serves``, ``boot_state``. Its
requests in flight: ``IN_FLIGHT_PATH``, ``in_flight``. The plan's tables: ``plan_cells``,
``plan_notes``.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.seam import Constant, Required, Seam


class SizingError(ValueError):
    """A seat that cannot be sized; the message names the seat and why."""


def gpu_count(check, where, raw):
    """How many GPUs the inventory's seat ``raw`` takes (problems go to ``check``): one."""
    return 1


def boot_problem(seat, sized):
    """Why the engine would refuse to start with that size, or None: none."""
    return None


def ran(process):
    """What the seat ran, from its process in a snapshot (the record ``footprint`` and
    ``window_problems`` read), or None: nothing its size depends on."""
    return None


def boot_utilization(footprint_mib, margin_mib, total_mib):
    """The share of a card its boot checks for, or None: no startup check of its own."""
    return None


def planned(seat, sized):
    """The numbers a plan seat carries beside every seat's: none."""
    return {}


def window_problems(seat, sized, running):
    """``(problems, warnings)`` of this window against ``ran``'s record of what the seat runs
    now (None when it runs nothing): anything may change in one window."""
    return [], []


def check_plan_seat(seat, fail):
    """Check what its plan seat's fields must agree on beyond each one's kind (PLAN_SEAT_FIELDS)
    before it is rendered, ``fail(field, expected, value)`` for each problem: nothing."""


def environment(seat):
    """``[(NAME, value)]``: the variables a window changes: none."""
    return []


def container_environment(seat, var):
    """``[(NAME, value)]`` the container gets beside the inventory's (``var(NAME)`` is the
    runtime's reference to one of the seat's variables): none."""
    return []


def before_start_gates(seat, card, free_mib):
    """Its own gates on one of its GPUs before it starts, beside the free memory: none."""
    return []


def host_gates(seat, cards):
    """Its own gates on gpu_info's whole reading, once, before it starts: none."""
    return []


def log_gates(seat, log):
    """Its gates on the text of its boot log (LOG_GATE's unreadable gate when it is none): none."""
    return []


def probe_gates(seat, host):
    """Its requests after its boot when the window asks for a runtime probe (``host`` is the
    rollout's SeatHost: its client, its log, its card): none."""
    return []


def serves(argv):
    """Whether a process started outside the collection (its argv) runs this engine's server:
    nothing tells it apart."""
    return False


def boot_state(log):
    """How far such a server's boot got by its log since it started, ``("serving" | "booting" |
    "failed", why or None)`` (a rollback that brings it back waits for it to serve): never
    asked, as ``serves`` recognises none."""
    return "serving", None


def in_flight(metrics):
    """The requests it is working on, by the text of its IN_FLIGHT_PATH, or None (a window waits
    for zero before it stops the seat): never asked, as IN_FLIGHT_PATH is None."""
    return None


def plan_notes(seat):
    """Lines the plan prints about it below its tables: none."""
    return []


ENGINE = Seam("engine", {
    "NAME": Constant(str, doc="the inventory's engine: value"),
    "FIELDS": Constant(frozenset, frozenset(), doc="the inventory fields its seat may have beyond every seat's"),
    "PLAN_SEAT_FIELDS": Constant(tuple, (), doc="its plan seat's fields beyond every seat's, rows of (field, kind, "
                                                "flag): launch.* are copied from the inventory, every row is held "
                                                "to its kind before a render (_engines.fields)"),
    "SIZE_FIELDS": Constant(tuple, (), doc="which of FIELDS are sizes"),
    "HOST_IPC": Constant(bool, False, doc="whether a runtime gives it the host's IPC namespace"),
    "EXITS_CLEAN_ON_FAULT": Constant(bool, False, doc="whether only a restart policy that restarts a clean exit keeps it up"),
    "KEEPS_OWN_HEADROOM": Constant(bool, False, doc="whether it claims its cards whole but its own headroom, which "
                                                    "then stands for the operator's margin on them"),
    "API_KEY_VARIABLE": Constant((str, type(None)), None, doc="the variable its server reads its API key from"),
    "IN_FLIGHT_PATH": Constant((str, type(None)), None, doc="the path of its server that counts its requests in flight"),
    "MODELS_PATH": Constant((str, type(None)), None, doc="the path of its server that lists the names it serves "
                                                         "with their context (OpenAI's /v1/models), asked once healthy"),
    "LOG_GATE": Constant((str, type(None)), None, doc="the gate its boot log is judged as (log_gates), failed when "
                                                      "the log cannot be read"),
    "gpu_count": gpu_count,
    "container_name": Required("name", doc="its container's name for a seat of that name"),
    "normalize": Required("check", "where", "raw", "seat", "defaults", doc="the inventory's seat in normal form"),
    "size": Required("seat", "inventory_dir", "options", doc='{"kv", "rule", "weights_bytes"} (SizingError)'),
    "boot_problem": boot_problem,
    "footprint": Required("seat", "sized", "plateau", "record", "default_overhead_mib", doc="its GPU memory"),
    "ran": ran,
    "boot_utilization": boot_utilization,
    "planned": planned,
    "window_problems": window_problems,
    "check_plan_seat": check_plan_seat,
    "environment": environment,
    "command": Required("seat", "var", doc="its server's argv"),
    "container_environment": container_environment,
    "listen_port": Required("seat", "var", doc="the port its server listens on inside the container"),
    "before_start_gates": before_start_gates,
    "host_gates": host_gates,
    "log_gates": log_gates,
    "probe_gates": probe_gates,
    "serves": serves,
    "boot_state": boot_state,
    "in_flight": in_flight,
    "plan_cells": Required("seat", doc="its KV budget, KV tokens and concurrency cells in the plan's tables"),
    "plan_notes": plan_notes,
}, together=(("IN_FLIGHT_PATH", "in_flight"), ("serves", "boot_state")))
