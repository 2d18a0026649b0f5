# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Each card's plateau after a window, from the monitoring operators already run: DCGM exporter's
framebuffer gauges (``DCGM_FI_DEV_FB_USED`` / ``_FREE``, MiB, labelled with the card's ``UUID``)
in Prometheus.

A seat's memory creeps for a day or two after it boots and then settles. After the window's
end (``since``) and its boot transient (``settle``), the card's plateau is the most it held
and the least it left free; its creep is the slope of what it held over the last ``creep_over``
(MiB per hour, Prometheus's ``deriv``). A card still creeping, left with less than the margin,
or further below the plan's predicted spare than the tolerance, is flagged, each in words.
"""

from __future__ import annotations

import datetime
import json
import math
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import (
    PROMETHEUS_OPTIONS,
    PrometheusError,
    aligned,
    connect,
    duration_seconds,
    unix_time,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import ReadCapError, load_json
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MARGIN_MIB, TOLERANCE_MIB

GPU_PLATEAU_SPEC = {
    **PROMETHEUS_OPTIONS,
    "gpus": {"type": "list", "elements": "dict"},
    "since": {"type": "float"},
    "report": {"type": "path"},
    "host": {"type": "str"},
    "settle": {"type": "str", "default": "1h"},
    "at": {"type": "float"},
    "creep_over": {"type": "str", "default": "6h"},
    "creep_mib_per_hour": {"type": "float", "default": 1.0},
    "margin_mib": {"type": "int", "default": MARGIN_MIB},
    "tolerance_mib": {"type": "int", "default": TOLERANCE_MIB},
}


def _gpus(gpus):
    """``[(index, uuid, predicted spare MiB or None, whether a seat claims it whole)]``: a plan's
    ``gpus`` (or the inventory's)."""
    checked = []
    for position, gpu in enumerate(gpus):
        uuid = gpu.get("uuid") if isinstance(gpu, dict) else None
        if not isinstance(uuid, str) or not uuid.startswith("GPU-"):
            raise PrometheusError("gpus[%d].uuid: expected the card's UUID (GPU-...), got %r" % (position, uuid))
        index = gpu.get("index", position)
        spare = gpu.get("spare_mib")
        if spare is not None and (isinstance(spare, bool) or not isinstance(spare, int)):
            raise PrometheusError("gpus[%d].spare_mib: expected the plan's spare at plateau in MiB, got %r"
                                  % (position, spare))
        # a card a seat claims whole keeps its own headroom: the plan asks no margin of it
        checked.append((index, uuid, spare, bool(gpu.get("own_headroom_seat"))))
    return checked


def card_plateau(prom, card, window, params):
    """One card's plateau between ``since + settle_s`` and ``at`` of ``window``, its creep over
    ``params``' creep_over, and its flags against ``params``' limits; ``card`` is one of _gpus'."""
    index, uuid, predicted_spare, own_headroom = card
    since, settle_s, at, creep_over = window["since"], window["settle_s"], window["at"], params["creep_over"]
    sel = "{UUID=%s}" % json.dumps(uuid)
    settled_s = int(at - since - settle_s)
    result = {"index": index, "uuid": uuid, "metrics": False, "transient_peak_used_mib": None, "plateau_used_mib": None,
              "least_free_mib": None, "creep_mib_per_hour": None, "predicted_spare_mib": predicted_spare,
              "settled": None, "flags": [], "detail": ""}
    if prom.value("count_over_time(DCGM_FI_DEV_FB_USED%s[%ds])" % (sel, settled_s), at) is None:
        result["detail"] = "no DCGM_FI_DEV_FB_USED series with UUID %s after the boot transient" % uuid
        return result
    result["metrics"] = True
    transient = prom.value("max_over_time(DCGM_FI_DEV_FB_USED%s[%ds])" % (sel, max(int(settle_s), 1)), since + settle_s)
    result["transient_peak_used_mib"] = None if transient is None else int(transient)
    result["plateau_used_mib"] = int(prom.value("max_over_time(DCGM_FI_DEV_FB_USED%s[%ds])" % (sel, settled_s), at))
    least_free = prom.value("min_over_time(DCGM_FI_DEV_FB_FREE%s[%ds])" % (sel, settled_s), at)
    slope = prom.value("deriv(DCGM_FI_DEV_FB_USED%s[%s])" % (sel, creep_over), at)
    flags = result["flags"]
    if slope is not None:
        creep = round(slope * 3600, 1)
        result.update(creep_mib_per_hour=creep, settled=creep <= params["creep_mib_per_hour"])
        if creep > params["creep_mib_per_hour"]:
            flags.append("still creeping: %+.1f MiB/h over the last %s" % (creep, creep_over))
    if least_free is not None:
        free = result["least_free_mib"] = int(least_free)
        if free < params["margin_mib"] and not own_headroom:
            flags.append("%d MiB free at the plateau, below the margin of %d MiB" % (free, params["margin_mib"]))
        if predicted_spare is not None and free < predicted_spare - params["tolerance_mib"]:
            flags.append("%d MiB free at the plateau, %d MiB below the plan's predicted spare of %d MiB (tolerance "
                         "%d MiB)" % (free, predicted_spare - free, predicted_spare, params["tolerance_mib"]))
    return result


def plateau_table(cards):
    """One line per card for the operator's log."""
    rows = [("GPU", "transient peak MiB", "plateau MiB", "least free MiB", "plan's spare MiB", "creep MiB/h", "verdict")]
    for card in cards:
        verdict = "; ".join(card["flags"]) or card["detail"] or "settled as planned"
        rows.append(("%s %s" % (card["index"], card["uuid"][:12]), *(
            "-" if card[key] is None else "{:,}".format(card[key]) if isinstance(card[key], int) else str(card[key])
            for key in ("transient_peak_used_mib", "plateau_used_mib", "least_free_mib", "predicted_spare_mib",
                        "creep_mib_per_hour")), verdict))
    return aligned(rows)


# A window whose plan the host runs now: what its plateau is held to.
_PLAN_IN_PLACE = ("applied", "unchanged")


def _from_report(path, host):
    """``(since, plan gpus)`` of ``host`` in a window's report.json: when it finished, and the
    plan's GPUs with their predicted spare. A dry run, a window rolled back or failed, or a
    report without the host (each window run starts its own report) is refused: the host does
    not run that plan."""
    try:
        report = load_json(path)
    except (OSError, ReadCapError, ValueError) as exc:
        raise PrometheusError("report: cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None
    section = (report.get("hosts") or {}).get(host) if isinstance(report, dict) else None
    if not isinstance(section, dict):
        raise PrometheusError("report: %s has no window of host %s (each run writes its own report; give the "
                              "report of the run that changed it)" % (path, host))
    if report.get("check_mode") or section.get("status") not in _PLAN_IN_PLACE:
        raise PrometheusError("report: %s holds a window of host %s that left no plan in place (%s); give the "
                              "report of one that applied its plan" % (
                                  path, host, "a dry run" if report.get("check_mode") else section.get("status")))
    try:
        finished = datetime.datetime.strptime(section["finished"], "%Y-%m-%dT%H:%M:%SZ")
        gpus = section["plan"]["gpus"]
    except (KeyError, TypeError, ValueError):
        raise PrometheusError("report: %s has no finished window with a plan for host %s" % (path, host)) from None
    return finished.replace(tzinfo=datetime.timezone.utc).timestamp(), gpus


def gpu_plateau(params, clock=time.time):
    """The gpu_plateau module's result for its validated ``params``."""
    if params.get("report"):
        if not params.get("host"):
            raise PrometheusError("host: expected the inventory host whose window the report holds, with report")
        since, plan_gpus = _from_report(params["report"], params["host"])
        params = dict(params, since=params["since"] if params.get("since") is not None else since,
                      gpus=params["gpus"] or plan_gpus)
    if not params.get("gpus") or params.get("since") is None:
        raise PrometheusError("gpus and since: expected the host's cards and when the window ended, or report "
                              "(a window's report.json) and host")
    gpus = _gpus(params["gpus"])
    settle_s = duration_seconds(params["settle"], "settle")
    duration_seconds(params["creep_over"], "creep_over")
    since = unix_time(params["since"], "since")
    at = unix_time(params["at"] if params["at"] is not None else clock(), "at")
    if at - since - settle_s < 1:
        raise PrometheusError("at: the plateau is read after since + settle (%s after %.0f); at %.0f is before that"
                              % (params["settle"], since, at))
    if not math.isfinite(params["creep_mib_per_hour"]) or params["creep_mib_per_hour"] < 0:
        raise PrometheusError("creep_mib_per_hour: expected a finite number >= 0, got %r" % params["creep_mib_per_hour"])
    for name in ("margin_mib", "tolerance_mib"):
        if params[name] < 0:
            raise PrometheusError("%s: expected MiB >= 0, got %r" % (name, params[name]))
    prom = connect(params)
    window = {"since": since, "settle_s": settle_s, "at": at}
    cards = [card_plateau(prom, card, window, params) for card in gpus]
    return {"changed": False, "gpus": cards, "flagged": [card["index"] for card in cards if card["flags"]],
            "window": window, "table": plateau_table(cards)}
