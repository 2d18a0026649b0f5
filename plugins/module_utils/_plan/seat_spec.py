# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The fleet as data (CONTRIBUTING.md, "The fleet as data"): check a host's GPUs and seats and
bring them to one normal form before anything runs.

Every problem is collected, not just the first, and each names the host, the seat and the field
and says what was expected. GPU references (index or UUID) become UUIDs; sizes become bytes.
"""

from __future__ import annotations

import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import Checker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import KV_FACTOR, SEAT_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES

_GPU_KEYS = {"index", "uuid", "name", "memory_total_mib", "keep_clear"}
_COMMON_KEYS = {"name", "engine", "image", "port", "gpu", "avoid_gpus", "current_gpu",
                "container_name", "environment", "volumes", "command", "health_path",
                "health_interval", "health_start_period"}
_DURATION_RE = re.compile(r"\A(\d+(ms|s|m|h))+\Z")


class SeatSpecError(ValueError):
    """The inventory does not describe a host's seats; the message lists every problem."""


def _gpus(check, gpus):
    if not isinstance(gpus, list) or not gpus:
        check.errors.append("host %s: llmfleet_gpus: expected a non-empty list of GPUs, got %r"
                            % (check.host, gpus))
        return []
    out = []
    for position, gpu in enumerate(gpus):
        where = "llmfleet_gpus[%d]" % position
        if not isinstance(gpu, dict):
            check.fail(where, "entry", "a dict with index, uuid, memory_total_mib", gpu)
            continue
        for key in sorted(set(gpu) - _GPU_KEYS):
            check.fail(where, key, "one of %s (unknown field)" % ", ".join(sorted(_GPU_KEYS)), gpu[key])
        index = gpu.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            check.fail(where, "index", "an integer >= 0", index)
        uuid = gpu.get("uuid")
        if not isinstance(uuid, str) or not uuid.startswith(("GPU-", "MIG-")):
            check.fail(where, "uuid", "a GPU UUID such as GPU-5a1c0c6e-...", uuid)
        total = check.positive_int(where, "memory_total_mib", gpu.get("memory_total_mib"))
        keep_clear = gpu.get("keep_clear", False)
        if not isinstance(keep_clear, bool):
            check.fail(where, "keep_clear", "true or false", keep_clear)
        out.append({"index": index, "uuid": uuid, "name": gpu.get("name") or "",
                    "memory_total_mib": total, "keep_clear": keep_clear is True})
    for field in ("index", "uuid"):
        values = [gpu[field] for gpu in out]
        for value in sorted({v for v in values if values.count(v) > 1}, key=str):
            check.fail("llmfleet_gpus", field, "unique values", value)
    return out


def _gpu_refs(check, where, field, value, gpus, count=None):
    """Index or UUID (or a list of them) -> a list of UUIDs."""
    if value is None:
        return None
    refs = value if isinstance(value, list) else [value]
    by_index = {gpu["index"]: gpu["uuid"] for gpu in gpus}
    by_uuid = {gpu["uuid"] for gpu in gpus}
    uuids = []
    for ref in refs:
        if isinstance(ref, int) and not isinstance(ref, bool) and ref in by_index:
            uuids.append(by_index[ref])
        elif isinstance(ref, str) and ref in by_uuid:
            uuids.append(ref)
        else:
            check.fail(where, field, "a GPU index (%s) or UUID of this host"
                       % ", ".join(str(i) for i in sorted(by_index)), ref)
            return None
    if len(set(uuids)) != len(uuids):
        check.fail(where, field, "distinct GPUs", value)
        return None
    if count is not None and len(uuids) != count:
        check.fail(where, field, "%d GPU(s), one per tensor-parallel rank" % count, value)
        return None
    return uuids


def _seat(check, position, raw, gpus, defaults):
    if not isinstance(raw, dict):
        check.fail("llmfleet_seats[%d]" % position, "entry", "a dict describing a seat", raw)
        return None
    name = raw.get("name")
    where = "seat %s" % name if isinstance(name, str) else "llmfleet_seats[%d]" % position
    if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
        check.fail(where, "name", "lowercase letters, digits, '-' or '_' (it names the compose project)", name)
    engine = ENGINES.get(raw.get("engine")) if isinstance(raw.get("engine"), str) else None
    if engine is None:
        check.fail(where, "engine", " or ".join(repr(name) for name in ENGINES), raw.get("engine"))
        return None
    for key in sorted(set(raw) - _COMMON_KEYS - engine.FIELDS):
        check.fail(where, key, "a known field for a %s seat (typo?)" % engine.NAME, raw[key])

    tp = engine.gpu_count(check, where, raw)
    seat = {
        "name": name, "engine": engine.NAME,
        "image": check.text(where, "image", raw.get("image")),
        "port": check.positive_int(where, "port", raw.get("port"), 65535),
        "gpu": _gpu_refs(check, where, "gpu", raw.get("gpu"), gpus, tp),
        "avoid_gpus": _gpu_refs(check, where, "avoid_gpus", raw.get("avoid_gpus"), gpus) or [],
        "current_gpu": _gpu_refs(check, where, "current_gpu", raw.get("current_gpu"), gpus, tp),
        "gpu_count": tp,
        "container_name": raw.get("container_name") or engine.container_name(name),
        "environment": raw.get("environment") or {},
        "volumes": raw.get("volumes") or [],
        "command": raw.get("command") or [],
        "health_path": raw.get("health_path", "/health"),
        # docker's healthcheck: how often, and how long a boot may take before failures count
        "health_interval": raw.get("health_interval", "15s"),
        "health_start_period": raw.get("health_start_period", "20m"),
    }
    for field in ("health_interval", "health_start_period"):
        if not isinstance(seat[field], str) or not _DURATION_RE.match(seat[field]):
            check.fail(where, field, "a docker duration such as 15s, 2m or 1m30s", seat[field])
    if not isinstance(seat["environment"], dict):
        check.fail(where, "environment", "a dict of variable: value", seat["environment"])
    for field in ("volumes", "command"):
        if seat[field]:
            check.string_list(where, field, seat[field])
    engine.normalize(check, where, raw, seat, defaults)
    return seat


def normalize_host(host, gpus, seats, kv_factor=KV_FACTOR, seat_defaults=None):
    """``{"gpus": [...], "seats": [...]}`` in normal form, or SeatSpecError listing every problem.

    ``seat_defaults`` (``llmfleet_seat_defaults``): per engine (``vllm``, ``fixed``), fields every
    seat of that engine gets unless it sets them itself, e.g. the model cache volume.
    """
    check = Checker(host)
    seat_defaults = seat_defaults or {}
    if not isinstance(seat_defaults, dict) or set(seat_defaults) - set(ENGINES) or not all(
            isinstance(value, dict) for value in seat_defaults.values()):
        check.errors.append("host %s: llmfleet_seat_defaults: expected {vllm: {field: value}, "
                            "fixed: {field: value}}, got %r" % (host, seat_defaults))
        seat_defaults = {}
    norm_gpus = _gpus(check, gpus)
    if not isinstance(seats, list):
        check.errors.append("host %s: llmfleet_seats: expected a list of seats, got %r" % (host, seats))
        seats = []
    seats = [dict(seat_defaults.get(raw.get("engine"), {}), **raw) if isinstance(raw, dict) else raw
             for raw in seats]
    norm_seats = [s for s in (_seat(check, i, raw, norm_gpus, {"kv_factor": kv_factor})
                              for i, raw in enumerate(seats)) if s is not None]
    for field in ("name", "port", "container_name"):
        values = [s[field] for s in norm_seats if s[field] is not None]
        for value in sorted({v for v in values if values.count(v) > 1}, key=str):
            check.fail("llmfleet_seats", field, "a different %s per seat" % field, value)
    clear = {gpu["uuid"] for gpu in norm_gpus if gpu["keep_clear"]}
    for seat in norm_seats:
        if seat["gpu"] and set(seat["gpu"]) & clear:
            check.fail("seat %s" % seat["name"], "gpu", "a GPU that is not kept clear", seat["gpu"])
    if check.errors:
        raise SeatSpecError("%d problem(s) in the inventory:\n- %s"
                            % (len(check.errors), "\n- ".join(check.errors)))
    return {"gpus": norm_gpus, "seats": norm_seats}
