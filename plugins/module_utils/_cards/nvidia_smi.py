# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Read the GPUs through ``nvidia-smi --query-gpu`` / ``--query-compute-apps`` CSV.

The command lines are built here and the output parsed here; running the binary is the
caller's job (``read_nvidia_smi(run)``), so the parsers are tested on recorded outputs. Columns
are found by their header, values such as ``[N/A]`` or ``[Not Supported]`` become None, and
every failure nvidia-smi reports becomes one :class:`NvidiaSmiError` line saying what to do.
"""

from __future__ import annotations

import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB, SizeError, to_bytes

GPU_FIELDS = ("index", "uuid", "name", "pci.bus_id", "memory.total", "memory.reserved",
              "memory.used", "memory.free", "mig.mode.current", "driver_version")
# Drivers before R510 do not know memory.reserved.
LEGACY_GPU_FIELDS = tuple(field for field in GPU_FIELDS if field != "memory.reserved")
COMPUTE_APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")

# The exit codes of nvidia-smi(1), "RETURN VALUE".
EXIT_CODES = {
    2: "a supplied argument or flag is invalid",
    3: "the requested operation is not available on the target device",
    4: "the current user may not access this device or perform this operation",
    6: "a query to find an object was unsuccessful",
    8: "a device's external power cables are not properly attached",
    9: "the NVIDIA driver is not loaded",
    10: "the NVIDIA kernel detected an interrupt issue with a GPU",
    12: "the NVML shared library could not be found or loaded",
    13: "the local NVML does not implement this function",
    14: "the infoROM is corrupted",
    15: "the GPU has fallen off the bus or has otherwise become inaccessible",
    255: "other error or internal driver error",
}

# Header names that differ from the query names.
_HEADER_ALIASES = {"used_gpu_memory": "used_memory"}
_HEADER_TOKEN = lazy_regex(r"^[a-z][a-z0-9_.]*$")
_UNIT_SUFFIX = lazy_regex(r"\s*\[[^\]]*\]$")


class NvidiaSmiError(ValueError):
    """nvidia-smi failed or printed something unreadable; the message says what to do."""


class NvidiaSmiFieldError(NvidiaSmiError):
    """This nvidia-smi does not know a query field (older drivers)."""

    def __init__(self, message, field):
        super().__init__(message)
        self.field = field


def query_gpu_args(fields=GPU_FIELDS):
    return ["--query-gpu=" + ",".join(fields), "--format=csv,nounits"]


def query_compute_apps_args():
    return ["--query-compute-apps=" + ",".join(COMPUTE_APP_FIELDS), "--format=csv,nounits"]


def _first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def check_failure(args, rc, stdout, stderr):
    """Raise NvidiaSmiError for a failed run. Returns False when the driver sees no GPU, else True.

    nvidia-smi prints its errors on stdout or stderr depending on the release, so both are read.
    """
    text = "%s\n%s" % (stdout, stderr)
    command = "nvidia-smi " + " ".join(args)
    if "couldn't communicate with the NVIDIA driver" in text:
        raise NvidiaSmiError(
            "%s: nvidia-smi cannot talk to the NVIDIA driver (exit %d): the kernel module is not "
            "loaded; check `lsmod | grep nvidia` and `dmesg`, rebuild the module (DKMS) after a "
            "kernel update, and reboot" % (command, rc))
    handle = re.search(r"Unable to determine the device handle for [^\n]*", text)
    if handle:
        raise NvidiaSmiError(
            "%s: nvidia-smi cannot open a GPU (exit %d): \"%s\"; the card is lost or wedged: look "
            "for Xid errors in `dmesg`, drain the host's seats and reboot it"
            % (command, rc, " ".join(handle.group(0).split())))
    if "version mismatch" in text:
        raise NvidiaSmiError(
            "%s: \"%s\" (exit %d): the driver's library and kernel module differ, usually after "
            "a driver upgrade without a reboot; reboot the host" % (command, _first_line(text), rc))
    field = re.search(r'Field "([^"]+)" is not a valid field to query', text)
    if field:
        raise NvidiaSmiFieldError(
            "%s: this nvidia-smi does not know the field %s (exit %d); the driver is older than "
            "the query expects" % (command, field.group(1), rc), field.group(1))
    if "No devices were found" in text or "No supported GPUs were found" in text:
        return False
    if rc != 0:
        meaning = EXIT_CODES.get(rc, "an undocumented exit code")
        raise NvidiaSmiError("%s failed with exit code %d (%s): %s"
                             % (command, rc, meaning, _first_line(text) or "no output"))
    return True


def _is_unavailable(value):
    """``[N/A]``, ``[Not Supported]``, ``[Insufficient Permissions]``, ``N/A``... -> True."""
    return value == "N/A" or (value.startswith("[") and value.endswith("]"))


def _header(line):
    names = []
    for token in line.split(","):
        name = _UNIT_SUFFIX.sub("", token.strip())
        if not _HEADER_TOKEN.match(name):
            return None
        names.append(_HEADER_ALIASES.get(name, name))
    return names


def parse_query_csv(text, what, free_text):
    """Rows of ``nvidia-smi --query-*=... --format=csv`` as dicts keyed by field name.

    Returns ``(rows, notes)``: lines printed before the header (warnings some drivers emit)
    come back as notes. Unavailable values are None. A row with more commas than the header
    has them in its free-text column (``free_text``: a GPU or process name).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    header, notes = None, []
    while lines and header is None:
        line = lines.pop(0)
        header = _header(line)
        if header is None:
            notes.append(line.strip())
    if header is None:
        if notes:
            raise NvidiaSmiError("%s: expected a CSV header line, got %r" % (what, notes[0]))
        return [], notes
    rows = []
    for number, line in enumerate(lines, start=1):
        values = [value.strip() for value in line.split(",")]
        extra = len(values) - len(header)
        if extra < 0:
            raise NvidiaSmiError("%s: row %d has %d values for the %d columns %s: %r"
                                 % (what, number, len(values), len(header), ", ".join(header), line))
        if extra and free_text in header:
            at = header.index(free_text)
            values[at:at + extra + 1] = [", ".join(values[at:at + extra + 1])]
        elif extra:
            raise NvidiaSmiError("%s: row %d has more values than the columns %s: %r"
                                 % (what, number, ", ".join(header), line))
        rows.append({name: (None if _is_unavailable(value) else value)
                     for name, value in zip(header, values)})
    return rows, notes


def _mib(row, field, what, number):
    """A MiB figure (``46068`` with nounits, ``46068 MiB`` without), None when nvidia-smi
    cannot tell."""
    value = row.get(field)
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        size = to_bytes(value, field)
    except SizeError:
        size = None
    if size is None or not value.endswith("MiB") or size % MIB:
        raise NvidiaSmiError("%s: row %d, %s: expected a whole number of MiB, got %r"
                             % (what, number, field, value))
    return size // MIB


def _int(row, field, what, number):
    value = row.get(field)
    if value is None or not value.isdigit():
        raise NvidiaSmiError("%s: row %d, %s: expected a whole number, got %r"
                             % (what, number, field, value))
    return int(value)


def _mig_mode(value):
    return {"Enabled": True, "Disabled": False}.get(value)


def parse_gpus(text):
    """``--query-gpu`` output (GPU_FIELDS or LEGACY_GPU_FIELDS) -> (driver_version, gpus, notes)."""
    what = "nvidia-smi --query-gpu"
    rows, notes = parse_query_csv(text, what, free_text="name")
    gpus, driver_version = [], None
    for number, row in enumerate(rows, start=1):
        if not row.get("uuid"):
            raise NvidiaSmiError("%s: row %d has no GPU UUID: %r" % (what, number, row))
        driver_version = driver_version or row.get("driver_version")
        gpus.append({
            "index": _int(row, "index", what, number),
            "uuid": row["uuid"],
            "name": row.get("name"),
            "pci_bus_id": row.get("pci.bus_id"),
            "memory_total_mib": _mib(row, "memory.total", what, number),
            "memory_reserved_mib": _mib(row, "memory.reserved", what, number),
            "memory_used_mib": _mib(row, "memory.used", what, number),
            "memory_free_mib": _mib(row, "memory.free", what, number),
            "mig_mode": _mig_mode(row.get("mig.mode.current")),
            "processes": [],
        })
    return driver_version, gpus, notes


def parse_compute_apps(text):
    """``--query-compute-apps`` output -> (processes with ``gpu_uuid``, notes)."""
    what = "nvidia-smi --query-compute-apps"
    rows, notes = parse_query_csv(text, what, free_text="process_name")
    return [{
        "gpu_uuid": row.get("gpu_uuid"),
        "pid": _int(row, "pid", what, number),
        "used_mib": _mib(row, "used_memory", what, number),
        "name": row.get("process_name"),
    } for number, row in enumerate(rows, start=1)], notes


def read_nvidia_smi(run):
    """Everything gpu_info reports, through nvidia-smi. ``run(args)`` -> ``(rc, stdout, stderr)``.

    Returns ``{driver_version, nvml_version, cuda_version, gpus, warnings}`` shaped like
    ``_nvml.read_nvml()`` (nvidia-smi's CSV has no NVML or CUDA version: those are None).
    """
    warnings = []
    args = query_gpu_args()
    rc, out, err = run(args)
    try:
        has_gpus = check_failure(args, rc, out, err)
    except NvidiaSmiFieldError as exc:
        if exc.field != "memory.reserved":
            raise
        warnings.append("nvidia-smi does not know memory.reserved (driver before R510): "
                        "memory_used_mib includes reserved memory")
        args = query_gpu_args(LEGACY_GPU_FIELDS)
        rc, out, err = run(args)
        has_gpus = check_failure(args, rc, out, err)
    result = {"driver_version": None, "nvml_version": None, "cuda_version": None, "gpus": [],
              "warnings": warnings}
    if not has_gpus:
        return result
    result["driver_version"], result["gpus"], notes = parse_gpus(out)
    warnings.extend("nvidia-smi: " + note for note in notes)
    if not result["gpus"]:
        return result
    args = query_compute_apps_args()
    rc, out, err = run(args)
    check_failure(args, rc, out, err)
    apps, notes = parse_compute_apps(out)
    warnings.extend("nvidia-smi: " + note for note in notes)
    by_uuid = {gpu["uuid"]: gpu for gpu in result["gpus"]}
    for app in apps:
        gpu = by_uuid.get(app.pop("gpu_uuid"))
        if gpu is None:
            warnings.append("nvidia-smi lists PID %d on a device that --query-gpu did not report "
                            "(a MIG instance?); it is left out" % app["pid"])
            continue
        gpu["processes"].append(dict(app, gpu_instance_id=None, compute_instance_id=None))
    return result
