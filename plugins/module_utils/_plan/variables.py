# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A host's variables of the collection's own prefixes that the collection does not know: a
misspelt ``llmfleet_kv_facter`` would otherwise leave the default in force without a word.

The known names are what the collection reads (its roles' argument specs, defaults and tasks,
and its playbooks), gathered by the caller; this module only compares."""

from __future__ import annotations

import difflib

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# The prefixes the collection owns in an inventory: llmfleet_* (the fleet as data) and the
# roles' own seat_<role>_*.
OWN_VARIABLE_RE = lazy_regex(r"\A(llmfleet|seat)_[A-Za-z0-9_]+\Z")
# How a variable name appears in the collection's YAML.
VARIABLE_NAME_RE = lazy_regex(r"\b(?:llmfleet|seat)_[a-z0-9_]*[a-z0-9]\b")


def unknown_variables(check, names, known):
    """One problem in ``check`` per name of an own prefix that ``known`` lacks, with the nearest
    known name when one is close."""
    known = sorted(set(known))
    for name in sorted({name for name in names if isinstance(name, str)}):
        if not OWN_VARIABLE_RE.match(name) or name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        hint = "did you mean %s?" % close[0] if close else "no variable of llmfleet.seats has this name"
        check.problem(name, "unknown variable of llmfleet.seats (%s); expected a variable that "
                      "docs/inventory.md or a role's argument spec names" % hint)
