# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A gate's record, as every stage that judges something writes it:
``{"seat", "gate", "ok", "measured", "expected", "detail"}``, where the detail is the gate as
a sentence with both numbers in it."""

from __future__ import annotations


def gate(seat, name, ok, measured, expected, detail):
    return {"seat": seat, "gate": name, "ok": bool(ok), "measured": measured,
            "expected": expected, "detail": detail}


def failed(gates):
    return [g for g in gates if not g["ok"]]


def summary(gates):
    """One line per failed gate, for a module's failure message."""
    return "; ".join("%s %s: %s" % (g["seat"], g["gate"], g["detail"]) for g in failed(gates))


def num(value):
    """An integer with thousands separators; ? when there is none."""
    return "?" if value is None else "{:,}".format(value)


def unreadable(seat, name, why):
    """The failed gate ``name`` of a seat whose boot log could not be read: ``why``."""
    return gate(seat["name"], name, False, None, "readable", "container %s: %s" % (seat["container"], why))
