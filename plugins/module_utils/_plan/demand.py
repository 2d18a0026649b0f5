# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A demand snapshot read back for the plan: what playbooks/calibrate.yml measured per seat
(seat_demand's figures), so a seat whose inventory says ``kv_sizing: demand`` is sized from its
peak, and every seat with figures shows the budget its demand needs beside the rule's.

A snapshot is a file anyone may edit: every figure the plan reads is checked here, and a
snapshot recorded on another host is refused unless the operator accepts it by name."""

from __future__ import annotations

import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import ReadCapError, load_json
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import DEMAND_SNAPSHOT_FORMAT

VARIABLE = "llmfleet_demand_snapshot"


class DemandSnapshotError(ValueError):
    """A snapshot the plan cannot use; the message names the variable and what is wrong."""


def _count(value):
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def _figures(name, seat):
    """The figures of one seat the plan reads, checked; the message says which is wrong."""
    problems = []
    for field in ("peak_kv_tokens", "requests"):
        if seat.get(field) is not None and not _count(seat[field]):
            problems.append("%s: expected a count >= 0, got %r" % (field, seat[field]))
    usage = seat.get("peak_kv_usage")
    if usage is not None and (isinstance(usage, bool) or not isinstance(usage, (int, float))
                              or not math.isfinite(usage) or not 0 <= usage <= 1):
        problems.append("peak_kv_usage: expected a share from 0 to 1, got %r" % (usage,))
    runaways = seat.get("runaways")
    if runaways is not None and (not isinstance(runaways, dict) or not all(
            _count(runaways.get(key)) for key in ("longer_than", "replies"))):
        problems.append("runaways: expected {longer_than, replies} counts, got %r" % (runaways,))
    detail = seat.get("detail")
    if detail is not None and not isinstance(detail, str):
        problems.append("detail: expected text, got %r" % (detail,))
    if problems:
        raise DemandSnapshotError("%s: seat %s: %s" % (VARIABLE, name, "; ".join(problems)))
    return {key: seat.get(key) for key in ("peak_kv_tokens", "peak_kv_usage", "requests", "runaways", "detail")}


def read_demand(path, host, accepted_host=None):
    """``{seat: figures}`` from the demand snapshot at ``path`` for ``host``."""
    try:
        document = load_json(path)
    except (OSError, ReadCapError, ValueError) as exc:
        raise DemandSnapshotError("%s: cannot read %s: %s" % (VARIABLE, path, getattr(exc, "strerror", None) or exc)) \
            from None
    if not isinstance(document, dict) or document.get("format") != DEMAND_SNAPSHOT_FORMAT \
            or not isinstance(document.get("seats"), list):
        raise DemandSnapshotError("%s: %s is not a demand snapshot (expected the format %s that "
                                  "playbooks/calibrate.yml writes)" % (VARIABLE, path, DEMAND_SNAPSHOT_FORMAT))
    recorded_on = document.get("host")
    if recorded_on != host and recorded_on != accepted_host:
        raise DemandSnapshotError("%s: %s was measured for host %r, not %s; give this host's, or "
                                  "llmfleet_plan_accept.snapshot_host: %s to use it on purpose"
                                  % (VARIABLE, path, recorded_on, host, recorded_on))
    figures = {}
    for seat in document["seats"]:
        name = seat.get("seat") if isinstance(seat, dict) else None
        if not isinstance(name, str) or not name:
            raise DemandSnapshotError("%s: %s: expected each seat's figures with its name (seat), got %r"
                                      % (VARIABLE, path, seat))
        figures[name] = _figures(name, seat)
    return figures
