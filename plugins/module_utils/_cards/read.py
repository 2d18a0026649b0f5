# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The cards stage's entry: read the GPUs from NVML, nvidia-smi or a recorded snapshot,
attribute every process to its container, and record a snapshot when asked (gpu_info)."""

from __future__ import annotations

import os
import shutil
import socket

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.attribution import (
    Containers,
    attribute_processes,
    without_attribution,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.nvidia_smi import (
    NvidiaSmiError,
    read_nvidia_smi,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.nvml import HAS_PYNVML, NvmlError, read_nvml
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import (
    SnapshotError,
    build_snapshot,
    dump_snapshot,
    read_snapshot_file,
    utc_timestamp,
    write_snapshot_file,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import CommandError, CommandTimeout
from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import run as run_command
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker

SOURCES = ("auto", "nvml", "nvidia-smi", "snapshot")
# gpu_info's arguments (the module and its action plugin validate against the same spec)
GPU_INFO_SPEC = {
    "source": {"type": "str", "default": "auto", "choices": list(SOURCES)},
    "snapshot_path": {"type": "path"},
    "save_snapshot_path": {"type": "path"},
    "snapshot_host": {"type": "str"},
    "attribute_processes": {"type": "bool", "default": True},
    "docker_host": {"type": "str"},
}
GPU_INFO_REQUIRED_IF = [("source", "snapshot", ["snapshot_path"])]


class CardsError(ValueError):
    """The cards cannot be read as asked; the message says why in one line."""


class MissingLibrary(CardsError):
    """nvidia-ml-py is not importable and source=nvml asked for it."""


# A healthy nvidia-smi answers in a second or two; one that takes minutes waits on a wedged
# GPU or driver, and would hang the play with it.
NVIDIA_SMI_TIMEOUT_S = 120


def _run_nvidia_smi(binary):
    def run(args):
        try:
            return run_command([binary] + list(args), NVIDIA_SMI_TIMEOUT_S)
        except CommandTimeout as exc:
            raise NvidiaSmiError("%s: the NVIDIA driver is not answering, usually a wedged GPU; look for Xid "
                                 "errors in `dmesg`, drain the host's seats and reboot it" % exc) from None
        except CommandError as exc:
            raise NvidiaSmiError(str(exc)) from None
    return run


def read_live(source):
    """``(source used, reading)`` from NVML, or nvidia-smi when NVML cannot be used (auto)."""
    nvml_problem = None
    if source in ("auto", "nvml"):
        if not HAS_PYNVML and source == "nvml":
            raise MissingLibrary("nvidia-ml-py")
        try:
            return "nvml", read_nvml()
        except NvmlError as exc:
            if source == "nvml":
                raise CardsError(str(exc)) from None
            nvml_problem = str(exc)
    smi = shutil.which("nvidia-smi")
    try:
        if smi is None:
            raise NvidiaSmiError("nvidia-smi is not installed (not on PATH)")
        reading = read_nvidia_smi(_run_nvidia_smi(smi))
    except NvidiaSmiError as exc:
        raise CardsError("%s%s" % (exc, "; before that, " + nvml_problem if nvml_problem else "")) from None
    if nvml_problem:
        reading["warnings"].insert(0, "read with nvidia-smi because NVML could not be used: " + nvml_problem)
    return "nvidia-smi", reading


MEMINFO = "/proc/meminfo"


def host_memory(path=MEMINFO):
    """The host's RAM from the kernel (``/proc/meminfo``): ``{"total_mib", "available_mib"}``,
    or None when it cannot be read; what a seat that pins host memory is checked against."""
    try:
        with open(path, encoding="ascii") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        return {"total_mib": int(fields["MemTotal"].split()[0]) // 1024,
                "available_mib": int(fields["MemAvailable"].split()[0]) // 1024}
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _snapshot_summary(path, snapshot):
    return {"path": path, "host": snapshot["host"], "taken_at": snapshot["taken_at"],
            "source": snapshot["source"], "schema_version": snapshot["schema_version"]}


def gpu_info(params, check_mode=False, running=None):
    """read_cards with gpu_info's validated arguments."""
    return read_cards(params["source"], params["snapshot_path"], params["save_snapshot_path"],
                      params["snapshot_host"], params["attribute_processes"], params["docker_host"],
                      check_mode, running)


def read_cards(source="auto", snapshot_path=None, save_snapshot_path=None, snapshot_host=None,
               attribute=True, docker_host=None, check_mode=False, running=None):
    """gpu_info's result: ``changed``, ``source``, ``gpus``, the driver's versions, ``snapshot``
    when one was read or written, and ``warnings``. CardsError says what is wrong. ``running``
    reads what a container outside the collection runs (Containers)."""
    if source not in SOURCES:
        raise CardsError("source: expected one of %s, got %r" % (", ".join(SOURCES), source))
    if source == "snapshot":
        if not snapshot_path:
            raise CardsError("snapshot_path: required with source=snapshot")
        if save_snapshot_path:
            raise CardsError("save_snapshot_path: a snapshot is recorded from a live source "
                             "(auto, nvml or nvidia-smi), not from another snapshot; copy the "
                             "file to keep a second one")
        try:
            snapshot = read_snapshot_file(snapshot_path)
        except SnapshotError as exc:
            raise CardsError(str(exc)) from None
        result = {"changed": False, "source": "snapshot", "gpus": snapshot["gpus"],
                  "driver_version": snapshot.get("driver_version"),
                  "nvml_version": snapshot.get("nvml_version"),
                  "cuda_version": snapshot.get("cuda_version"),
                  "snapshot": _snapshot_summary(os.path.abspath(snapshot_path), snapshot), "warnings": []}
        if "watch" in snapshot:
            # a plateau snapshot playbooks/watch_plateau.yml wrote: its verdict, for the next report
            result["watch"] = snapshot["watch"]
        return result
    if snapshot_path:
        raise CardsError("snapshot_path: only read with source=snapshot (source is %s); to "
                         "record this reading use save_snapshot_path" % source)

    used, reading = read_live(source)
    warnings = reading["warnings"]
    if attribute:
        gpus, attribution_warnings = attribute_processes(reading["gpus"], Containers(Docker(docker_host), running))
        warnings.extend(attribution_warnings)
    else:
        gpus = without_attribution(reading["gpus"], "not attempted (attribute_processes=false)")
    result = {"changed": False, "source": used, "gpus": gpus,
              "driver_version": reading["driver_version"], "nvml_version": reading["nvml_version"],
              "cuda_version": reading["cuda_version"], "host_memory": host_memory(), "warnings": warnings}
    if save_snapshot_path:
        snapshot = build_snapshot(result, snapshot_host or socket.gethostname(), utc_timestamp())
        try:
            result["changed"] = write_snapshot_file(save_snapshot_path, dump_snapshot(snapshot), check_mode)
        except SnapshotError as exc:
            raise CardsError(str(exc)) from None
        result["snapshot"] = _snapshot_summary(os.path.abspath(save_snapshot_path), snapshot)
    return result
