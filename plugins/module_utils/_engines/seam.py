# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The engine seam. An engine is a module of this package that defines, with these names:

- ``NAME``; ``FIELDS``: the inventory fields a seat of this engine may have beyond every seat's;
  ``LAUNCH_FIELDS``: which of them the rendered files need; ``SIZE_FIELDS``: which are sizes.
- ``gpu_count(check, where, raw)``, ``container_name(name)``,
  ``normalize(check, where, raw, seat, defaults)``: the inventory checked into normal form.
- ``size(seat, inventory_dir, options)`` -> ``{"kv", "rule", "weights_bytes"}`` (SizingError;
  ``options``: ``gpu_profile``, ``kv_round_to``, ``gpus``: the host's GPUs in normal form),
  ``boot_problem(seat, sized)``: why the engine would refuse to start with that size, or None;
  ``footprint(seat, sized, plateau, record, default_overhead_mib)`` (``record``: what the seat
  ran when the plateau was recorded), ``ran(process)``: that record from the seat's process in
  a snapshot (or None), ``boot_utilization(footprint_mib, margin_mib, total_mib)`` (or None),
  ``planned(seat, sized)``: the numbers a plan seat carries; ``window_problems(seat, sized,
  running)``: ``(problems, warnings)`` of this window against ``ran``'s record of what the seat
  runs now (None when it runs nothing).
- ``check_plan_seat(seat, fail)``, ``environment(seat)`` (the variables a window changes),
  ``command(seat, var)``, ``container_environment(seat, var)`` (``[(NAME, value)]`` the
  container gets beside the inventory's), ``listen_port(seat, var)``, ``HOST_IPC``: what a runtime needs to run
  it; ``EXITS_CLEAN_ON_FAULT``: whether only a restart policy that restarts a clean exit keeps
  it up; ``KEEPS_OWN_HEADROOM``: whether it claims its cards whole but its own headroom, which
  then stands for the operator's margin on them; ``var(NAME)`` is the runtime's reference to one of the seat's variables.
- ``before_start_gates(seat, card, free_mib)`` (per GPU), ``host_gates(seat, cards)`` (once,
  on gpu_info's whole reading), ``after_boot_gates(seat, host, healthy)``: its own gates beside
  every seat's (free memory, container running, health).
- ``serves(argv)``: whether a process started outside the collection runs this engine's server;
  ``boot_state(log)``: how far that server's boot got by its log since it started,
  ``("serving" | "booting" | "failed", why or None)`` (a rollback that brings it back waits for
  it to serve before the next).
- ``plan_cells(seat)``: its KV budget, KV tokens and concurrency cells in the plan's and the
  sizing's tables; ``plan_notes(seat)``: lines the plan prints about it below them.

docs/architecture.md has the table of who implements what.
"""

from __future__ import annotations


class SizingError(ValueError):
    """A seat that cannot be sized; the message names the seat and why."""
