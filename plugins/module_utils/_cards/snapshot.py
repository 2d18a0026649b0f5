# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""gpu_info readings, live or recorded: snapshots, and the lookups roles make on them.

A snapshot is a versioned JSON file per host. One taken at the plateau, a day or two after the
seats booted, is what placement plans against; the free memory right after a restart is not.
The file carries the schema name and version, the host, when it was taken (UTC) and which
source read it, then the ``gpus`` list exactly as gpu_info returns it.

The lookups (free MiB by UUID, each seat's MiB per GPU, a summary line per GPU, Beszel's
readings in MiB) serve the filters in ``plugins/filter/gpu.py``.
"""

from __future__ import annotations

import datetime
import json
import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import current_mode, replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import (
    MAX_JSON_BYTES,
    ReadCapError,
    loads_bounded,
    read_capped,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

SCHEMA = "llmfleet.seats/gpu_snapshot"
SCHEMA_VERSION = 1

_TIMESTAMP = lazy_regex(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")
_GPU_REQUIRED_INTS = ("index", "memory_total_mib", "memory_used_mib", "memory_free_mib")
_GPU_OPTIONAL_INTS = ("memory_reserved_mib", "attributed_mib", "unattributed_mib", "unlisted_mib")
_PROCESS_OPTIONAL_STRS = ("name", "container", "container_id", "compose_project", "compose_service",
                          "attribution", "seat", "image")


class SnapshotError(ValueError):
    """A snapshot file that cannot be used; the message names the file and the field."""


def utc_timestamp(now=None):
    """``2026-10-07T08:00:00Z``: when a snapshot was taken."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def build_snapshot(reading, host, taken_at):
    """The snapshot document for a gpu_info ``reading`` (source, versions, gpus)."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "host": host,
        "taken_at": taken_at,
        "source": reading["source"],
        "driver_version": reading.get("driver_version"),
        "nvml_version": reading.get("nvml_version"),
        "cuda_version": reading.get("cuda_version"),
        "gpus": reading["gpus"],
    }


def dump_snapshot(snapshot):
    """Stable text: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(snapshot, indent=2, sort_keys=True) + "\n"


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check(condition, path, field, expected, value):
    if not condition:
        raise SnapshotError("snapshot %s: %s: expected %s, got %r" % (path, field, expected, value))


def _check_gpu(gpu, where, path):
    _check(isinstance(gpu, dict), path, where, "an object", gpu)
    uuid = gpu.get("uuid")
    _check(isinstance(uuid, str) and uuid, path, where + ".uuid", "the GPU's UUID (GPU-...)", uuid)
    for key in _GPU_REQUIRED_INTS:
        value = gpu.get(key)
        _check(_is_int(value) and value >= 0, path, "%s.%s" % (where, key), "a whole number >= 0", value)
    for key in _GPU_OPTIONAL_INTS:
        value = gpu.get(key)
        _check(value is None or _is_int(value), path, "%s.%s" % (where, key), "a whole number or null", value)
    # a card holds no more than its total: named here, not as the capacity derived from it
    for key in ("memory_used_mib", "memory_free_mib", "memory_reserved_mib"):
        value = gpu.get(key)
        _check(value is None or value <= gpu["memory_total_mib"], path, "%s.%s" % (where, key),
               "at most the card's memory_total_mib (%d)" % gpu["memory_total_mib"], value)
    processes = gpu.get("processes")
    _check(isinstance(processes, list), path, where + ".processes", "a list", processes)
    for number, process in enumerate(processes):
        at = "%s.processes[%d]" % (where, number)
        _check(isinstance(process, dict), path, at, "an object", process)
        _check(_is_int(process.get("pid")) and process["pid"] > 0, path, at + ".pid", "a PID", process.get("pid"))
        used = process.get("used_mib")
        _check(used is None or (_is_int(used) and used >= 0), path, at + ".used_mib",
               "a whole number of MiB or null", used)
        _check_process_fields(process, at, lambda ok, field, expected, value: _check(ok, path, field, expected, value))


def _check_process_fields(process, at, check):
    """A process's names and seat record: ``check(condition, field, expected, value)`` raises."""
    for key in _PROCESS_OPTIONAL_STRS:
        value = process.get(key)
        check(value is None or isinstance(value, str), "%s.%s" % (at, key), "a string or null", value)
    args = process.get("args")
    check(args is None or (isinstance(args, list) and all(isinstance(a, str) for a in args)),
          at + ".args", "a list of strings or null", args)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_watch_fields(watch, check):
    """A watch's verdict (gpu_plateau's, kept in a plateau snapshot) as the next plan shows it:
    ``check(condition, field, expected, value)`` raises."""
    check(isinstance(watch, dict), "watch", "an object (gpu_plateau's verdict)", watch)
    window = watch.get("window")
    check(isinstance(window, dict) and all(_is_number(window.get(key)) for key in ("since", "settle_s", "at")),
          "watch.window", "{since, settle_s, at} in seconds", window)
    for kind, fields in (("gpus", {"index": _is_int, "uuid": lambda v: isinstance(v, str)}),
                         ("seats", {"seat": lambda v: isinstance(v, str), "index": _is_int})):
        entries = watch.get(kind)
        check(isinstance(entries, list), "watch.%s" % kind, "a list", entries)
        for number, entry in enumerate(entries):
            at = "watch.%s[%d]" % (kind, number)
            check(isinstance(entry, dict), at, "an object", entry)
            for field, valid in fields.items():
                check(valid(entry.get(field)), "%s.%s" % (at, field), "a %s" % field, entry.get(field))
            for field, value in entry.items():
                if field.endswith(("_mib", "_hour")):
                    check(value is None or _is_number(value), "%s.%s" % (at, field), "a number or null", value)
            flags = entry.get("flags", [])
            check(isinstance(flags, list) and all(isinstance(flag, str) for flag in flags), at + ".flags",
                  "a list of strings", flags)


def _no_constant(name):
    raise ValueError("%s is not a number a card reports" % name)


def load_snapshot(text, path):
    """Parse and check a snapshot; SnapshotError names the file, the field and what was expected."""
    try:
        snapshot = loads_bounded(text, parse_constant=_no_constant)
    except ReadCapError as exc:
        raise SnapshotError("snapshot %s: %s" % (path, exc)) from None
    except ValueError as exc:
        raise SnapshotError("snapshot %s: not JSON (%s)" % (path, exc)) from None
    _check(isinstance(snapshot, dict), path, "the document", "a JSON object", type(snapshot).__name__)
    _check(snapshot.get("schema") == SCHEMA, path, "schema", repr(SCHEMA), snapshot.get("schema"))
    version = snapshot.get("schema_version")
    _check(_is_int(version), path, "schema_version", "a whole number", version)
    if version > SCHEMA_VERSION:
        raise SnapshotError("snapshot %s: schema_version %d was written by a newer llmfleet.seats; "
                            "this one reads version %d" % (path, version, SCHEMA_VERSION))
    _check(version >= 1, path, "schema_version", "1", version)
    for key in ("host", "source"):
        _check(isinstance(snapshot.get(key), str) and snapshot[key], path, key, "a non-empty string",
               snapshot.get(key))
    taken_at = snapshot.get("taken_at")
    _check(isinstance(taken_at, str) and _TIMESTAMP.match(taken_at), path, "taken_at",
           "an ISO 8601 time such as 2026-10-07T08:00:00Z", taken_at)
    gpus = snapshot.get("gpus")
    _check(isinstance(gpus, list), path, "gpus", "a list", gpus)
    seen = set()
    for number, gpu in enumerate(gpus):
        _check_gpu(gpu, "gpus[%d]" % number, path)
        if gpu["uuid"] in seen:
            raise SnapshotError("snapshot %s: gpus[%d].uuid: %s appears twice" % (path, number, gpu["uuid"]))
        seen.add(gpu["uuid"])
    if "watch" in snapshot:
        _check_watch_fields(snapshot["watch"], lambda ok, field, expected, value: _check(ok, path, field, expected, value))
    return snapshot


def read_snapshot_file(path):
    """load_snapshot() on a file; unreadable files raise SnapshotError too."""
    try:
        data = read_capped(path, MAX_JSON_BYTES)
    except ReadCapError as exc:
        raise SnapshotError("snapshot %s: %s" % (path, exc)) from None
    except OSError as exc:
        raise SnapshotError("snapshot %s: cannot read it: %s" % (path, exc.strerror or exc))
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SnapshotError("snapshot %s: written as UTF-16 (what PowerShell 5's > writes); save it "
                            "as UTF-8, e.g. with Out-File -Encoding utf8" % path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError("snapshot %s: not UTF-8 text (byte %d); expected the JSON gpu_info "
                            "writes" % (path, exc.start)) from None
    return load_snapshot(text, path)


def write_snapshot_file(path, text, check_mode=False):
    """Write ``text`` to ``path`` atomically unless it already holds exactly that.

    Returns True when the file changed (or, in check mode, would change). A replaced file keeps
    its mode; a new one gets 0644 (a snapshot holds no secrets).
    """
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SnapshotError("snapshot %s: cannot read the existing file: %s" % (path, exc.strerror or exc))
    if check_mode:
        return True
    directory = os.path.dirname(os.path.abspath(path))
    mode = current_mode(path)
    try:
        replace_file(path, text, 0o644 if mode is None else mode)
    except OSError as exc:
        raise SnapshotError("snapshot %s: cannot write in %s: %s" % (path, directory, exc.strerror or exc)) from None
    return True


class ReadingError(ValueError):
    """A value that is not a gpu_info reading (or a Beszel one); the message says what was expected."""


# Beszel's agent stores nvidia-smi's MiB divided by 1.024 ("mebibytesInAMegabyte",
# henrygd/beszel agent/gpu.go): a plateau read back from beszel is stats.g.<n>.mu x 1.024.
BESZEL_MIB_FACTOR = 1.024


def beszel_mib(value, what="beszel_mib"):
    """MiB from a Beszel GPU memory reading (``mu`` or ``mt``), rounded to the nearest MiB."""
    try:
        number = float(None if isinstance(value, bool) else value)
    except (TypeError, ValueError):
        raise ReadingError("%s: expected a Beszel memory reading (a number such as 86480.27), "
                           "got %r" % (what, value))
    if number < 0:
        raise ReadingError("%s: expected a reading >= 0, got %r" % (what, value))
    return int(number * BESZEL_MIB_FACTOR + 0.5)


def beszel_gpus(stats):
    """``{gpu id: {name, used_mib, total_mib, free_mib}}`` from a Beszel system-stats record
    (its ``g`` map of ``{n, mu, mt, ...}``) or from the ``g`` map itself."""
    if isinstance(stats, dict) and isinstance(stats.get("g"), dict):
        stats = stats["g"]
    if not isinstance(stats, dict):
        raise ReadingError("beszel_gpus: expected Beszel system stats (with a 'g' map of GPUs) or "
                           "that map, got %s" % type(stats).__name__)
    result = {}
    for gpu_id, reading in stats.items():
        if not isinstance(reading, dict):
            raise ReadingError("beszel_gpus: g.%s: expected an object with mu/mt, got %r" % (gpu_id, reading))
        used = beszel_mib(reading.get("mu", 0), "beszel_gpus: g.%s.mu" % gpu_id)
        total = beszel_mib(reading["mt"], "beszel_gpus: g.%s.mt" % gpu_id) if "mt" in reading else None
        result[str(gpu_id)] = {"name": reading.get("n"), "used_mib": used, "total_mib": total,
                               "free_mib": None if total is None else total - used}
    return result


def check_reading(reading, what):
    """A gpu_info result given as data (not read from a file): what a plan reads of it (each
    GPU's uuid, total, used and reserved MiB, its processes' MiB and seat records) checked;
    ReadingError names ``what`` and the field."""
    def check(condition, field, expected, value):
        if not condition:
            raise ReadingError("%s: expected %s, got %r" % (field, expected, value))

    gpus = reading.get("gpus") if isinstance(reading, dict) else None
    if not isinstance(gpus, list):
        raise ReadingError("%s: expected a gpu_info result with a gpus list, got %r" % (what, reading))
    for number, gpu in enumerate(gpus):
        where = "%s: gpus[%d]" % (what, number)
        if not isinstance(gpu, dict) or not isinstance(gpu.get("uuid"), str):
            raise ReadingError("%s: expected a GPU with a uuid, got %r" % (where, gpu))
        for key in ("memory_total_mib", "memory_used_mib", "memory_reserved_mib"):
            value = gpu.get(key)
            if not (value is None and key == "memory_reserved_mib") and not (_is_int(value) and value >= 0):
                raise ReadingError("%s.%s: expected a whole number >= 0, got %r" % (where, key, value))
        processes = gpu.get("processes") or []
        if not isinstance(processes, list):
            raise ReadingError("%s.processes: expected a list, got %r" % (where, processes))
        for index, process in enumerate(processes):
            at = "%s.processes[%d]" % (where, index)
            used = process.get("used_mib") if isinstance(process, dict) else "?"
            check(used is None or (_is_int(used) and used >= 0), at, "a process with used_mib (whole MiB or null)",
                  process)
            _check_process_fields(process, at, check)
    if reading.get("watch") is not None:
        _check_watch_fields(reading["watch"], lambda ok, field, expected, value: check(
            ok, "%s: %s" % (what, field), expected, value))
    return reading


def reading_gpus(reading, what):
    """The ``gpus`` list of a gpu_info result (or the list itself), each with a UUID."""
    gpus = reading.get("gpus") if isinstance(reading, dict) else reading
    if not isinstance(gpus, list):
        raise ReadingError("%s: expected a gpu_info result or its gpus list, got %s"
                           % (what, type(reading).__name__))
    for number, gpu in enumerate(gpus):
        if not isinstance(gpu, dict) or not isinstance(gpu.get("uuid"), str):
            raise ReadingError("%s: gpus[%d]: expected a GPU with a uuid, got %r" % (what, number, gpu))
    return gpus


def gpus_by_uuid(reading):
    """``{uuid: gpu}``: the key everything downstream uses."""
    return {gpu["uuid"]: gpu for gpu in reading_gpus(reading, "gpu_by_uuid")}


def free_mib_by_uuid(reading):
    """``{uuid: free MiB}``."""
    return {gpu["uuid"]: gpu.get("memory_free_mib") for gpu in reading_gpus(reading, "gpu_free_mib_by_uuid")}


def seat_mib(reading, compose_project=None, containers=None):
    """``{seat: {uuid: MiB}}``: what each seat holds on each GPU (a TP seat spans several), from
    the processes attributed to a seat's container (the collection's label, whatever runtime
    started it), else to a compose service, else to a container ``containers`` names
    (``{container name: seat}``: one started with docker run); ``compose_project`` limits it to
    one project."""
    seats = {}
    for gpu in reading_gpus(reading, "gpu_seat_mib"):
        for process in gpu.get("processes") or []:
            service = process.get("seat") or process.get("compose_service") or (containers or {}).get(
                process.get("container"))
            if not service or process.get("used_mib") is None:
                continue
            if compose_project is not None and process.get("compose_project") != compose_project:
                continue
            per_gpu = seats.setdefault(service, {})
            per_gpu[gpu["uuid"]] = per_gpu.get(gpu["uuid"], 0) + process["used_mib"]
    return seats


def gpu_summary(value):
    """A line for one GPU, or a list of lines for a gpu_info result or its gpus list."""
    if isinstance(value, dict) and "gpus" not in value:
        return summary_line(value)
    return [summary_line(gpu) for gpu in reading_gpus(value, "gpu_summary")]


def _short_uuid(uuid):
    return uuid[:12] if uuid.startswith("GPU-") else uuid[:8]


def _mib(value):
    return "?" if value is None else "{:,}".format(value)


def summary_line(gpu):
    """One line per GPU: ``GPU 1 (GPU-6b2d1d7f) NVIDIA ...: 86,491 / 97,887 MiB used, 10,864
    free, 532 reserved | gen-small 17,733, meromero-rp 39,864 | unattributed 434``."""
    if not isinstance(gpu, dict) or not isinstance(gpu.get("uuid"), str):
        raise ReadingError("gpu_summary: expected a GPU of a gpu_info result, got %r" % (gpu,))
    head = "GPU %s (%s) %s: %s / %s MiB used, %s free" % (
        gpu.get("index", "?"), _short_uuid(gpu["uuid"]), gpu.get("name") or "unknown GPU",
        _mib(gpu.get("memory_used_mib")), _mib(gpu.get("memory_total_mib")), _mib(gpu.get("memory_free_mib")))
    if gpu.get("memory_reserved_mib"):
        head += ", %s reserved" % _mib(gpu["memory_reserved_mib"])
    holders = []
    for process in gpu.get("processes") or []:
        who = process.get("compose_service") or process.get("container") or "pid %s" % process.get("pid")
        holders.append("%s %s" % (who, _mib(process.get("used_mib"))))
    parts = [head, ", ".join(holders) if holders else "no processes"]
    if gpu.get("unattributed_mib") is not None:
        parts.append("unattributed %s" % _mib(gpu["unattributed_mib"]))
    return " | ".join(parts)
