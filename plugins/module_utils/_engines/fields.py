# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""An engine's plan-seat fields as one declarative table: each row is ``(field, kind, flag)``,
the field's path in the plan seat (``launch.`` for what the render reads from the inventory),
the kind of value the plan writes there and the render is held to, and the command-line flag it
renders (None where it renders otherwise). The plan copies the ``launch.`` fields from the
inventory seat, the render checks every row before it writes a file, and an engine's release
check reads the flags: one table, three readers."""

from __future__ import annotations

import json

LAUNCH_PREFIX = "launch."


def _integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def plain_dict(value):
    """Whether ``value`` is a dict of plain JSON values with text keys (it renders as one argument)."""
    if not isinstance(value, dict):
        return False
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested deeper than Python recurses
        return False
    return all(isinstance(key, str) for key in value)


# kind -> (whether a value is of it, what the refusal says is expected)
KINDS = {
    "positive": (lambda v: _integer(v) and v > 0, "a positive integer"),
    "positive or null": (lambda v: v is None or _integer(v) and v > 0, "a positive integer or null"),
    "count": (lambda v: _integer(v) and v >= 0, "an integer from 0 up"),
    "fraction": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
                 "a number in (0, 1]"),
    "text": (lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "text or null": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "texts": (lambda v: v is None or isinstance(v, list) and all(isinstance(i, str) for i in v),
              "a list of strings"),
    "plain dict or null": (lambda v: v is None or plain_dict(v), "a dict of plain values or null"),
    "port or null": (lambda v: v is None or _integer(v) and 0 < v <= 65535, "a TCP port (1-65535)"),
}


def value_at(seat, field):
    """The value at ``field`` (``launch.model``) in a plan seat, or None."""
    value = seat
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def field_problems(table, seat):
    """``[(field, expected, value)]`` for each row of ``table`` whose value in ``seat`` is not of its kind."""
    problems = []
    for field, kind, _flag in table:
        valid, expected = KINDS[kind]
        value = value_at(seat, field)
        if not valid(value):
            problems.append((field, expected, value))
    return problems


def launch_fields(table):
    """The inventory fields the plan copies into the plan seat's ``launch``."""
    return tuple(field[len(LAUNCH_PREFIX):] for field, _kind, _flag in table if field.startswith(LAUNCH_PREFIX))


def field_flags(table):
    """``((inventory field, flag), ...)``: the inventory's fields (``launch.``) that each render a flag."""
    return tuple((field[len(LAUNCH_PREFIX):], flag) for field, _kind, flag in table
                 if flag and field.startswith(LAUNCH_PREFIX))


def flags_by_field(table):
    """``{field's last name: flag}`` for every row that renders a flag."""
    return {field.rsplit(".", 1)[-1]: flag for field, _kind, flag in table if flag}
