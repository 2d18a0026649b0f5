# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Reading a file an inventory names, bounded before anything is parsed: a regular file, at most
so many bytes, JSON nested at most so deep. ``/dev/zero`` or a document of a million brackets
is refused in one line instead of exhausting the controller."""

from __future__ import annotations

import json
import os
import re
import stat

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB, human_bytes

# A model's config.json, a radiance profile or a gpu_info snapshot is kilobytes; 16 MiB is
# far beyond any of them and still nothing to the controller's memory.
MAX_JSON_BYTES = 16 * MIB
# The deepest nesting any of them has is a handful of levels.
MAX_JSON_DEPTH = 64
_STRING_RE = lazy_regex(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET_RE = lazy_regex(r"[\[\]{}]")


class ReadCapError(ValueError):
    """A file that is not a regular file, or larger or deeper than the bound; the message says
    which bound."""


def read_capped(path, limit):
    """The bytes of the regular file ``path``, refused when it holds more than ``limit``.
    OSError (missing, unreadable) is the caller's to word."""
    with open(path, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ReadCapError("expected a regular file (a device, pipe or socket is never read)")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ReadCapError("larger than %s, the most it reads of such a file" % human_bytes(limit))
    return data


def load_json(path, limit=MAX_JSON_BYTES, max_depth=MAX_JSON_DEPTH, parse_constant=None):
    """The JSON document in ``path`` within both bounds. ReadCapError for a bound,
    UnicodeDecodeError/ValueError for what is not JSON, OSError for what cannot be read."""
    text = read_capped(path, limit).decode("utf-8")
    return loads_bounded(text, max_depth, parse_constant)


def loads_bounded(text, max_depth=MAX_JSON_DEPTH, parse_constant=None):
    """``json.loads`` refusing a document nested deeper than ``max_depth``, checked on the text
    before the parser recurses into it."""
    if _depth(text) > max_depth:
        raise ReadCapError("nested deeper than %d levels, the most it reads" % max_depth)
    return json.loads(text, parse_constant=parse_constant)


def _depth(text):
    """The deepest bracket nesting of a JSON text (brackets inside strings not counted)."""
    depth = deepest = 0
    for bracket in _BRACKET_RE.findall(_STRING_RE.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def value_depth(value):
    """How deep a parsed value (dicts and lists) nests, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
    return deepest
