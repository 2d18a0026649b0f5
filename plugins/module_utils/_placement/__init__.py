# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stage 3, placement: provably optimal placement of seats onto GPUs. It sees only footprints,
pins and GPUs, never an engine or a runtime; the problem, the packer and the solver are its
modules, `place` its entry.

May import: _common.

The objective, in order:

1. maximise the worst spare (capacity minus the needs placed there) over the GPUs that are not
   kept clear;
2. among assignments with that worst spare, the fewest moves (seats that have a ``current_gpu``
   and end up elsewhere; new seats are not moves);
3. deterministic: the first such assignment in a fixed search order (seats by need, largest
   first, then by name; GPUs in the order given), whatever order the seats come in.

How it is proven (docs/placement.md has the long form):

* Pinned seats are fixed first. Upper bounds on the worst spare come from every set of GPUs (the
  seats that may only use them must fit in them: a fluid bound), from each seat (it must fit on
  the GPUs it may use) and from the largest seats (pigeonhole: of the k * m + 1 largest pieces
  some GPU holds k + 1).
* A greedy placement, improved by exact pairwise re-splits (a subset-sum per pair of GPUs),
  gives a first lower bound.
* The gap is closed by bisection on the worst spare W, then a climb one MiB at a time near the
  top. "Is W feasible" is exact bin packing with capacities ``capacity - pinned - W``, decided
  by bin completion: the largest unplaced seat goes on some GPU, so branch on which
  GPU and on what else fills it. A multi-GPU seat is one piece per GPU, at most one piece on a
  GPU. Only maximal fillings are tried; fillings where one or two seats could be swapped for a
  larger left-out seat are skipped (swap dominance); GPUs that look the same to
  the seats still to place are tried once (symmetry); identical seats form one group; the total
  slack bounds the waste; subset-sum bitsets cut fillings that cannot reach the needed fill; and
  states that fail are remembered across targets (failing at W means failing above W).
* With W fixed at the best found, moves start from the better of that packing and "who can
  stay stays", improved by a local search that re-splits each pair of GPUs for the most seats
  that stay. Then they are minimised by branch and bound: first over the real GPUs (bound:
  seats whose current GPU is full, and the fewest that must leave an over-full one), then, if
  that runs long, over GPUs up to symmetry, where each complete packing is mapped onto the
  real GPUs by a maximum-weight assignment (Hungarian method) of seats that stay.

The search is anytime within a budget of steps (a node of a larger host counts several, so the
budget keeps to about the same time): the worst spare may use a share of it when some seat
runs somewhere now, the moves get the rest. When it is spent the best assignment found is
returned with ``optimal: False`` and ``bound_mib``, the certified bound. Nothing here reads a
clock, so the answer depends only on the input and the budget.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._placement.problem import (
    PlacementError,
    PlacementInfeasible,
    Problem,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._placement.solver import (
    SearchBudgetSpent,
    Solver,
)

__all__ = ("DEFAULT_NODE_LIMIT", "PlacementError", "PlacementInfeasible", "per_gpu", "place")

DEFAULT_NODE_LIMIT = 100000
# percent of the node budget kept for the moves when some seat runs somewhere now
_MOVES_SHARE = 40
# nodes the move search spends over the real GPUs before switching to GPUs up to symmetry
_PHYSICAL_SHARE = 5000


def _order_for_output(problem, where, fixed):
    assignment = {}
    for seat in problem.seats:
        gpus = fixed.get(seat.name) or where[seat.name]
        ids = [problem.ids[pos] for pos in sorted(gpus)]
        if seat.cur_mask != -1 and sum(1 << pos for pos in gpus) == seat.cur_mask:
            ids = [problem.ids[pos] for pos in seat.current]  # keep the rank order it runs with
        assignment[seat.name] = ids[0] if seat.count == 1 else ids
    return assignment


def place(gpus, seats, min_spare_mib=0, node_limit=DEFAULT_NODE_LIMIT):
    """Assign seats to GPUs: maximise the worst spare, then fewest moves; see the module doc.

    ``gpus``: ``[{id, capacity_mib, keep_clear}]``; ``seats``: ``[{name, need_mib, gpu,
    avoid_gpus, current_gpu, gpu_count}]`` where ``need_mib`` is per GPU. Returns
    ``assignment`` (seat -> GPU id, a list for multi-GPU seats), ``spare_mib``,
    ``worst_spare_mib``, ``moves`` (seat names), ``optimal``, ``bound_mib``, ``upper_bound_mib`` and
    ``search_nodes``. Raises PlacementError for bad input and PlacementInfeasible when no
    assignment leaves ``min_spare_mib`` on every GPU.
    """
    if isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1:
        raise PlacementError("search_node_limit: expected a positive number of search steps, got %r"
                             % (node_limit,))
    problem = Problem(gpus, seats, min_spare_mib)
    solver = Solver(problem, node_limit)
    if not problem.usable:
        return _result(problem, solver, {}, True, None, None)
    upper, binding = solver.upper_bound()
    _refuse_impossible(problem, solver, upper, binding, min_spare_mib)
    upper = min(upper, solver.large_seats_bound())
    best = solver.greedy()
    lower = solver.worst_of(best)
    movable = any(seat.cur_mask != -1 for seat in problem.seats)
    if movable:
        # the moves get what the worst spare leaves, and at least this share of the budget
        solver.limit = max(node_limit * (100 - _MOVES_SHARE) // 100, 1)
    best, lower, high = solver.raise_worst(best, lower, upper)
    solver.limit = node_limit
    optimal = lower == high
    if lower < min_spare_mib:
        if optimal:
            _refuse_infeasible(problem, solver, best, lower, min_spare_mib)
        raise PlacementInfeasible(
            "the placement search spent its node budget (%d) before finding an assignment that "
            "leaves %d MiB on every GPU; the best found leaves %d MiB (raise the node limit)"
            % (node_limit, min_spare_mib, lower), [], min_spare_mib - lower, [])
    if solver.moves_of(best):
        keep = _keep_current(problem, solver, lower)
        if keep is not None and solver.moves_of(keep) < solver.moves_of(best):
            best = keep
        best = solver.keep_more(lower, best)
        if solver.moves_of(best):
            try:
                best = solver.fewest_moves(lower, best, node_share=_PHYSICAL_SHARE)
            except SearchBudgetSpent:
                best = solver.incumbent
                optimal = False
    return _result(problem, solver, best, optimal, upper, high)


def _keep_current(problem, solver, worst):
    """Every seat that can stay where it is stays; the rest go greedily; None if too tight."""
    load = {pos: 0 for pos in problem.usable}
    where = {}
    later = []
    for seat in solver.loose:
        if seat.current is not None and len(seat.current) == seat.count and all(
                seat.allowed >> pos & 1 for pos in seat.current):
            where[seat.name] = list(seat.current)
            for pos in seat.current:
                load[pos] += seat.need
        else:
            later.append(seat)
    for seat in sorted(later, key=lambda s: (-s.count, -s.need, s.name)):
        solver.place_on_roomiest(seat, load, where)
    if min(solver.base[pos] - load[pos] for pos in problem.usable) < worst:
        return None
    return where


def _refuse_impossible(problem, solver, upper, binding, min_spare_mib):
    """Refuse before searching when a bound already rules ``min_spare_mib`` out."""
    if upper >= min_spare_mib:
        return
    ids = problem.ids
    for pos in problem.usable:
        spare = solver.base[pos]
        if spare < min_spare_mib:
            pinned = [s.name for s in problem.seats if s.pin is not None and pos in s.pin]
            raise PlacementInfeasible(
                "GPU %s: the seats pinned to it (%s) need %d MiB and min_spare_mib is %d, but it "
                "has %d MiB: short by %d MiB"
                % (ids[pos], ", ".join(pinned), problem.capacity[pos] - spare, min_spare_mib,
                   problem.capacity[pos], min_spare_mib - spare),
                [ids[pos]], min_spare_mib - spare, pinned)
    for seat in solver.loose:
        rooms = sorted(((solver.base[pos], pos) for pos in problem.usable
                        if seat.allowed >> pos & 1), reverse=True)
        room, pos = rooms[seat.count - 1]
        if room - seat.need < min_spare_mib:
            where = ("the roomiest GPU it may use, %s, has" % ids[pos] if seat.count == 1 else
                     "its %d roomiest GPUs (%s) have at most" % (
                         seat.count, ", ".join(ids[q] for _room, q in rooms[:seat.count])))
            raise PlacementInfeasible(
                "seat %s needs %d MiB per GPU plus min_spare_mib %d; %s %d MiB after pinned "
                "seats: short by %d MiB"
                % (seat.name, seat.need, min_spare_mib, where, room,
                   min_spare_mib - (room - seat.need)),
                [ids[q] for _room, q in rooms[:seat.count]], min_spare_mib - (room - seat.need),
                [seat.name])
    # the fluid bound that binds: the same arithmetic as upper_bound(), pinned load first
    mask = sum(1 << pos for pos in binding)
    confined = [s for s in solver.loose if s.allowed & ~mask == 0]
    need = sum(s.need * s.count for s in confined)
    room = sum(solver.base[pos] for pos in binding)
    pinned = sum(problem.capacity[pos] for pos in binding) - room
    short = need + min_spare_mib * len(binding) - room
    raise PlacementInfeasible(
        "GPUs %s have %d MiB besides the %d MiB of pinned seats, but the seats that may only use "
        "them (%s) need %d MiB plus min_spare_mib %d on each: short by %d MiB"
        % (", ".join(ids[pos] for pos in binding), room, pinned,
           ", ".join(sorted(s.name for s in confined)), need, min_spare_mib, short),
        [ids[pos] for pos in binding], short, sorted(s.name for s in confined))


def _refuse_infeasible(problem, solver, where, worst, min_spare_mib):
    """Explain a proven shortfall from the best possible assignment."""
    load = {pos: 0 for pos in problem.usable}
    on = {pos: [] for pos in problem.usable}
    for seat in problem.seats:
        for pos in solver.fixed.get(seat.name) or where[seat.name]:
            load[pos] += seat.need
            on[pos].append(seat.name)
    short = [pos for pos in problem.usable if problem.capacity[pos] - load[pos] < min_spare_mib]
    short.sort(key=lambda pos: problem.capacity[pos] - load[pos])
    total_need = sum(s.need * s.count for s in problem.seats)
    total_room = sum(problem.capacity[pos] for pos in problem.usable)
    parts = []
    for pos in short:
        spare = problem.capacity[pos] - load[pos]
        parts.append("GPU %s (%d MiB) with %s: spare %d MiB, short by %d MiB"
                     % (problem.ids[pos], problem.capacity[pos], ", ".join(sorted(on[pos])),
                        spare, min_spare_mib - spare))
    seats = sorted({name for pos in short for name in on[pos]})
    raise PlacementInfeasible(
        "no placement leaves %d MiB spare on every GPU; the best possible leaves a worst spare of "
        "%d MiB (short by %d MiB): %s. In total the seats need %d MiB of the %d MiB on the GPUs "
        "not kept clear, which must also keep %d MiB spare each"
        % (min_spare_mib, worst, min_spare_mib - worst, "; ".join(parts), total_need, total_room,
           min_spare_mib),
        [problem.ids[pos] for pos in short], min_spare_mib - worst, seats)


def _result(problem, solver, where, optimal, upper, bound):
    load = [0] * len(problem.ids)
    for seat in problem.seats:
        for pos in solver.fixed.get(seat.name) or where[seat.name]:
            load[pos] += seat.need
    spare = {problem.ids[pos]: problem.capacity[pos] - load[pos] for pos in range(len(problem.ids))}
    counted = problem.usable or list(range(len(problem.ids)))
    worst = min(problem.capacity[pos] - load[pos] for pos in counted)
    moves = []
    for seat in problem.seats:
        gpus = solver.fixed.get(seat.name) or where[seat.name]
        if seat.cur_mask != -1 and sum(1 << pos for pos in gpus) != seat.cur_mask:
            moves.append(seat.name)
    return {
        "assignment": _order_for_output(problem, where, solver.fixed),
        "spare_mib": spare,
        "worst_spare_mib": worst,
        "moves": sorted(moves),
        "optimal": optimal,
        # no placement's worst spare is larger: the proof, or the certified gap to the best
        "bound_mib": worst if optimal else bound,
        "upper_bound_mib": upper,
        "search_nodes": solver.nodes,
    }


def per_gpu(gpus, seats, result):
    """Per GPU of the input: its capacity, the seats placed on it, what they use and the spare."""
    placed = {gpu["id"]: [] for gpu in gpus}
    for seat in seats:
        target = result["assignment"][seat["name"]]
        for gpu_id in target if isinstance(target, list) else [target]:
            placed[gpu_id].append(seat["name"])
    return [{"id": gpu["id"], "capacity_mib": gpu["capacity_mib"],
             "keep_clear": gpu.get("keep_clear", False), "seats": sorted(placed[gpu["id"]]),
             "used_mib": gpu["capacity_mib"] - result["spare_mib"][gpu["id"]],
             "spare_mib": result["spare_mib"][gpu["id"]]} for gpu in gpus]
