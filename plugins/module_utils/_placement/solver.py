# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The search for the optimum: a greedy start improved by pairwise re-splits, bisection and a
climb on the worst spare, then the fewest moves by branch and bound (see the package docstring)."""

from __future__ import annotations

import functools
import itertools

from ansible_collections.llmfleet.seats.plugins.module_utils._placement.packer import (
    FEASIBLE,
    MATCHING,
    PHYSICAL,
    Groups,
    Packer,
    spread,
)

# passes over all GPU pairs in the local searches
_REBALANCE_ROUNDS = 20
# the seats and usable GPUs a search node may look at for one step of the budget
_SEATS_PER_STEP = 16
_GPUS_PER_STEP = 8
# MiB: below this gap between the bounds the search climbs instead of bisecting
_CLIMB_BAND = 32
# the most one-GPU seats on a pair of GPUs that the moves local search re-splits (it keeps up
# to one state per total, at most 2 ** seats)
_KEEP_PAIR_SEATS = 16


class SearchBudgetSpent(Exception):
    pass


class Solver:
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
        # the search order, whatever order the seats come in
        self.loose = sorted((s for s in p.seats if s.pin is None), key=lambda s: (-s.need, s.name))
        self.singles = [s for s in self.loose if s.count == 1]
        self.multis = sorted((s for s in self.loose if s.count > 1),
                             key=lambda s: (-s.need, -s.count, s.name))
        self.feasibility_groups = Groups(self.singles, self.multis)
        self.physical_groups = Groups(self.singles, by_current=True)
        self.matching_groups = (self.feasibility_groups if not self.multis
                                else Groups(self.singles))
        self.incumbent = None
        self.incumbent_cost = None
        # a node's work grows with the seats and GPUs it looks at, so a larger host counts a
        # node as several steps and the budget keeps to about the same time
        self.step = (max(1, -(-len(self.loose) // _SEATS_PER_STEP))
                     * max(1, -(-len(p.usable) // _GPUS_PER_STEP)))

    def tick(self):
        self.nodes += self.step
        if self.nodes > self.limit:
            raise SearchBudgetSpent()

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
        # fluid bound: the seats confined to a set of GPUs must fit in it
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

    def large_seats_bound(self):
        """Pigeonhole bound (pairs of large seats, generalised): of the k * m + 1 largest pieces
        on m GPUs some GPU holds k + 1, so at least the k + 1 smallest of them."""
        usable = self.p.usable
        pieces = sorted((s.need for s in self.loose for _piece in range(s.count)), reverse=True)
        room = best = max(self.base[pos] for pos in usable)
        per_gpu = 1
        while per_gpu * len(usable) < len(pieces):
            top = per_gpu * len(usable)
            best = min(best, room - sum(pieces[top - per_gpu:top + 1]))
            per_gpu += 1
        return best

    # ---- heuristics ---------------------------------------------------------------------
    def greedy(self):
        """Largest first onto the roomiest allowed GPU, then local improvement."""
        p = self.p
        load = {pos: 0 for pos in p.usable}
        where = {}
        for seat in self.multis + sorted(self.singles, key=lambda s: (-s.need, s.name)):
            self.place_on_roomiest(seat, load, where)
        return self.rebalance(where)

    def place_on_roomiest(self, seat, load, where):
        """Put ``seat`` on the GPUs it may use with the most room left (a piece on each)."""
        rooms = sorted((self.base[pos] - load[pos], -pos) for pos in self.p.usable
                       if seat.allowed >> pos & 1)
        chosen = sorted(-neg for _room, neg in rooms[-seat.count:])
        for pos in chosen:
            load[pos] += seat.need
        where[seat.name] = chosen

    def rebalance(self, where):
        """Local search: re-split the seats of every pair of GPUs exactly (a subset-sum over
        their seats) so that the pair's worst spare is as large as it can be; repeat until no
        pair improves. A multi-GPU seat's piece takes part when its seat has no piece on the
        other GPU of the pair. Returns ``where``, changed."""
        return self._pair_by_pair(where, self._rebalance_pair)

    def _pair_by_pair(self, where, improve):
        """Run ``improve(a, b, where, load)`` on every pair of usable GPUs, round after round,
        until no pair improves (at most _REBALANCE_ROUNDS rounds); ``where`` changes in place."""
        load = {pos: 0 for pos in self.p.usable}
        for seat in self.loose:
            for pos in where[seat.name]:
                load[pos] += seat.need
        pairs = list(itertools.combinations(self.p.usable, 2))
        improved = True
        rounds = 0
        while improved and rounds < _REBALANCE_ROUNDS:
            improved = False
            rounds += 1
            for a, b in pairs:
                if improve(a, b, where, load):
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

    def keep_more(self, worst, where):
        """Local search on moves: re-split the one-GPU seats of every pair of GPUs so that the
        most of them run where they run now, every GPU keeping ``worst`` spare; repeat until no
        pair improves. Returns ``where``, changed."""
        return self._pair_by_pair(where, functools.partial(self._keep_pair, worst))

    def _keep_pair(self, worst, a, b, where, load):
        moving = [seat for seat in self.singles if where[seat.name][0] in (a, b)]
        if not moving or len(moving) > _KEEP_PAIR_SEATS:
            return False
        on_a_now = sum(seat.need for seat in moving if where[seat.name][0] == a)
        total = sum(seat.need for seat in moving)
        room_a = self.base[a] - worst - load[a] + on_a_now
        room_b = self.base[b] - worst - load[b] + total - on_a_now
        kept_now = sum(seat.cur_mask == 1 << where[seat.name][0] for seat in moving)
        # total on a -> (seats that stay, the seats sent to a as a bitmask); the first found
        # of equal merit wins, so the answer is deterministic
        states = {0: (0, 0)}
        left = total
        for index, seat in enumerate(moving):
            left -= seat.need
            grown = {}
            for on_a, (kept, to_a) in states.items():
                for go_a in (False, True):
                    pos = a if go_a else b
                    if not seat.allowed >> pos & 1:
                        continue
                    after = on_a + seat.need if go_a else on_a
                    # a must not overflow, and b must still be able to stay within its room
                    if after > room_a or total - after - left > room_b:
                        continue
                    merit = (kept + (seat.cur_mask == 1 << pos), to_a | (go_a << index))
                    if after not in grown or merit[0] > grown[after][0]:
                        grown[after] = merit
            states = grown
        best = max(states.values(), key=lambda merit: merit[0], default=None)
        if best is None or best[0] <= kept_now:
            return False
        for index, seat in enumerate(moving):
            target = a if best[1] >> index & 1 else b
            now = where[seat.name][0]
            if now != target:
                where[seat.name] = [target]
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
    def raise_worst(self, best, lower, high):
        """Raise the worst spare ``lower`` of ``best`` towards ``high`` (no placement beats it)
        within ``self.limit`` nodes. Returns the best assignment, its worst spare and the bound,
        lowered by every target proven impossible."""
        until = self.limit
        ceiling = high  # the targets still worth a try: a spent budget lowers it, not the bound
        try:
            while lower < ceiling and self.nodes < until:
                wide = ceiling - lower > _CLIMB_BAND
                # bisect while the gap is wide, each target on half of what is left so that a
                # hard one leaves room for lower ones; near the top climb one MiB at a time, so
                # that only one hard proof (optimum + 1) is needed and it reuses the failures
                # met on the way
                if wide:
                    target = (lower + ceiling + 1) // 2
                    self.limit = self.nodes + max((until - self.nodes) // 2, 1)
                else:
                    target = lower + 1
                    self.limit = until
                try:
                    found = self.pack(target)
                except SearchBudgetSpent:
                    ceiling = target - 1
                    continue
                if found is None:
                    high = ceiling = target - 1
                else:
                    best = self.rebalance(found)
                    lower = self.worst_of(best)
        finally:
            self.limit = until
        return best, lower, high

    def pack(self, worst):
        """An assignment whose worst spare is at least ``worst``, or None when there is none."""
        p = self.p
        residual = {pos: self.base[pos] - worst for pos in p.usable}
        if any(value < 0 for value in residual.values()):
            return None
        if sum(residual.values()) < sum(s.need * s.count for s in self.loose):
            return None
        groups = self.feasibility_groups
        fillings = Packer(groups, residual, self, FEASIBLE, worst).run()
        return None if fillings is None else spread(groups, fillings)

    def fewest_moves(self, worst, where, node_share=None):
        """Lower the moves of ``where`` (worst spare >= ``worst``) to the proven minimum.

        Returns the best assignment; raises SearchBudgetSpent when the proof did not finish
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
            except SearchBudgetSpent:
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
                Packer(groups, residual, self, mode, worst, on_better).run(budget_left(cost))
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
