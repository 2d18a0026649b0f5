# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Provably optimal placement of seats onto GPUs.

The objective, in order:

1. maximise the worst spare (capacity minus the needs placed there) over the GPUs that are not
   kept clear;
2. among assignments with that worst spare, the fewest moves (seats that have a ``current_gpu``
   and end up elsewhere; new seats are not moves);
3. deterministic: the first such assignment in a fixed search order (seats by need, largest
   first, then by name; GPUs in the order given), whatever order the seats come in.

How it is proven (docs/placement.md has the long form):

* Pinned seats are fixed first. Upper bounds on the worst spare come from every set of GPUs (the
  seats that may only use them must fit in them: a Hall-type fluid bound) and from each seat
  (it must fit on the GPUs it may use).
* A greedy placement, improved by exact pairwise re-splits (a subset-sum per pair of GPUs),
  gives a first lower bound.
* The gap is closed by bisection on the worst spare W, then a climb one MiB at a time near the
  top. "Is W feasible" is exact bin packing with capacities ``capacity - pinned - W``, decided
  by bin completion (Korf 2003): the largest unplaced seat goes on some GPU, so branch on which
  GPU and on what else fills it. A multi-GPU seat is one piece per GPU, at most one piece on a
  GPU. Only maximal fillings are tried; fillings where one or two seats could be swapped for a
  larger left-out seat are skipped (Martello and Toth's dominance); GPUs that look the same to
  the seats still to place are tried once (symmetry); identical seats form one group; the total
  slack bounds the waste; subset-sum bitsets cut fillings that cannot reach the needed fill; and
  states that fail are remembered across targets (failing at W means failing above W).
* With W fixed at the optimum, moves are minimised by branch and bound: first over the real
  GPUs (bound: seats whose current GPU is full, and the fewest that must leave an over-full
  one), then, if that runs long, over GPUs up to symmetry, where each complete packing is mapped
  onto the real GPUs by a maximum-weight assignment (Hungarian method) of seats that stay.

A node budget keeps pathological inputs from running forever: when it is spent the best
assignment found so far is returned with ``optimal: False``. Nothing here reads a clock, so the
answer depends only on the input.
"""

from __future__ import annotations

import bisect
import itertools

DEFAULT_NODE_LIMIT = 1000000
_INFINITE = float("inf")
# MiB: below this gap between the bounds the search climbs instead of bisecting
_CLIMB_BAND = 32
# passes over all GPU pairs in the local search
_REBALANCE_ROUNDS = 20
# nodes the move search spends over the real GPUs before switching to GPUs up to symmetry
_PHYSICAL_SHARE = 5000
# fillings of one GPU sorted before trying them; the rest follow in the order they come
_SORTED_FILLINGS = 512


class PlacementError(ValueError):
    """Input that cannot be placed; the message names the seat or GPU and what was expected."""


class PlacementInfeasible(PlacementError):
    """No assignment meets the constraints; carries the GPUs, the shortfall and the seats."""

    def __init__(self, message, gpus=(), shortfall_mib=0, seats=()):
        super().__init__(message)
        self.gpus = list(gpus)
        self.shortfall_mib = shortfall_mib
        self.seats = list(seats)


class _SearchBudgetSpent(Exception):
    pass


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _gpu_refs(value):
    """None, one reference or a list of references, as a list of strings (None stays None)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


class _Seat:
    __slots__ = ("name", "need", "count", "pin", "avoid", "current", "allowed", "cur_mask")

    def __init__(self, name, need, count, pin, avoid, current):
        self.name = name
        self.need = need
        self.count = count
        self.pin = pin          # list of GPU positions, or None
        self.avoid = avoid      # set of GPU positions
        self.current = current  # list of GPU positions, or None
        self.allowed = 0        # bitmask of GPU positions this seat may use
        self.cur_mask = -1      # bitmask of its current GPUs, -1 = a new seat


class _Problem:
    """Validated input: GPU positions, capacities and the seats with their constraints."""

    def __init__(self, gpus, seats, min_spare_mib):
        errors = []
        if not _is_int(min_spare_mib):
            errors.append("min_spare_mib: expected an integer number of MiB, got %r" % (min_spare_mib,))
        if not isinstance(gpus, (list, tuple)) or not gpus:
            raise PlacementError("gpus: expected a non-empty list of {id, capacity_mib}")
        if not isinstance(seats, (list, tuple)):
            raise PlacementError("seats: expected a list of {name, need_mib, ...}")
        self.ids, self.capacity, self.clear = [], [], []
        for pos, gpu in enumerate(gpus):
            where = "gpus[%d]" % pos
            if not isinstance(gpu, dict):
                errors.append("%s: expected a mapping with id and capacity_mib, got %r" % (where, gpu))
                continue
            gpu_id = gpu.get("id")
            if gpu_id is None or str(gpu_id) == "":
                errors.append("%s.id: expected a GPU id (a UUID or an index), got %r" % (where, gpu_id))
                gpu_id = "#%d" % pos
            gpu_id = str(gpu_id)
            if gpu_id in self.ids:
                errors.append("gpu %s: id: expected unique GPU ids, %s appears twice" % (gpu_id, gpu_id))
            capacity = gpu.get("capacity_mib")
            if not _is_int(capacity) or capacity < 0:
                errors.append("gpu %s: capacity_mib: expected a non-negative integer, got %r"
                              % (gpu_id, capacity))
                capacity = 0
            keep_clear = gpu.get("keep_clear", False)
            if keep_clear is None:
                keep_clear = False
            if not isinstance(keep_clear, bool):
                errors.append("gpu %s: keep_clear: expected true or false, got %r" % (gpu_id, keep_clear))
                keep_clear = False
            self.ids.append(gpu_id)
            self.capacity.append(capacity)
            self.clear.append(keep_clear)
        position = {gpu_id: pos for pos, gpu_id in enumerate(self.ids)}
        self.seats = []
        names = set()
        for index, raw in enumerate(seats):
            seat = self._seat(index, raw, position, errors)
            if seat is None:
                continue
            if seat.name in names:
                errors.append("seat %s: name: expected unique seat names, %s appears twice"
                              % (seat.name, seat.name))
            names.add(seat.name)
            self.seats.append(seat)
        if errors:
            raise PlacementError("; ".join(errors))
        self.min_spare = min_spare_mib
        self.usable = [pos for pos in range(len(self.ids)) if not self.clear[pos]]
        self.usable_mask = sum(1 << pos for pos in self.usable)

    def _seat(self, index, raw, position, errors):
        if not isinstance(raw, dict):
            errors.append("seats[%d]: expected a mapping with name and need_mib, got %r" % (index, raw))
            return None
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            errors.append("seats[%d].name: expected a non-empty string, got %r" % (index, name))
            return None
        label = "seat %s" % name
        need = raw.get("need_mib")
        if not _is_int(need) or need < 0:
            errors.append("%s: need_mib: expected a non-negative integer, got %r" % (label, need))
            need = 0

        def resolve(field, refs):
            positions = []
            for ref in refs:
                if ref not in position:
                    errors.append("%s: %s: expected one of the GPU ids %s, got %r"
                                  % (label, field, ", ".join(self.ids), ref))
                else:
                    positions.append(position[ref])
            return positions

        pin_refs = _gpu_refs(raw.get("gpu"))
        count = raw.get("gpu_count")
        if count is None:
            count = len(pin_refs) if pin_refs else 1
        if not _is_int(count) or count < 1:
            errors.append("%s: gpu_count: expected a positive integer, got %r" % (label, count))
            count = 1
        pin = resolve("gpu", pin_refs) if pin_refs is not None else None
        if pin is not None:
            if len(set(pin)) != len(pin):
                errors.append("%s: gpu: expected distinct GPUs, got %s" % (label, ", ".join(pin_refs)))
            if len(pin_refs) != count:
                errors.append("%s: gpu: expected %d GPU(s) for gpu_count %d, got %d"
                              % (label, count, count, len(pin_refs)))
        avoid_raw = raw.get("avoid_gpus") or []
        if not isinstance(avoid_raw, (list, tuple)):
            errors.append("%s: avoid_gpus: expected a list of GPU ids, got %r" % (label, avoid_raw))
            avoid_raw = []
        avoid = set(resolve("avoid_gpus", [str(v) for v in avoid_raw]))
        current_refs = _gpu_refs(raw.get("current_gpu"))
        current = resolve("current_gpu", current_refs) if current_refs is not None else None
        seat = _Seat(name, need, count, pin, avoid, current)
        if pin is not None:
            for pos in pin:
                if self.clear[pos]:
                    errors.append("%s: gpu: expected a GPU that is not kept clear, %s is kept clear"
                                  % (label, self.ids[pos]))
                if pos in avoid:
                    errors.append("%s: gpu: pinned to %s, which its avoid_gpus also lists"
                                  % (label, self.ids[pos]))
        allowed = 0
        for pos in range(len(self.ids)):
            if not self.clear[pos] and pos not in avoid:
                allowed |= 1 << pos
        if pin is not None:
            allowed = sum(1 << pos for pos in pin)
        seat.allowed = allowed
        if pin is None and bin(allowed).count("1") < count:
            free = [self.ids[p] for p in range(len(self.ids)) if allowed >> p & 1]
            errors.append("%s: gpu_count: needs %d distinct GPUs but may only use %d (%s); "
                          "the others are kept clear or in its avoid_gpus"
                          % (label, count, len(free), ", ".join(free) or "none"))
        if current is not None:
            seat.cur_mask = sum(1 << pos for pos in current)
            if len(set(current)) != len(current):
                errors.append("%s: current_gpu: expected distinct GPUs, got %s"
                              % (label, ", ".join(current_refs)))
        return seat


FEASIBLE, PHYSICAL, MATCHING = "feasible", "physical", "matching"


def _single_current(seat):
    """-1: a new seat; a GPU position: where it runs now and may stay; -2: it moves anyway
    (it ran on several GPUs, or where it may no longer run)."""
    if seat.cur_mask == -1:
        return -1
    if seat.cur_mask & (seat.cur_mask - 1) == 0 and seat.cur_mask & seat.allowed:
        return seat.cur_mask.bit_length() - 1
    return -2


class _Groups:
    """Seats to pack, merged into groups of interchangeable seats, largest first.

    One-GPU seats with the same need and allowed GPUs form one group (and, ``by_current``, the
    same current GPU). A multi-GPU seat given in ``multis`` is a group of its own: one *piece*
    per GPU it needs, at most one piece on a GPU.
    """

    def __init__(self, singles, multis=(), by_current=False):
        keyed = {}
        for seat in singles:
            cur = _single_current(seat) if by_current else -1
            keyed.setdefault((seat.need, seat.allowed, cur, ""), []).append(seat)
        for seat in multis:
            keyed[(seat.need, seat.allowed, -1, seat.name)] = [seat]
        order = sorted(keyed, key=lambda key: (-key[0], min(s.name for s in keyed[key]),
                                               key[1], key[2]))
        self.size = [key[0] for key in order]
        self.allowed = [key[1] for key in order]
        self.cur = [key[2] for key in order]
        self.piece = [bool(key[3]) for key in order]
        self.members = [sorted(s.name for s in keyed[key]) for key in order]
        self.count = [keyed[key][0].count if key[3] else len(keyed[key]) for key in order]
        # for matching packed GPUs to physical ones: who may stay where, and who counts
        self.stay_on = []
        self.counted = []
        for key in order:
            stay = {}
            counted = 0
            for seat in sorted(keyed[key], key=lambda s: s.name):
                cur = _single_current(seat)
                if cur != -1:
                    counted += 1
                if cur >= 0:
                    stay.setdefault(cur, []).append(seat.name)
            self.stay_on.append(stay)
            self.counted.append(counted)
        self.neutral = [not stay for stay in self.stay_on]
        # states proven unpackable, keyed on this grouping: state -> lowest worst spare seen
        self.failed = {}


class _Packer:
    """Bin completion (Korf) over fixed GPU residuals.

    FEASIBLE stops at the first packing. PHYSICAL and MATCHING minimise moves by branch and
    bound below a budget: PHYSICAL over the real GPUs (strong when the worst spare leaves
    room), MATCHING over GPUs up to symmetry, mapping each packing onto the real GPUs with an
    assignment problem (strong when the packing is tight).
    """

    def __init__(self, groups, residual, solver, mode, worst, on_better=None):
        self.g = groups
        self.r = residual
        self.solver = solver
        self.mode = mode
        self.worst = worst
        self.on_better = on_better
        self.bins = sorted(residual)
        ngroups = len(groups.size)
        self.bin_groups = {}
        self.bin_key = {}
        for b in self.bins:
            allowed = [j for j in range(ngroups) if groups.allowed[j] >> b & 1]
            self.bin_groups[b] = allowed
            stay = 0
            if mode == PHYSICAL:
                stay = sum(1 << j for j in range(ngroups) if groups.cur[j] == b)
            # residual + worst does not depend on the target, so failures carry over
            self.bin_key[b] = (residual[b] + worst, sum(1 << j for j in allowed), stay)
        self.mask = {b: (2 << residual[b]) - 1 for b in self.bins}
        self.memo = {}
        self.best = None
        self.best_cost = None
        self.leaves = 0
        self.cuts = 0
        if mode == MATCHING:
            self.classes = {}
            for b in self.bins:
                self.classes.setdefault(self.bin_key[b], []).append(b)
            self.counted_total = sum(groups.counted)

    def run(self, budget=None):
        """Search. FEASIBLE: the fillings of the first packing, or None. Cost modes: the best
        result below ``budget`` (also reported through ``on_better``), or None."""
        self.best_cost = budget
        self._node(list(self.g.count), self.bins, 0, [], 0)
        return self.best

    # ---- bounds -------------------------------------------------------------------------
    def _lower_bound(self, rem, open_set):
        """PHYSICAL: seats that must move whatever happens from here."""
        g = self.g
        bound = 0
        staying = {}
        for j, left in enumerate(rem):
            if not left:
                continue
            cur = g.cur[j]
            if cur == -2:
                bound += left
            elif cur >= 0:
                if cur in open_set:
                    staying.setdefault(cur, []).append(j)
                else:
                    bound += left
        for b, js in staying.items():
            total = sum(g.size[j] * rem[j] for j in js)
            room = self.r[b]
            # the fewest seats to take off an over-full current GPU: largest first
            for j in js:
                for _seat in range(rem[j]):
                    if total <= room:
                        break
                    total -= g.size[j]
                    bound += 1
        return bound

    def _stay_weight(self, filling, gpu):
        """MATCHING: seats of ``filling`` that could stay if it lands on ``gpu``."""
        stay_on = self.g.stay_on
        return sum(min(c, len(stay_on[j].get(gpu, ()))) for j, c in filling)

    def _stay_potential(self, rem, still_open):
        """MATCHING: the most remaining seats that could still stay. Each still-open bin lands
        on one GPU of its class, so a class with k open bins keeps stayers on at most k GPUs:
        count, per GPU, how many of its remaining current seats fit on it together, and take
        the k best GPUs of each class."""
        g = self.g
        on_gpu = {}
        for j, left in enumerate(rem):
            if left:
                for gpu, names in g.stay_on[j].items():
                    on_gpu.setdefault(gpu, []).extend([g.size[j]] * min(left, len(names)))
        open_count = {}
        for b in still_open:
            open_count[self.bin_key[b]] = open_count.get(self.bin_key[b], 0) + 1
        per_class = {}
        for gpu, sizes in on_gpu.items():
            klass = self.bin_key.get(gpu)
            if klass not in open_count:
                continue
            room, fit = self.r[gpu], 0
            for size in sorted(sizes):
                if size > room:
                    break
                room -= size
                fit += 1
            per_class.setdefault(klass, []).append(fit)
        return sum(sum(sorted(fits, reverse=True)[:open_count[klass]])
                   for klass, fits in per_class.items())

    # ---- search -------------------------------------------------------------------------
    def _node(self, rem, open_bins, cost, path, bonus):
        self.solver.tick()
        mode = self.mode
        g = self.g
        r = self.r
        sizes = g.size
        # GPUs that no remaining seat fits are done: what they have left is waste
        still_open = []
        for b in open_bins:
            room = r[b]
            for j in self.bin_groups[b]:
                if rem[j] and sizes[j] <= room:
                    still_open.append(b)
                    break
        remaining = 0
        first = -1
        for j, left in enumerate(rem):
            if left:
                remaining += left * sizes[j]
                if first < 0:
                    first = j
        if first < 0:
            return self._leaf(path, cost)
        slack = sum(r[b] for b in still_open) - remaining
        if slack < 0:
            return False
        # every remaining group needs open GPUs it fits (one per piece)
        for j, left in enumerate(rem):
            if left:
                size, allowed = sizes[j], g.allowed[j]
                fits = 0
                for b in still_open:
                    if allowed >> b & 1 and r[b] >= size:
                        fits += 1
                if not fits or (g.piece[j] and fits < left):
                    return False
        if mode == MATCHING:
            # the leaf maps packings within fixed classes, so keep the classes fixed here too
            key_of = self.bin_key
        else:
            # GPUs told apart only by seats already placed are interchangeable from here on
            left_mask = sum(1 << j for j, left in enumerate(rem) if left)
            key_of = {b: (self.bin_key[b][0], self.bin_key[b][1] & left_mask,
                          self.bin_key[b][2] & left_mask) for b in still_open}
        key = (tuple(rem), tuple(sorted(key_of[b] for b in still_open)))
        if g.failed.get(key, _INFINITE) <= self.worst:
            return False
        open_set = set(still_open)
        if mode == PHYSICAL:
            if self.best_cost is not None and cost + self._lower_bound(rem, open_set) >= self.best_cost:
                return False
            budget = _INFINITE if self.best_cost is None else self.best_cost - cost
            if budget <= self.memo.get(key, -1):
                return False
        elif mode == MATCHING and self.best_cost is not None:
            if self.counted_total - bonus - self._stay_potential(rem, still_open) >= self.best_cost:
                self.cuts += 1
                return False
        leaves, cuts = self.leaves, self.cuts
        found = False
        tried = set()
        size_x = sizes[first]
        for b in still_open:
            if not (g.allowed[first] >> b & 1) or r[b] < size_x or key_of[b] in tried:
                continue
            tried.add(key_of[b])
            rest = [o for o in still_open if o != b]
            for filling, fill_cost in self._ordered(self._fillings(b, first, rem, slack, open_set), b):
                if mode == PHYSICAL and self.best_cost is not None and cost + fill_cost >= self.best_cost:
                    continue
                for j, c in filling:
                    rem[j] -= c
                path.append((b, filling))
                gained = 0
                if mode == MATCHING:
                    gained = max(self._stay_weight(filling, gpu) for gpu in self.classes[self.bin_key[b]])
                done = self._node(rem, rest, cost + fill_cost, path, bonus + gained)
                path.pop()
                for j, c in filling:
                    rem[j] += c
                if done:
                    found = True
                    if mode == FEASIBLE:
                        return True
        if mode == PHYSICAL:
            # the budget only shrank while searching, so the final one is proven for this state
            proven = _INFINITE if self.best_cost is None else self.best_cost - cost
            if proven > self.memo.get(key, -1):
                self.memo[key] = proven
        # no packing at all below this state (nothing reached, nothing cut by a cost bound;
        # PHYSICAL cuts on cost in several places and keeps its own memo instead)
        if mode != PHYSICAL and self.leaves == leaves and self.cuts == cuts and not found:
            if g.failed.get(key, _INFINITE) > self.worst:
                g.failed[key] = self.worst
        return found

    def _ordered(self, fillings, b):
        """Cheapest, then fullest fillings first (Korf's value ordering); for MATCHING, those
        that let the most seats stay first. Only the first _SORTED_FILLINGS are sorted, so a
        roomy GPU cannot make us list millions of them."""
        sizes = self.g.size
        batch = []
        for item in fillings:
            self.solver.tick()
            batch.append(item)
            if len(batch) == _SORTED_FILLINGS:
                break
        if self.mode == MATCHING:
            gpus = self.classes[self.bin_key[b]]
            batch.sort(key=lambda item: (-max(self._stay_weight(item[0], gpu) for gpu in gpus),
                                         -sum(sizes[j] * c for j, c in item[0])))
        else:
            batch.sort(key=lambda item: (item[1], -sum(sizes[j] * c for j, c in item[0])))
        yield from batch
        for item in fillings:
            self.solver.tick()
            yield item

    def _leaf(self, path, cost):
        self.leaves += 1
        if self.mode == FEASIBLE:
            self.best = list(path)
            return True
        if self.mode == PHYSICAL:
            self.best_cost = cost
            self.best = list(path)
            if self.on_better:
                self.on_better(_spread(self.g, self.best), cost)
            return True
        # MATCHING: map the packed GPUs onto the real ones, class by class
        filling_of = dict(path)
        on_gpu = {}
        stayers = 0
        for members in self.classes.values():
            weights = [[self._stay_weight(filling_of.get(b, ()), gpu) for gpu in members]
                       for b in members]
            for row, col in enumerate(_max_weight_assignment(weights)):
                stayers += weights[row][col]
                on_gpu[members[col]] = filling_of.get(members[row], ())
        cost = self.counted_total - stayers
        if self.best_cost is not None and cost >= self.best_cost:
            self.cuts += 1
            return False
        self.best_cost = cost
        self.best = self._spread_matched(on_gpu)
        if self.on_better:
            self.on_better(self.best, cost)
        return True

    def _spread_matched(self, on_gpu):
        """Name seats onto GPUs: in each group, the seats that already run on a GPU first."""
        g = self.g
        where = {}
        for j in range(len(g.size)):
            want = {gpu: c for gpu, filling in on_gpu.items() for jj, c in filling if jj == j}
            placed = set()
            for gpu in sorted(want):
                for name in g.stay_on[j].get(gpu, ())[:want[gpu]]:
                    where[name] = [gpu]
                    placed.add(name)
                    want[gpu] -= 1
            pool = [name for name in g.members[j] if name not in placed]
            for gpu in sorted(want):
                for _slot in range(want[gpu]):
                    where[pool.pop(0)] = [gpu]
        return where

    def _fillings(self, b, first, rem, slack, open_set):
        """Maximal fillings of GPU ``b`` that hold group ``first``: (filling, cost).

        Fuller (and, for PHYSICAL, cheaper) fillings come first; waste never exceeds
        ``slack``. A filling is maximal when no left-out seat of a *forced* group still fits:
        every group when only feasibility counts; groups whose move count cannot change by
        going here (PHYSICAL), or that hold no seat able to stay anywhere (MATCHING).
        """
        g = self.g
        mode = self.mode
        room = self.r[b]
        sizes = g.size
        cands = [j for j in self.bin_groups[b] if rem[j] and sizes[j] <= room and j != first]
        if mode == PHYSICAL:
            def rank(j):
                cur = g.cur[j]
                if cur == b:
                    return 0
                if cur in (-1, -2) or cur not in open_set:
                    return 1
                return 2
            cands.sort(key=lambda j: (rank(j), -sizes[j], j))
            forced = [True] + [rank(j) < 2 for j in cands]
            cost_of = [0 if g.cur[j] in (-1, b) else 1 for j in [first] + cands]
        elif mode == MATCHING:
            forced = [g.neutral[j] for j in [first] + cands]
            cost_of = [0] * (len(cands) + 1)
        else:
            forced = [True] * (len(cands) + 1)
            cost_of = [0] * (len(cands) + 1)
        cands = [first] + cands
        n = len(cands)
        size = [sizes[j] for j in cands]
        avail = [1 if g.piece[j] else rem[j] for j in cands]  # at most one piece per GPU
        suffix = [0] * (n + 1)
        min_forced = [room + 1] * (n + 1)  # smallest forced size from i on
        reach = [1] * (n + 1)  # reach[i]: totals groups i.. can add, as a bitset up to room
        mask = self.mask[b]
        for i in range(n - 1, -1, -1):
            suffix[i] = suffix[i + 1] + avail[i] * size[i]
            min_forced[i] = min(min_forced[i + 1], size[i]) if forced[i] else min_forced[i + 1]
            bits = reach[i + 1]
            for _copy in range(avail[i]):
                bits |= bits << size[i]
            reach[i] = bits & mask

        def can_reach(i, total, floor):
            """Can groups i.. bring ``total`` to at least ``floor`` without passing room?"""
            return total + (reach[i] & ((2 << (room - total)) - 1)).bit_length() - 1 >= floor

        # Swap dominance (Martello and Toth), FEASIBLE only: a filling where one seat, or two,
        # could be exchanged for one left-out seat at least as large that still fits is never
        # needed, because the exchange leaves every other GPU no fuller. Pieces of multi-GPU
        # seats may come in but never go out (their other GPU may hold a sibling piece).
        swappable = mode == FEASIBLE
        allowed_of = g.allowed
        piece = g.piece
        avail_of = dict(zip(cands, avail))
        by_size = sorted((sizes[j], j) for j in cands)
        size_keys = [size_j for size_j, _group in by_size]
        chosen = []

        def swap_in(low, high, allowed_mask, taken):
            """A left-out seat sized within [low, high] that may go wherever ``allowed_mask``
            lets the seats it replaces go."""
            k = bisect.bisect_left(size_keys, low)
            while k < len(size_keys) and size_keys[k] <= high:
                z = by_size[k][1]
                if avail_of[z] > taken.get(z, 0) and allowed_of[z] & ~allowed_mask == 0:
                    return True
                k += 1
            return False

        def dominated(leftover):
            taken = dict(chosen)
            inside = [j for j, _count in chosen if not piece[j]]
            for a, y1 in enumerate(inside):
                if swap_in(sizes[y1] + 1, sizes[y1] + leftover, allowed_of[y1], taken):
                    return True
                for y2 in inside[a:]:
                    if y1 == y2 and taken[y1] < 2:
                        continue
                    pair = sizes[y1] + sizes[y2]
                    if swap_in(pair, pair + leftover, allowed_of[y1] & allowed_of[y2], taken):
                        return True
            return False

        def walk(i, total, cost, need):
            # need: the smallest total that keeps waste within slack and the filling maximal
            rho = room - total
            if total >= need and min_forced[i] > rho and not (swappable and dominated(rho)):
                yield list(chosen), cost
            for k in range(i, n):
                if total + suffix[k] < need:
                    return
                sk = size[k]
                if sk > rho:
                    continue
                most = min(avail[k], rho // sk) if sk else avail[k]
                for c in range(most, 0, -1):
                    after = total + c * sk
                    floor = need
                    if c < avail[k] and forced[k]:
                        floor = max(floor, room - sk + 1)
                    if after + suffix[k + 1] < floor:
                        break  # fewer copies only fall further short
                    if not can_reach(k + 1, after, floor):
                        continue
                    chosen.append((cands[k], c))
                    yield from walk(k + 1, after, cost + c * cost_of[k], floor)
                    chosen.pop()
                if forced[k]:
                    # leaving all of group k out: what is left at the end must be below its size
                    need = max(need, room - sk + 1)

        top = size[0]
        most = min(avail[0], room // top) if top else avail[0]
        for c in range(most, 0, -1):
            need = room - slack
            if c < avail[0] and forced[0]:
                need = max(need, room - top + 1)
            if c * top + suffix[1] < need:
                break
            if not can_reach(1, c * top, need):
                continue
            chosen.append((first, c))
            yield from walk(1, c * top, c * cost_of[0], need)
            chosen.pop()


def _spread(groups, fillings):
    """Name the seats of each group onto the GPUs their group was packed on."""
    where = {}
    taken = [0] * len(groups.size)
    for b, filling in sorted(fillings, key=lambda item: item[0]):
        for j, c in filling:
            if groups.piece[j]:
                where.setdefault(groups.members[j][0], []).append(b)
                continue
            for name in groups.members[j][taken[j]:taken[j] + c]:
                where[name] = [b]
            taken[j] += c
    return where


def _max_weight_assignment(weights):
    """Row -> column of a maximum-weight perfect assignment (Hungarian method, O(n^3))."""
    n = len(weights)
    u = [0] * (n + 1)
    v = [0] * (n + 1)
    match = [0] * (n + 1)  # column -> row, 1-based; 0 = free
    way = [0] * (n + 1)
    for row in range(1, n + 1):
        match[0] = row
        col0 = 0
        minv = [_INFINITE] * (n + 1)
        used = [False] * (n + 1)
        while True:
            used[col0] = True
            row0 = match[col0]
            delta = _INFINITE
            col1 = 0
            for col in range(1, n + 1):
                if not used[col]:
                    cur = -weights[row0 - 1][col - 1] - u[row0] - v[col]
                    if cur < minv[col]:
                        minv[col] = cur
                        way[col] = col0
                    if minv[col] < delta:
                        delta = minv[col]
                        col1 = col
            for col in range(n + 1):
                if used[col]:
                    u[match[col]] += delta
                    v[col] -= delta
                else:
                    minv[col] -= delta
            col0 = col1
            if match[col0] == 0:
                break
        while col0:
            col1 = way[col0]
            match[col0] = match[col1]
            col0 = col1
    result = [0] * n
    for col in range(1, n + 1):
        result[match[col] - 1] = col - 1
    return result


class _Solver:
    def __init__(self, problem, node_limit):
        self.p = problem
        self.node_limit = node_limit
        self.limit = node_limit
        self.nodes = 0
        p = problem
        self.base = list(p.capacity)
        self.fixed = {}
        for seat in p.seats:
            if seat.pin is not None:
                for pos in seat.pin:
                    self.base[pos] -= seat.need
                self.fixed[seat.name] = list(seat.pin)
        self.loose = [s for s in p.seats if s.pin is None]
        self.singles = [s for s in self.loose if s.count == 1]
        self.multis = sorted((s for s in self.loose if s.count > 1),
                             key=lambda s: (-s.need, -s.count, s.name))
        self.feasibility_groups = _Groups(self.singles, self.multis)
        self.physical_groups = _Groups(self.singles, by_current=True)
        self.matching_groups = (self.feasibility_groups if not self.multis
                                else _Groups(self.singles))
        self.incumbent = None
        self.incumbent_cost = None

    def tick(self):
        self.nodes += 1
        if self.nodes > self.limit:
            raise _SearchBudgetSpent()

    # ---- bounds -------------------------------------------------------------------------
    def upper_bound(self):
        """The largest worst spare any assignment could reach, and the GPUs that bind it."""
        p = self.p
        usable = p.usable
        best, binding = None, []

        def consider(value, gpus):
            nonlocal best, binding
            if best is None or value < best:
                best, binding = value, gpus

        for pos in usable:
            consider(self.base[pos], [pos])
        # every seat must fit on GPUs it may use (its count-th roomiest for multi-GPU seats)
        for seat in self.loose:
            rooms = sorted(((self.base[pos], pos) for pos in usable if seat.allowed >> pos & 1),
                           reverse=True)
            room = rooms[seat.count - 1][0]
            consider(room - seat.need, [pos for _room, pos in rooms[:seat.count]])
        # Hall-type fluid bound: the seats confined to a set of GPUs must fit in it
        if len(usable) <= 12:
            subsets = (c for k in range(1, len(usable) + 1) for c in itertools.combinations(usable, k))
        else:
            subsets = iter([tuple(usable)])
        for subset in subsets:
            mask = sum(1 << pos for pos in subset)
            need = sum(s.need * s.count for s in self.loose if s.allowed & ~mask == 0)
            room = sum(self.base[pos] for pos in subset)
            consider((room - need) // len(subset), list(subset))
        return best, binding

    # ---- heuristics ---------------------------------------------------------------------
    def greedy(self):
        """Largest first onto the roomiest allowed GPU, then local improvement."""
        p = self.p
        load = {pos: 0 for pos in p.usable}
        where = {}
        for seat in self.multis + sorted(self.singles, key=lambda s: (-s.need, s.name)):
            rooms = sorted((self.base[pos] - load[pos], -pos) for pos in p.usable
                           if seat.allowed >> pos & 1)
            chosen = sorted(-neg for _room, neg in rooms[-seat.count:])
            for pos in chosen:
                load[pos] += seat.need
            where[seat.name] = chosen
        return self.rebalance(where)

    def rebalance(self, where):
        """Local search: re-split the seats of every pair of GPUs exactly (a subset-sum over
        their seats) so that the pair's worst spare is as large as it can be; repeat until no
        pair improves. A multi-GPU seat's piece takes part when its seat has no piece on the
        other GPU of the pair. Returns ``where``, changed."""
        p = self.p
        load = {pos: 0 for pos in p.usable}
        for seat in self.loose:
            for pos in where[seat.name]:
                load[pos] += seat.need
        pairs = list(itertools.combinations(p.usable, 2))
        improved = True
        rounds = 0
        while improved and rounds < _REBALANCE_ROUNDS:
            improved = False
            rounds += 1
            for a, b in pairs:
                if self._rebalance_pair(a, b, where, load):
                    improved = True
        return where

    def _rebalance_pair(self, a, b, where, load):
        # (seat, GPU it is on now) for each piece free to go to either GPU of the pair
        moving = []
        for seat in self.loose:
            gpus = where[seat.name]
            if (a in gpus) != (b in gpus):
                moving.append((seat, a if a in gpus else b))
        if not moving:
            return False
        on_a_now = sum(seat.need for seat, now in moving if now == a)
        total = sum(seat.need for seat, _now in moving)
        room_a = self.base[a] - load[a] + on_a_now  # spare of a without these pieces
        room_b = self.base[b] - load[b] + total - on_a_now
        before = min(room_a - on_a_now, room_b - (total - on_a_now))
        # reach[i]: bitset of the totals on a that the first i pieces allow (each goes where
        # its seat may run: a, b, or either)
        reach = [1]
        for seat, _now in moving:
            bits = reach[-1]
            to_a, to_b = seat.allowed >> a & 1, seat.allowed >> b & 1
            reach.append((bits << seat.need if to_a else 0) | (bits if to_b else 0))
        # min(room_a - x, room_b - total + x) peaks at x = (room_a - room_b + total) / 2:
        # the best total on a is the nearest reachable one on either side of the peak
        bits = reach[-1]
        peak = (room_a - room_b + total) // 2
        candidates = []
        if peak >= 0 and bits & ((2 << peak) - 1):
            candidates.append((bits & ((2 << peak) - 1)).bit_length() - 1)
        above = bits >> max(peak + 1, 0)
        if above:
            candidates.append(max(peak + 1, 0) + (above & -above).bit_length() - 1)
        best_x, best_value = None, before
        for x in candidates:
            value = min(room_a - x, room_b - (total - x))
            if value > best_value:
                best_x, best_value = x, value
        if best_x is None:
            return False
        # walk back through the prefix bitsets; a piece keeps its GPU when both would do
        x = best_x
        for i in range(len(moving) - 1, -1, -1):
            seat, now = moving[i]
            fits_a = seat.allowed >> a & 1 and x >= seat.need and reach[i] >> (x - seat.need) & 1
            fits_b = seat.allowed >> b & 1 and reach[i] >> x & 1
            target = a if fits_a and (now == a or not fits_b) else b
            if target == a:
                x -= seat.need
            if now != target:
                where[seat.name] = sorted(target if pos == now else pos for pos in where[seat.name])
                load[now] -= seat.need
                load[target] += seat.need
        return True

    def worst_of(self, where):
        load = {pos: 0 for pos in self.p.usable}
        for seat in self.loose:
            for pos in where[seat.name]:
                load[pos] += seat.need
        return min(self.base[pos] - load[pos] for pos in self.p.usable)

    def moves_of(self, where):
        moved = 0
        for seat in self.p.seats:
            gpus = self.fixed.get(seat.name) or where[seat.name]
            if seat.cur_mask != -1 and sum(1 << pos for pos in gpus) != seat.cur_mask:
                moved += 1
        return moved

    # ---- exact search -------------------------------------------------------------------
    def pack(self, worst):
        """An assignment whose worst spare is at least ``worst``, or None when there is none."""
        p = self.p
        residual = {pos: self.base[pos] - worst for pos in p.usable}
        if any(value < 0 for value in residual.values()):
            return None
        if sum(residual.values()) < sum(s.need * s.count for s in self.loose):
            return None
        groups = self.feasibility_groups
        fillings = _Packer(groups, residual, self, FEASIBLE, worst).run()
        return None if fillings is None else _spread(groups, fillings)

    def fewest_moves(self, worst, where, node_share=None):
        """Lower the moves of ``where`` (worst spare >= ``worst``) to the proven minimum.

        Returns the best assignment; raises _SearchBudgetSpent when the proof did not finish
        (``self.incumbent`` then holds the best found). PHYSICAL runs first on at most
        ``node_share`` nodes, then MATCHING on what is left of the budget.
        """
        self.incumbent = where
        self.incumbent_cost = self.moves_of(where)
        try:
            if node_share is not None:
                self.limit = min(self.node_limit, self.nodes + node_share)
            try:
                self._moves_search(worst, PHYSICAL)
                return self.incumbent
            except _SearchBudgetSpent:
                if self.limit >= self.node_limit:
                    raise
            self.limit = self.node_limit
            self._moves_search(worst, MATCHING)
            return self.incumbent
        finally:
            self.limit = self.node_limit

    def _moves_search(self, worst, mode):
        p = self.p
        pinned_moves = sum(1 for s in p.seats if s.pin is not None and s.cur_mask != -1
                           and sum(1 << pos for pos in s.pin) != s.cur_mask)
        residual = {pos: self.base[pos] - worst for pos in p.usable}
        groups = self.physical_groups if mode == PHYSICAL else self.matching_groups
        multi_where = {}

        def budget_left(cost):
            return self.incumbent_cost - pinned_moves - cost

        def place_multis(index, cost):
            if budget_left(cost) <= 0:
                return
            if index == len(self.multis):
                def on_better(single_where, single_cost):
                    where = dict((name, list(gpus)) for name, gpus in multi_where.items())
                    where.update(single_where)
                    self.incumbent = where
                    self.incumbent_cost = pinned_moves + cost + single_cost
                _Packer(groups, residual, self, mode, worst, on_better).run(budget_left(cost))
                return
            seat = self.multis[index]
            fits = [pos for pos in p.usable if seat.allowed >> pos & 1 and residual[pos] >= seat.need]
            # the GPU set it runs on now first: staying is free
            combos = sorted(itertools.combinations(fits, seat.count),
                            key=lambda combo: sum(1 << pos for pos in combo) != seat.cur_mask)
            for combo in combos:
                self.tick()
                step = int(seat.cur_mask != -1 and sum(1 << pos for pos in combo) != seat.cur_mask)
                for pos in combo:
                    residual[pos] -= seat.need
                multi_where[seat.name] = list(combo)
                place_multis(index + 1, cost + step)
                for pos in combo:
                    residual[pos] += seat.need
                del multi_where[seat.name]

        place_multis(0, 0)


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
    ``worst_spare_mib``, ``moves`` (seat names), ``optimal``, ``upper_bound_mib`` and
    ``search_nodes``. Raises PlacementError for bad input and PlacementInfeasible when no
    assignment leaves ``min_spare_mib`` on every GPU.
    """
    problem = _Problem(gpus, seats, min_spare_mib)
    solver = _Solver(problem, node_limit)
    if not problem.usable:
        return _result(problem, solver, {}, True, None)
    upper, binding = solver.upper_bound()
    _refuse_impossible(problem, solver, upper, binding, min_spare_mib)
    best = solver.greedy()
    lower = solver.worst_of(best)
    optimal = True
    try:
        high = upper
        while lower < high:
            # bisect while the gap is wide; near the top climb one MiB at a time, so that only
            # one hard proof (optimum + 1) is needed and it reuses the failures met on the way
            target = lower + 1 if high - lower <= _CLIMB_BAND else (lower + high + 1) // 2
            found = solver.pack(target)
            if found is None:
                high = target - 1
            else:
                best, lower = found, solver.worst_of(solver.rebalance(found))
    except _SearchBudgetSpent:
        optimal = False
    if lower < min_spare_mib:
        if optimal:
            _refuse_infeasible(problem, solver, best, lower, min_spare_mib)
        raise PlacementInfeasible(
            "the placement search spent its node budget (%d) before finding an assignment that "
            "leaves %d MiB on every GPU; the best found leaves %d MiB (raise the node limit)"
            % (node_limit, min_spare_mib, lower), [], min_spare_mib - lower, [])
    if optimal and solver.moves_of(best):
        keep = _keep_current(problem, solver, lower)
        if keep is not None and solver.moves_of(keep) < solver.moves_of(best):
            best = keep
        if solver.moves_of(best):
            try:
                best = solver.fewest_moves(lower, best, node_share=_PHYSICAL_SHARE)
            except _SearchBudgetSpent:
                best = solver.incumbent
                optimal = False
    return _result(problem, solver, best, optimal, upper)


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
        rooms = sorted((solver.base[pos] - load[pos], -pos) for pos in problem.usable
                       if seat.allowed >> pos & 1)
        chosen = sorted(-neg for _room, neg in rooms[-seat.count:])
        for pos in chosen:
            load[pos] += seat.need
        where[seat.name] = chosen
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
    # the Hall-type bound that binds: the same arithmetic as upper_bound(), pinned load first
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


def _result(problem, solver, where, optimal, upper):
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
        "upper_bound_mib": upper,
        "search_nodes": solver.nodes,
    }
