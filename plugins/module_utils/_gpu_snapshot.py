# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Recorded gpu_info readings ("snapshots"): a versioned JSON file per host.

A snapshot taken at the plateau, a day or two after the seats booted, is what placement plans
against; the free memory right after a restart is not. The file carries the schema name and
version, the host, when it was taken (UTC) and which source read it, then the ``gpus`` list
exactly as gpu_info returns it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import tempfile

SCHEMA = "llmfleet.seats/gpu_snapshot"
SCHEMA_VERSION = 1

_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_GPU_REQUIRED_INTS = ("index", "memory_total_mib", "memory_used_mib", "memory_free_mib")
_GPU_OPTIONAL_INTS = ("memory_reserved_mib", "attributed_mib", "unattributed_mib", "unlisted_mib")
_PROCESS_OPTIONAL_STRS = ("name", "container", "container_id", "compose_project", "compose_service",
                          "attribution")


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
    processes = gpu.get("processes")
    _check(isinstance(processes, list), path, where + ".processes", "a list", processes)
    for number, process in enumerate(processes):
        at = "%s.processes[%d]" % (where, number)
        _check(isinstance(process, dict), path, at, "an object", process)
        _check(_is_int(process.get("pid")) and process["pid"] > 0, path, at + ".pid", "a PID", process.get("pid"))
        used = process.get("used_mib")
        _check(used is None or (_is_int(used) and used >= 0), path, at + ".used_mib",
               "a whole number of MiB or null", used)
        for key in _PROCESS_OPTIONAL_STRS:
            value = process.get(key)
            _check(value is None or isinstance(value, str), path, "%s.%s" % (at, key), "a string or null", value)


def load_snapshot(text, path):
    """Parse and check a snapshot; SnapshotError names the file, the field and what was expected."""
    try:
        snapshot = json.loads(text)
    except ValueError as exc:
        raise SnapshotError("snapshot %s: not JSON (%s)" % (path, exc))
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
    return snapshot


def read_snapshot_file(path):
    """load_snapshot() on a file; unreadable files raise SnapshotError too."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as exc:
        raise SnapshotError("snapshot %s: cannot read it: %s" % (path, exc.strerror or exc))
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
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gpu_snapshot.", dir=directory)
    except OSError as exc:
        raise SnapshotError("snapshot %s: cannot write in %s: %s" % (path, directory, exc.strerror or exc))
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise SnapshotError("snapshot %s: cannot write it: %s" % (path, exc.strerror or exc))
    return True
