# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Packing seats onto GPUs for a target worst spare: identical seats grouped, bin completion with
maximal fillings and dominance, the bounds that cut the search, and the maximum-weight
assignment that maps a packing onto the real GPUs (see the package docstring)."""

from __future__ import annotations

import bisect

INFINITE = float("inf")
# fillings of one GPU sorted before trying them; the rest follow in the order they come
_SORTED_FILLINGS = 512
# What a packing search is for: any packing, or the fewest moves over the real GPUs or over
# GPUs up to symmetry (Packer's docstring).
FEASIBLE, PHYSICAL, MATCHING = "feasible", "physical", "matching"


def single_current(seat):
    """-1: a new seat; a GPU position: where it runs now and may stay; -2: it moves anyway
    (it ran on several GPUs, or where it may no longer run)."""
    if seat.cur_mask == -1:
        return -1
    if seat.cur_mask & (seat.cur_mask - 1) == 0 and seat.cur_mask & seat.allowed:
        return seat.cur_mask.bit_length() - 1
    return -2


class Groups:
    """Seats to pack, merged into groups of interchangeable seats, largest first.

    One-GPU seats with the same need and allowed GPUs form one group (and, ``by_current``, the
    same current GPU). A multi-GPU seat given in ``multis`` is a group of its own: one *piece*
    per GPU it needs, at most one piece on a GPU.
    """

    def __init__(self, singles, multis=(), by_current=False):
        keyed = {}
        for seat in singles:
            cur = single_current(seat) if by_current else -1
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
                cur = single_current(seat)
                if cur != -1:
                    counted += 1
                if cur >= 0:
                    stay.setdefault(cur, []).append(seat.name)
            self.stay_on.append(stay)
            self.counted.append(counted)
        self.neutral = [not stay for stay in self.stay_on]
        # states proven unpackable, keyed on this grouping: state -> lowest worst spare seen
        self.failed = {}


class Packer:
    """Bin completion over fixed GPU residuals.

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
        if g.failed.get(key, INFINITE) <= self.worst:
            return False
        open_set = set(still_open)
        if mode == PHYSICAL:
            if self.best_cost is not None and cost + self._lower_bound(rem, open_set) >= self.best_cost:
                return False
            budget = INFINITE if self.best_cost is None else self.best_cost - cost
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
            proven = INFINITE if self.best_cost is None else self.best_cost - cost
            if proven > self.memo.get(key, -1):
                self.memo[key] = proven
        # no packing at all below this state (nothing reached, nothing cut by a cost bound;
        # PHYSICAL cuts on cost in several places and keeps its own memo instead)
        if mode != PHYSICAL and self.leaves == leaves and self.cuts == cuts and not found:
            if g.failed.get(key, INFINITE) > self.worst:
                g.failed[key] = self.worst
        return found

    def _ordered(self, fillings, b):
        """Cheapest, then fullest fillings first (value ordering); for MATCHING, those
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
                self.on_better(spread(self.g, self.best), cost)
            return True
        # MATCHING: map the packed GPUs onto the real ones, class by class
        filling_of = dict(path)
        on_gpu = {}
        stayers = 0
        for members in self.classes.values():
            weights = [[self._stay_weight(filling_of.get(b, ()), gpu) for gpu in members]
                       for b in members]
            for row, col in enumerate(max_weight_assignment(weights)):
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

        # Swap dominance, FEASIBLE only: a filling where one seat, or two,
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


def spread(groups, fillings):
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


def max_weight_assignment(weights):
    """Row -> column of a maximum-weight perfect assignment (Hungarian method, O(n^3))."""
    n = len(weights)
    u = [0] * (n + 1)
    v = [0] * (n + 1)
    match = [0] * (n + 1)  # column -> row, 1-based; 0 = free
    way = [0] * (n + 1)
    for row in range(1, n + 1):
        match[0] = row
        col0 = 0
        minv = [INFINITE] * (n + 1)
        used = [False] * (n + 1)
        while True:
            used[col0] = True
            row0 = match[col0]
            delta = INFINITE
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
