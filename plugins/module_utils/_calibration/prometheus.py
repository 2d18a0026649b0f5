# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A Prometheus server's instant and range queries over its HTTP API (``/api/v1/query``,
``/api/v1/query_range``), each bounded in time by the server's own ``timeout`` and a range in
points; the one HTTP client of the collection underneath."""

from __future__ import annotations

import math
import urllib.parse

from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Client, Unreachable, error_message
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# The wire waits this much longer than the server's own query timeout, so a slow query ends in the
# server's words ("query timed out") rather than in a socket timeout.
WIRE_GRACE_S = 5
# An error body is quoted at most this long: a proxy's HTML page is not an error message.
ERROR_CHARS = 300

# A Prometheus duration as this collection writes one into a query: a number and one unit.
DURATION_RE = lazy_regex(r"\A[1-9][0-9]{0,6}[smhdw]\Z")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# A range query asks for at most this many points per series: what a plot has room for.
RANGE_POINTS = 400


# The options every module that asks Prometheus takes (their docs: plugins/doc_fragments/_prometheus.py).
PROMETHEUS_OPTIONS = {
    "prometheus_url": {"type": "str", "required": True},
    "bearer_token": {"type": "str", "no_log": True},
    "timeout": {"type": "int", "default": 60},
    "validate_certs": {"type": "bool", "default": True},
}


class PrometheusError(ValueError):
    """A query the server refused or could not answer; the message says which and why."""


def duration_seconds(text, what):
    """``7d`` -> 604800; PrometheusError naming ``what`` for anything else."""
    if not isinstance(text, str) or not DURATION_RE.match(text):
        raise PrometheusError("%s: expected a duration such as 90s, 30m, 12h, 7d or 2w, got %r" % (what, text))
    return int(text[:-1]) * _SECONDS[text[-1]]


class Prometheus:
    """Instant queries to the server at ``url`` (optionally behind a bearer token)."""

    def __init__(self, url, token=None, timeout=60, validate_certs=True):
        try:
            self.client = Client(url.rstrip("/"), token, timeout=timeout + WIRE_GRACE_S, validate_certs=validate_certs)
        except ValueError as exc:
            raise PrometheusError("prometheus_url: %s" % exc) from None
        self.timeout = timeout

    def query(self, expr, at):
        """The instant vector of ``expr`` at the Unix time ``at``: ``[(labels, value)]``."""
        data = self._ask("/api/v1/query", expr, {"time": "%.3f" % at})
        if data.get("resultType") == "scalar":
            return [({}, float(data["result"][1]))]
        return [(item.get("metric") or {}, float(item["value"][1])) for item in data.get("result") or []]

    def query_range(self, expr, start, end):
        """``expr`` from ``start`` to ``end`` in range_step() steps: ``[(labels, [(time, value)])]``,
        NaN samples left out. ``{step}`` in ``expr`` is the step in seconds, so that
        ``max_over_time(...[{step}s])`` keeps each step's peak."""
        step = range_step(start, end)
        expr = expr.replace("{step}", str(step))
        data = self._ask("/api/v1/query_range", expr, {"start": "%.3f" % start, "end": "%.3f" % end, "step": "%ds" % step})
        series = []
        for item in data.get("result") or []:
            points = [(float(when), float(value)) for when, value in item.get("values") or []]
            series.append((item.get("metric") or {}, [(when, value) for when, value in points if not math.isnan(value)]))
        return series

    def _ask(self, endpoint, expr, params):
        """The ``data`` of the server's answer to ``expr`` at ``endpoint``."""
        path = endpoint + "?" + urllib.parse.urlencode(
            dict(params, query=expr, timeout="%ds" % max(1, int(self.timeout))))
        try:
            status, reply = self.client.call_json("GET", path)
        except Unreachable as exc:
            raise PrometheusError(str(exc)) from None
        if not isinstance(reply, dict) or "status" not in reply:
            raise PrometheusError("%s is not a Prometheus server's API (HTTP %d, %s)" % (
                self.client.root, status, _quoted(error_message(str(reply)))))
        if status != 200 or reply.get("status") != "success":
            raise PrometheusError("the query %s was refused (HTTP %d): %s" % (expr, status, _quoted(reply.get("error"))))
        return reply.get("data") or {}

    def value(self, expr, at):
        """The single value of ``expr`` at ``at``, or None when it has no sample (NaN is None)."""
        found = self.query(expr, at)
        if not found or found[0][1] != found[0][1]:
            return None
        return found[0][1]


def range_step(start, end):
    """The step, in whole seconds, of a range from ``start`` to ``end`` in at most RANGE_POINTS."""
    return max(1, math.ceil((end - start) / RANGE_POINTS))


def unix_time(value, what):
    """``value`` as a time in Unix seconds, or PrometheusError naming ``what``: .inf would never
    come, and .nan compares false with every sample."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PrometheusError("%s: expected a time in Unix seconds (a finite number > 0), got %r" % (what, value))
    return float(value)


def connect(params):
    """The Prometheus of a module's validated PROMETHEUS_OPTIONS."""
    if params["timeout"] < 1:
        raise PrometheusError("timeout: expected whole seconds >= 1, got %r" % params["timeout"])
    return Prometheus(params["prometheus_url"], params.get("bearer_token"), params["timeout"], params["validate_certs"])


def aligned(rows):
    """Rows of cells as lines of the operator's log, each column as wide as its widest cell."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _quoted(text):
    """An error text on one line, at most ERROR_CHARS long."""
    text = " ".join(str(text).split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + "..."
