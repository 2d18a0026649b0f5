# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""radiance's funding formula and pinned-RAM ledger as a Jinja filter: a thin wrapper over
plugins/module_utils/_sizing/radiance (the function the radiance_budget module runs)."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.radiance import (
    RADIANCE_BUDGET_SPEC,
    RadianceError,
    radiance_budget as _radiance_budget,
)
from ansible_collections.llmfleet.seats.plugins.plugin_utils._filters import operator_errors


def radiance_budget(terms, **more):
    """The radiance_budget module's result for its arguments, given as a dict (and/or keywords)."""
    if not isinstance(terms, dict):
        raise RadianceError("radiance_budget", "a dict of the module's arguments", terms)
    terms = dict(terms, **more)
    unknown = sorted(set(terms) - set(RADIANCE_BUDGET_SPEC), key=str)
    if unknown:
        raise RadianceError(unknown[0], "one of %s (unknown argument)" % ", ".join(sorted(RADIANCE_BUDGET_SPEC)),
                            terms[unknown[0]])
    missing = sorted(name for name, spec in RADIANCE_BUDGET_SPEC.items() if spec.get("required") and name not in terms)
    if missing:
        raise RadianceError(missing[0], "a value (required)", None)
    given = {name: spec["default"] for name, spec in RADIANCE_BUDGET_SPEC.items() if "default" in spec}
    given.update(terms)
    return _radiance_budget(given)


class FilterModule:
    def filters(self):
        return {"radiance_budget": operator_errors(radiance_budget)}
