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

DCGM gives whole cards. With a reading of the host taken after the transient (gpu_info's, with
each process attributed to its seat), each seat's share is held to its planned footprint too,
and the two together make a plateau snapshot in gpu_info's format that the next plan reads
(``llmfleet_plateau_snapshot``): the reading, each card raised to the plateau Prometheus saw
where that is higher (the difference counted as memory not ours: DCGM does not say whose it
was), and the watch's verdict under ``watch`` for the next window's report.
"""

from __future__ import annotations

import datetime
import json
import math
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.beszel import gpu_records
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plots import chart_svg
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import (
    PROMETHEUS_OPTIONS,
    PrometheusError,
    aligned,
    connect,
    duration_seconds,
    unix_time,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import (
    ReadingError,
    build_snapshot,
    check_reading,
    seat_mib,
    utc_timestamp,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import ReadCapError, load_json
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MARGIN_MIB, TOLERANCE_MIB

GPU_PLATEAU_SPEC = {
    **PROMETHEUS_OPTIONS,
    # Prometheus, or a Beszel hub where that is the operator's monitoring
    "prometheus_url": {"type": "str"},
    "source": {"type": "str", "choices": ["prometheus", "beszel"], "default": "prometheus"},
    "beszel_url": {"type": "str"},
    "beszel_token": {"type": "str", "no_log": True},
    "beszel_system": {"type": "str"},
    "beszel_record_type": {"type": "str", "choices": ["1m", "10m", "20m", "120m", "480m"], "default": "1m"},
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
    "reading": {"type": "dict"},
    "seats": {"type": "list", "elements": "dict"},
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


class DcgmCards:
    """A card's framebuffer as DCGM exporter reports it to Prometheus, by its UUID label."""

    def __init__(self, prom):
        self.prom = prom

    @staticmethod
    def _sel(uuid):
        return "{UUID=%s}" % json.dumps(uuid)

    def figures(self, index, uuid, window, creep_over):
        """``{metrics, transient, plateau, least_free, slope (MiB/s), detail}`` of one card."""
        prom, sel, at = self.prom, self._sel(uuid), window["at"]
        settled_s = int(at - window["since"] - window["settle_s"])
        if prom.value("count_over_time(DCGM_FI_DEV_FB_USED%s[%ds])" % (sel, settled_s), at) is None:
            return {"metrics": False, "detail": "no DCGM_FI_DEV_FB_USED series with UUID %s after the boot transient" % uuid}
        return {"metrics": True, "detail": "",
                "transient": prom.value("max_over_time(DCGM_FI_DEV_FB_USED%s[%ds])" % (
                    sel, max(int(window["settle_s"]), 1)), window["since"] + window["settle_s"]),
                "plateau": prom.value("max_over_time(DCGM_FI_DEV_FB_USED%s[%ds])" % (sel, settled_s), at),
                "least_free": prom.value("min_over_time(DCGM_FI_DEV_FB_FREE%s[%ds])" % (sel, settled_s), at),
                "slope": prom.value("deriv(DCGM_FI_DEV_FB_USED%s[%s])" % (sel, creep_over), at)}

    def series(self, index, uuid, window):
        """What it held over the window, each step's most, and what it can hold (used + free)."""
        sel = self._sel(uuid)
        used = self.prom.query_range("max_over_time(DCGM_FI_DEV_FB_USED%s[{step}s])" % sel, window["since"], window["at"])
        capacity = self.prom.value("DCGM_FI_DEV_FB_USED%s + DCGM_FI_DEV_FB_FREE%s" % (sel, sel), window["at"])
        return (used[0][1] if used else []), capacity


class BeszelCards:
    """A card's memory as a Beszel agent records it (by its index; Beszel has no UUIDs), from
    beszel.gpu_records. Beszel records no reserved memory: free is total less used."""

    def __init__(self, records):
        self.records = records

    def _points(self, index):
        key = str(index)
        return [(when, gpus[key]) for when, gpus in self.records if key in gpus]

    def figures(self, index, uuid, window, creep_over):
        points = self._points(index)
        settled_from = window["since"] + window["settle_s"]
        settled = [(when, gpu) for when, gpu in points if when > settled_from]
        if not settled:
            return {"metrics": False, "detail": "no Beszel record of GPU %s after the boot transient" % index}
        transient = [gpu["used_mib"] for when, gpu in points if when <= settled_from]
        frees = [gpu["free_mib"] for _when, gpu in settled if gpu["free_mib"] is not None]
        recent = [(when, gpu["used_mib"]) for when, gpu in settled if when >= window["at"] - duration_seconds(
            creep_over, "creep_over")]
        return {"metrics": True, "detail": "", "transient": max(transient) if transient else None,
                "plateau": max(gpu["used_mib"] for _when, gpu in settled),
                "least_free": min(frees) if frees else None, "slope": _slope(recent)}

    def series(self, index, uuid, window):
        points = self._points(index)
        totals = [gpu["total_mib"] for _when, gpu in points if gpu["total_mib"] is not None]
        return [(when, gpu["used_mib"]) for when, gpu in points], (totals[-1] if totals else None)


def _slope(points):
    """The least-squares slope of ``[(seconds, MiB)]`` in MiB a second, or None with fewer than two."""
    if len(points) < 2:
        return None
    mean_t = sum(when for when, _value in points) / len(points)
    mean_v = sum(value for _when, value in points) / len(points)
    spread = sum((when - mean_t) ** 2 for when, _value in points)
    return sum((when - mean_t) * (value - mean_v) for when, value in points) / spread if spread else None


def card_plateau(source, card, window, params):
    """One card's plateau between ``since + settle_s`` and ``at`` of ``window``, its creep over
    ``params``' creep_over, and its flags against ``params``' limits; ``card`` is one of _gpus',
    ``source`` a DcgmCards or a BeszelCards."""
    index, uuid, predicted_spare, own_headroom = card
    result = {"index": index, "uuid": uuid, "metrics": False, "transient_peak_used_mib": None, "plateau_used_mib": None,
              "least_free_mib": None, "creep_mib_per_hour": None, "predicted_spare_mib": predicted_spare,
              "settled": None, "flags": [], "detail": ""}
    figures = source.figures(index, uuid, window, params["creep_over"])
    result.update(metrics=figures["metrics"], detail=figures["detail"])
    if not figures["metrics"]:
        return result
    result["transient_peak_used_mib"] = None if figures["transient"] is None else int(figures["transient"])
    result["plateau_used_mib"] = int(figures["plateau"])
    flags = result["flags"]
    if figures["slope"] is not None:
        creep = round(figures["slope"] * 3600, 1)
        result.update(creep_mib_per_hour=creep, settled=creep <= params["creep_mib_per_hour"])
        if creep > params["creep_mib_per_hour"]:
            flags.append("still creeping: %+.1f MiB/h over the last %s" % (creep, params["creep_over"]))
    if figures["least_free"] is not None:
        free = result["least_free_mib"] = int(figures["least_free"])
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
    """``(since, plan gpus, plan seats)`` of ``host`` in a window's report.json: when it
    finished, the plan's GPUs with their predicted spare, and its seats with their footprints.
    A dry run, a window rolled back or failed, or a report without the host (each window run
    starts its own report) is refused: the host does not run that plan."""
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
        seats = section["plan"].get("seats") or []
    except (KeyError, TypeError, ValueError, AttributeError):
        raise PrometheusError("report: %s has no finished window with a plan for host %s" % (path, host)) from None
    return finished.replace(tzinfo=datetime.timezone.utc).timestamp(), gpus, seats


def gpu_plateau(params, clock=time.time):
    """The gpu_plateau module's result for its validated ``params``."""
    if params.get("report"):
        if not params.get("host"):
            raise PrometheusError("host: expected the inventory host whose window the report holds, with report")
        since, plan_gpus, plan_seats = _from_report(params["report"], params["host"])
        params = dict(params, since=params["since"] if params.get("since") is not None else since,
                      gpus=params["gpus"] or plan_gpus, seats=params["seats"] or plan_seats)
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
    reading, planned = None, {}
    if params.get("reading") is not None:
        # the seats are held to their footprints only where the host's reading shows them
        planned = planned_footprints(params.get("seats") or [])
        if not params.get("host"):
            raise PrometheusError("host: expected the inventory host the reading is of, with reading")
        try:
            reading = check_reading(params["reading"], "reading")
        except ReadingError as exc:
            raise PrometheusError(str(exc)) from None
    window = {"since": since, "settle_s": settle_s, "at": at}
    source = _source(params, window)
    cards = [card_plateau(source, card, window, params) for card in gpus]
    result = {"changed": False, "gpus": cards, "window": window, "svg": plateau_svg(source, cards, window, params)}
    if reading is not None:
        result["seats"] = seat_verdicts(reading, cards, planned, params["tolerance_mib"])
        result["snapshot"] = plateau_snapshot(reading, cards, result["seats"], params["host"], window)
    result.update(flagged=[card["index"] for card in cards if card["flags"]], table=plateau_table(cards))
    return result


def plateau_svg(source, cards, window, params):
    """Each card's memory over the window: what it held, the boot transient shaded, its plateau
    and the plan's line (what it would hold with the plan's predicted spare left free)."""
    panels = []
    for card in cards:
        used, capacity = source.series(card["index"], card["uuid"], window) if card["metrics"] else ([], None)
        planned = None if capacity is None or card["predicted_spare_mib"] is None else \
            int(capacity) - card["predicted_spare_mib"]
        panels.append({
            "title": "GPU %s %s" % (card["index"], card["uuid"]), "start": window["since"], "end": window["at"],
            "series": [("used MiB (each step's most)", used)],
            "lines": [("plateau", card["plateau_used_mib"]), ("plan", planned)],
            "shade": (window["since"], window["since"] + window["settle_s"], "boot transient"), "unit": "MiB"})
    return chart_svg("%smemory per GPU after the window (%s)" % (
        "%s: " % params["host"] if params.get("host") else "",
        "Beszel" if params.get("source") == "beszel" else "DCGM_FI_DEV_FB_USED"), panels)


def _source(params, window):
    """Where the cards' figures come from: DCGM exporter through Prometheus, or a Beszel hub."""
    if params["timeout"] < 1:
        raise PrometheusError("timeout: expected whole seconds >= 1, got %r" % params["timeout"])
    if params.get("source") == "beszel":
        missing = [name for name in ("beszel_url", "beszel_system") if not params.get(name)]
        if missing:
            raise PrometheusError("%s: expected with source=beszel (the hub, and the system's record id)"
                                  % " and ".join(missing))
        return BeszelCards(gpu_records(params["beszel_url"], params.get("beszel_token"), params["beszel_system"],
                                       params["beszel_record_type"], window["since"], window["at"],
                                       params["timeout"], params["validate_certs"]))
    if not params.get("prometheus_url"):
        raise PrometheusError("prometheus_url: expected the Prometheus that scrapes the host's DCGM exporter "
                              "(or source=beszel and beszel_url)")
    return DcgmCards(connect(params))


def planned_footprints(seats):
    """``{(seat, uuid): planned MiB}``: each plan seat's footprint on each of its GPUs (a
    footprint is per GPU: a tensor-parallel seat holds it on each)."""
    planned = {}
    for position, seat in enumerate(seats):
        name = seat.get("name") if isinstance(seat, dict) else None
        footprint = seat.get("footprint_mib") if isinstance(seat, dict) else None
        uuids = seat.get("gpus") if isinstance(seat, dict) else None
        if not isinstance(name, str) or isinstance(footprint, bool) or not isinstance(footprint, int) or \
                not isinstance(uuids, list) or not all(isinstance(uuid, str) for uuid in uuids):
            raise PrometheusError("seats[%d]: expected a plan's seat with its name, gpus (UUIDs) and footprint_mib, "
                                  "got %r" % (position, seat))
        for uuid in uuids:
            planned[(name, uuid)] = footprint
    return planned


def seat_verdicts(reading, cards, planned, tolerance_mib):
    """Each planned seat on each card: what the reading shows it holding against its planned
    footprint. One holding more than the tolerance above it adds a flag to its card."""
    held = seat_mib(reading)
    by_uuid = {card["uuid"]: card for card in cards}
    verdicts = []
    for (name, uuid), footprint in sorted(planned.items(), key=lambda item: (item[0][1], item[0][0])):
        card = by_uuid.get(uuid)
        if card is None:
            continue
        holds = held.get(name, {}).get(uuid)
        verdict = {"seat": name, "index": card["index"], "uuid": uuid, "held_mib": holds,
                   "planned_mib": footprint, "over_plan_mib": None if holds is None else holds - footprint}
        verdicts.append(verdict)
        if holds is not None and holds - footprint > tolerance_mib:
            card["flags"].append("seat %s holds %s MiB, %s MiB above its planned footprint of %s MiB" % (
                name, "{:,}".format(holds), "{:,}".format(holds - footprint), "{:,}".format(footprint)))
        elif holds is None:
            card["flags"].append("seat %s is not in the host's reading of this card (planned %s MiB)"
                                 % (name, "{:,}".format(footprint)))
    return verdicts


# What of the watch the next window's report shows, per card.
WATCH_CARD_FIELDS = ("index", "uuid", "plateau_used_mib", "least_free_mib", "creep_mib_per_hour",
                     "predicted_spare_mib", "flags")


def plateau_snapshot(reading, cards, seats, host, window):
    """The plateau snapshot (gpu_info's format) of ``reading`` with each card raised to the
    plateau Prometheus saw where that is higher, and the watch's verdict under ``watch``."""
    plateaus = {card["uuid"]: card for card in cards}
    gpus = []
    for gpu in reading["gpus"]:
        gpu = dict(gpu)
        card = plateaus.get(gpu["uuid"]) or {}
        above = min((card.get("plateau_used_mib") or 0), gpu["memory_total_mib"]) - gpu["memory_used_mib"]
        if above > 0:
            # DCGM does not say whose it was: counted as memory not ours, and said so
            gpu["memory_used_mib"] += above
            gpu["unattributed_mib"] = (gpu.get("unattributed_mib") or 0) + above
            free = max(0, (gpu.get("memory_free_mib") or 0) - above)
            if card.get("least_free_mib") is not None:
                free = min(free, card["least_free_mib"])
            gpu["memory_free_mib"] = free
        gpu["plateau_above_reading_mib"] = max(above, 0) if card else None
        gpus.append(gpu)
    snapshot = build_snapshot(dict(reading, gpus=gpus, source=reading.get("source") or "gpu_info"), host, utc_timestamp(
        datetime.datetime.fromtimestamp(window["at"], datetime.timezone.utc)))
    snapshot["watch"] = {
        "window": dict(window, settled_from=utc_timestamp(datetime.datetime.fromtimestamp(
            window["since"] + window["settle_s"], datetime.timezone.utc))),
        "gpus": [{field: card[field] for field in WATCH_CARD_FIELDS} for card in cards],
        "seats": seats,
        "flagged": [card["index"] for card in cards if card["flags"]],
    }
    return snapshot
