# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Checking what an operator wrote: every problem is collected, not just the first, and each
names the host, where in the inventory (a seat and its variable, a GPU, a variable), the field,
what was expected and what was found. Every text is matched whole against its grammar, so
nothing an inventory says can reach a file, a path or a command line as something else."""

from __future__ import annotations

import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    CONTROL_RE,
    HOST_NAME_RE,
    REDACTED,
    SECRET_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import SizeError, human_bytes, to_bytes

_BARE_NUMBER_RE = lazy_regex(r"\A\s*[0-9]+\s*\Z")
# The longest single argument or environment string Linux passes to a process
# (MAX_ARG_STRLEN): a longer value could never start the seat ("Argument list too long").
VALUE_MAX_BYTES = 128 * 1024


class Checker:
    def __init__(self, host):
        # a host name outside its grammar is shown quoted, so a message stays one line
        self.host = host if host is None or (isinstance(host, str) and HOST_NAME_RE.match(host)) else repr(host)
        self.errors = []

    def fail(self, where, field, expected, got):
        """``where.field`` (or ``where`` alone when ``field`` is None) was not what was expected."""
        name = where if field is None else "%s.%s" % (where, field)
        self.errors.append("host %s: %s: expected %s, got %s" % (self.host, name, expected, _shown(got)))

    def problem(self, where, text, got=None):
        """A problem in words; ``got`` (shown as fail shows it) is appended as ", got ..."."""
        self.errors.append("host %s: %s: %s%s" % (self.host, where, text,
                                                  "" if got is None else ", got %s" % _shown(got)))

    def integer(self, where, field, value, minimum, maximum=None):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
                maximum is not None and value > maximum):
            self.fail(where, field, "an integer from %d%s" % (minimum, " to %d" % maximum if maximum else " up"), value)
            return None
        return value

    def positive_int(self, where, field, value, maximum=None):
        return self.integer(where, field, value, 1, maximum)

    def number(self, where, field, value, minimum=0, exclusive=True, maximum=None):
        """A finite number above (or from) ``minimum``, at most ``maximum``; .inf and .nan are refused."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
                value <= minimum if exclusive else value < minimum) or (maximum is not None and value > maximum):
            self.fail(where, field, "a finite number %s %s%s" % (
                ">" if exclusive else ">=", minimum, "" if maximum is None else " and <= %s" % maximum), value)
            return None
        return value

    def text(self, where, field, value, pattern=None, expected="a non-empty string"):
        """A string without control characters, matching ``pattern`` whole when one is given."""
        if not isinstance(value, str) or not value.strip() or CONTROL_RE.search(value) or (
                pattern is not None and not pattern.match(value)):
            self.fail(where, field, expected + (", on one line" if pattern is None else ""), value)
            return None
        if too_long(value):
            self.fail(where, field, "at most %d bytes (the longest value a process is given)" % VALUE_MAX_BYTES,
                      "%d bytes" % len(value.encode("utf-8")))
            return None
        return value

    def size(self, where, field, value, smallest=None):
        """Bytes from a size as written (``22GiB``, ``8G``, a byte count). With ``smallest``, a
        smaller size is refused: a bare ``3840`` meant as MiB is 3,840 bytes."""
        try:
            size = to_bytes(value, where if field is None else "%s.%s" % (where, field))
        except SizeError as exc:
            self.errors.append("host %s: %s" % (self.host, exc))
            return None
        if smallest is not None and size < smallest:
            hint = "; did you mean %sMiB?" % str(value).strip() if _is_bare(value) else ""
            self.fail(where, field, "at least %s (sizes take a unit, e.g. 22GiB or 3840MiB)%s"
                      % (human_bytes(smallest), hint), value)
            return None
        return size

    def string_list(self, where, field, value, pattern=None, expected="non-empty strings"):
        if not isinstance(value, list) or not all(
                isinstance(item, str) and item and not CONTROL_RE.search(item) and (
                    pattern is None or pattern.match(item)) for item in value):
            self.fail(where, field, "a list of %s without control characters" % expected, value)
            return None
        longest = max(value, key=len, default="")
        if too_long(longest):
            self.fail(where, field, "items of at most %d bytes (the longest value a process is given)"
                      % VALUE_MAX_BYTES, "an item of %d bytes" % len(longest.encode("utf-8")))
            return None
        return list(value)


def seconds_problem(name, value, zero_means=None):
    """Why ``value`` cannot be option ``name``'s seconds, in one line, or None when it can: a
    finite number above 0, or 0 too when ``zero_means`` says what 0 does. An endless wait is
    refused here: .inf would hold a window, and .nan compares false with every deadline."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
            value < 0 if zero_means else value <= 0):
        return "%s: expected a finite number of seconds %s, got %r" % (
            name, ">= 0 (0: %s)" % zero_means if zero_means else "> 0", value)
    return None


def seconds_problems(*options):
    """Every ``(name, value[, zero_means])`` that seconds_problem refuses, in one line, or None."""
    problems = [seconds_problem(*option) for option in options]
    return "; ".join(problem for problem in problems if problem) or None


def too_long(text):
    """Whether ``text`` is longer than any single argument or variable a process can be given."""
    return len(text) > VALUE_MAX_BYTES // 4 and len(text.encode("utf-8")) > VALUE_MAX_BYTES


def _is_bare(value):
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and _BARE_NUMBER_RE.match(value) is not None)


def _shown(got):
    """What an error shows of a value: its repr, cut short; a secret never (a value under a
    name that looks like one is replaced, however deep)."""
    if got is REDACTED:
        return REDACTED
    text = repr(_without_secret_values(got))
    return text if len(text) <= 120 else text[:117] + "..."


# How deep a shown value is followed: an inventory can nest deeper than Python recurses.
_SHOWN_DEPTH = 8


def _without_secret_values(value, depth=0):
    if isinstance(value, (dict, list)) and depth >= _SHOWN_DEPTH:
        return "..."
    if isinstance(value, dict):
        return {key: REDACTED if isinstance(key, str) and SECRET_NAME_RE.search(key)
                else _without_secret_values(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_secret_values(item, depth + 1) for item in value]
    return value


def without_text(value, depth=0):
    """``value`` with every string but a dict's key replaced by ``<secret>``, at any depth: what
    an error may show of a field it cannot tell is no secret."""
    if isinstance(value, (dict, list)) and depth >= _SHOWN_DEPTH:
        return "..."
    if isinstance(value, dict):
        return {key: without_text(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [without_text(item, depth + 1) for item in value]
    return REDACTED if isinstance(value, str) else value
