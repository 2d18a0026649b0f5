# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A Beszel hub's system stats over its API (PocketBase's ``/api/collections/system_stats/records``):
each record's GPUs (``stats.g.<index>``: ``mu`` used and ``mt`` total, nvidia-smi's MiB divided by
1.024), for the cards' plateau where the operator's monitoring is Beszel rather than DCGM exporter.
Pages are asked one after another, at most MAX_PAGES of PAGE_SIZE records."""

from __future__ import annotations

import datetime
import urllib.parse

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import PrometheusError, WIRE_GRACE_S
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import ReadingError, beszel_gpus
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Client, Unreachable, error_message
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

PAGE_SIZE = 500
MAX_PAGES = 40
# Beszel's record kinds: one a minute, then averages over 10, 20, 120 and 480 minutes.
RECORD_TYPES = ("1m", "10m", "20m", "120m", "480m")
# A Beszel system's record id (PocketBase ids: 15 lowercase letters and digits).
SYSTEM_RE = lazy_regex(r"\A[a-z0-9]{1,64}\Z")
_CREATED = "%Y-%m-%d %H:%M:%S"


def _created(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(_CREATED) + ".000Z"


def _seconds(created):
    return datetime.datetime.strptime(created[:19], _CREATED).replace(tzinfo=datetime.timezone.utc).timestamp()


def gpu_records(url, token, system, record_type, start, end, timeout=60, validate_certs=True):
    """``[(unix time, {gpu index: {used_mib, total_mib, free_mib}})]`` of ``system``'s records
    of ``record_type`` from ``start`` to ``end``, oldest first; PrometheusError says what is wrong."""
    if not isinstance(system, str) or not SYSTEM_RE.match(system):
        raise PrometheusError("beszel_system: expected the Beszel system's record id (lowercase letters and "
                              "digits), got %r" % (system,))
    if record_type not in RECORD_TYPES:
        raise PrometheusError("beszel_record_type: expected one of %s, got %r" % (", ".join(RECORD_TYPES), record_type))
    try:
        client = Client(url.rstrip("/"), token, timeout=timeout + WIRE_GRACE_S, validate_certs=validate_certs)
    except ValueError as exc:
        raise PrometheusError("beszel_url: %s" % exc) from None
    where = 'system = "%s" && type = "%s" && created >= "%s" && created <= "%s"' % (
        system, record_type, _created(start), _created(end))
    records, page = [], 1
    while True:
        path = "/api/collections/system_stats/records?" + urllib.parse.urlencode(
            {"filter": where, "sort": "created", "page": page, "perPage": PAGE_SIZE, "fields": "created,stats"})
        try:
            status, reply = client.call_json("GET", path)
        except Unreachable as exc:
            raise PrometheusError(str(exc)) from None
        if status != 200 or not isinstance(reply, dict) or not isinstance(reply.get("items"), list):
            raise PrometheusError("%s did not list system %s's stats as a Beszel hub would (HTTP %d): %s" % (
                client.root, system, status, error_message(str(reply))[:300]))
        for item in reply["items"]:
            try:
                records.append((_seconds(item["created"]), beszel_gpus((item.get("stats") or {}).get("g") or {})))
            except (KeyError, TypeError, ValueError, ReadingError) as exc:
                raise PrometheusError("%s: a record of system %s is not Beszel's system stats: %s"
                                      % (client.root, system, exc)) from None
        if page >= int(reply.get("totalPages") or 1):
            return records
        if page >= MAX_PAGES:
            raise PrometheusError("system %s has more than %d %s records from %s to %s; ask a coarser "
                                  "beszel_record_type" % (system, MAX_PAGES * PAGE_SIZE, record_type,
                                                          _created(start), _created(end)))
        page += 1
