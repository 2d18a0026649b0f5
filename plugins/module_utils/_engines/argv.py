# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The one way the collection reads a server's command line back (a container's arguments, a
process's argv), as the servers' own argparse reads it:

- ``--flag value`` and ``--flag=value`` are the same flag;
- a flag given twice takes its last value (argparse stores each occurrence over the last);
- a flag followed by another flag has no value; a negative number (``-1``) is a value, not a
  flag (argparse's rule for a parser with no option that looks like a number);
- everything after ``--`` is positional.

Which flags take several values is the caller's to say (``many``); the spelling of a flag
(abbreviations, underscores, short aliases) is the engine's (``vllm.plan_flag``).
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

_NEGATIVE_NUMBER = lazy_regex(r"\A-\d+\Z|\A-\d*\.\d+\Z")


def _is_flag(arg):
    return arg.startswith("-") and arg != "-" and not _NEGATIVE_NUMBER.match(arg)


def split_flags(args, many=None):
    """``([(flag, [values])], positionals)`` of ``args``, every occurrence in order: a flag's
    values are the one after it (or after its ``=``), or every argument up to the next flag
    where ``many(flag)`` says it takes several; a flag followed by another flag has none."""
    pairs, positionals, position = [], [], 0
    while position < len(args):
        arg = args[position]
        position += 1
        if arg == "--":
            positionals.extend(args[position:])
            break
        if not _is_flag(arg):
            positionals.append(arg)
            continue
        flag, has_value, value = arg.partition("=")
        values = [value] if has_value else []
        takes_many = many is not None and many(flag)
        while not has_value and position < len(args) and not _is_flag(args[position]):
            values.append(args[position])
            position += 1
            if not takes_many:
                break
        pairs.append((flag, values))
    return pairs, positionals


def flag_value(args, flag):
    """The value the server takes for ``flag`` (spelled exactly so) from ``args``: its last
    occurrence's, in either form; None when it is absent or its last occurrence has no value."""
    value = None
    for name, values in split_flags(args)[0]:
        if name == flag:
            value = values[0] if values else None
    return value
