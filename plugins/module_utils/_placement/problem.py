# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The placement problem: validated GPUs (positions, capacities, kept clear) and seats (need,
pieces, pins, GPUs to avoid, where they run now), and the errors that refuse an input."""

from __future__ import annotations


class PlacementError(ValueError):
    """Input that cannot be placed; the message names the seat or GPU and what was expected."""


class PlacementInfeasible(PlacementError):
    """No assignment meets the constraints; carries the GPUs, the shortfall and the seats."""

    def __init__(self, message, gpus=(), shortfall_mib=0, seats=()):
        super().__init__(message)
        self.gpus = list(gpus)
        self.shortfall_mib = shortfall_mib
        self.seats = list(seats)


class SearchBudgetSpent(Exception):
    pass


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def gpu_refs(value):
    """None, one reference or a list of references, as a list of strings (None stays None)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


class Seat:
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


class Problem:
    """Validated input: GPU positions, capacities and the seats with their constraints."""

    def __init__(self, gpus, seats, min_spare_mib):
        errors = []
        if not is_int(min_spare_mib):
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
            if not is_int(capacity) or capacity < 0:
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
        if not is_int(need) or need < 0:
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

        pin_refs = gpu_refs(raw.get("gpu"))
        count = raw.get("gpu_count")
        if count is None:
            count = len(pin_refs) if pin_refs else 1
        if not is_int(count) or count < 1:
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
        current_refs = gpu_refs(raw.get("current_gpu"))
        current = resolve("current_gpu", current_refs) if current_refs is not None else None
        seat = Seat(name, need, count, pin, avoid, current)
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
