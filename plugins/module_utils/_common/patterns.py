# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Regular expressions compiled when first used.

Every module run on a GPU host imports the engines, and their boot-log readers hold some sixty
patterns: compiled at import, they were two fifths of the engines' import time (about 7 ms a
run), for runs that mostly never read a log. ``lazy_regex(source)`` stands where
``re.compile(source)`` would in a module's constants, and answers as the compiled pattern does.
"""

from __future__ import annotations

import re


class _Pattern:
    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, source, flags):
        self._source, self._flags, self._compiled = source, flags, None

    def __getattr__(self, name):
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return getattr(self._compiled, name)


def lazy_regex(source, flags=0):
    """``re.compile(source, flags)``, done the first time the pattern is used."""
    return _Pattern(source, flags)
