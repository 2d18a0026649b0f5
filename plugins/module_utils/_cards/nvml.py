# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Read the GPUs through NVML with the nvidia-ml-py bindings (``import pynvml``).

The import is guarded: a host without the bindings gets ``HAS_PYNVML = False`` and the module
says how to install them. Every NVML failure becomes one :class:`NvmlError` line that names the
call, the NVML error by name and what a person can do about it.
"""

from __future__ import annotations

import traceback

try:
    import pynvml
except ImportError:
    pynvml = None
    PYNVML_IMPORT_ERROR = traceback.format_exc()
else:
    PYNVML_IMPORT_ERROR = None

from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB, bytes_to_mib

HAS_PYNVML = pynvml is not None

# NVML's "not available" marker for unsigned ints (MIG instance ids outside MIG).
_NOT_AVAILABLE_UINT = 0xFFFFFFFF

# What to do about the errors an operator meets; the rest get NVML's own words.
_ADVICE = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (
        "libnvidia-ml.so.1 is not on this host's library path: install the NVIDIA driver's "
        "utilities package, or read with source=nvidia-smi or a recorded snapshot"),
    "NVML_ERROR_DRIVER_NOT_LOADED": (
        "the NVIDIA kernel module is not loaded: check `lsmod | grep nvidia` and `dmesg`; after "
        "a kernel update rebuild the module (DKMS) and reboot"),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        "libnvidia-ml and the loaded kernel module come from different driver versions, usually "
        "a driver upgrade without a reboot: reboot the host (or reload the nvidia modules once "
        "no seat runs)"),
    "NVML_ERROR_FUNCTION_NOT_FOUND": (
        "this driver's NVML lacks the call, so the driver is older than these nvidia-ml-py "
        "bindings expect: upgrade the driver, or install the nvidia-ml-py release that matches it"),
    "NVML_ERROR_GPU_IS_LOST": (
        "the GPU has fallen off the bus (look for Xid 79 in `dmesg`); its seats are dead: drain "
        "the host and reboot it, and have the card checked if it happens again"),
    "NVML_ERROR_NO_PERMISSION": "this user may not query the GPU: run the task with become: true",
    "NVML_ERROR_RESET_REQUIRED": (
        "the GPU needs a reset: stop its seats and run `nvidia-smi -r -i <index>`, or reboot"),
    "NVML_ERROR_UNKNOWN": "the driver gave no reason: check `dmesg` for Xid errors",
}


class NvmlError(ValueError):
    """NVML could not be read; the message names the call, the error and the remedy."""


def nvml_error_name(code):
    """``NVML_ERROR_GPU_IS_LOST`` for 15: the names operators search for."""
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == code:
            return name
    return "NVML error %d" % code


def nvml_failure(what, exc):
    """The NvmlError for ``exc`` raised by ``what``: the error by name, then the remedy."""
    name = nvml_error_name(exc.value)
    advice = _ADVICE.get(name)
    message = "NVML %s failed with %s (%s)" % (what, name, exc)
    return NvmlError(message + (": " + advice if advice else ""))


def _call(what, func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except pynvml.NVMLError as exc:
        raise nvml_failure(what, exc)


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _memory(handle, label, warnings):
    """Total, reserved, used and free MiB; reserved is None where the driver lacks the v2 call.

    Rounding is conservative for planning: used and reserved round up, free rounds down.
    """
    try:
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        reserved = bytes_to_mib(mem.reserved)
    except pynvml.NVMLError as exc:
        if exc.value not in (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NOT_SUPPORTED,
                             pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH):
            raise nvml_failure("nvmlDeviceGetMemoryInfo_v2 on %s" % label, exc)
        warnings.append("%s: this driver has no nvmlDeviceGetMemoryInfo_v2 (%s), so reserved "
                        "memory is not reported separately and memory_used_mib includes it"
                        % (label, nvml_error_name(exc.value)))
        mem = _call("nvmlDeviceGetMemoryInfo on %s" % label, pynvml.nvmlDeviceGetMemoryInfo, handle)
        reserved = None
    return {
        "memory_total_mib": mem.total // MIB,
        "memory_reserved_mib": reserved,
        "memory_used_mib": bytes_to_mib(mem.used),
        "memory_free_mib": mem.free // MIB,
    }


def _compute_processes(handle, label):
    """The card's compute processes; drivers before R510 only have the _v2 call."""
    try:
        return pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLLibraryMismatchError):
        return _call("nvmlDeviceGetComputeRunningProcesses_v2 on %s" % label,
                     pynvml.nvmlDeviceGetComputeRunningProcesses_v2, handle)
    except pynvml.NVMLError as exc:
        raise nvml_failure("nvmlDeviceGetComputeRunningProcesses on %s" % label, exc)


def _process_name(pid):
    try:
        return _text(pynvml.nvmlSystemGetProcessName(pid)) or None
    except pynvml.NVMLError:
        return None  # gone, or in a PID namespace NVML cannot see into


def _instance_id(value):
    return None if value in (None, _NOT_AVAILABLE_UINT) else value


def _mig_mode(handle, label):
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError as exc:
        if exc.value in (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND):
            return None  # not a MIG-capable card
        raise nvml_failure("nvmlDeviceGetMigMode on %s" % label, exc)
    return current == pynvml.NVML_DEVICE_MIG_ENABLE


def _read_gpu(index, warnings):
    label = "GPU %d" % index
    handle = _call("nvmlDeviceGetHandleByIndex on " + label, pynvml.nvmlDeviceGetHandleByIndex, index)
    gpu = {
        "index": index,
        "uuid": _text(_call("nvmlDeviceGetUUID on " + label, pynvml.nvmlDeviceGetUUID, handle)),
        "name": _text(_call("nvmlDeviceGetName on " + label, pynvml.nvmlDeviceGetName, handle)),
        "pci_bus_id": _text(_call("nvmlDeviceGetPciInfo on " + label,
                                  pynvml.nvmlDeviceGetPciInfo, handle).busId),
    }
    gpu.update(_memory(handle, label, warnings))
    gpu["mig_mode"] = _mig_mode(handle, label)
    gpu["processes"] = [{
        "pid": proc.pid,
        "used_mib": None if proc.usedGpuMemory is None else bytes_to_mib(proc.usedGpuMemory),
        "name": _process_name(proc.pid),
        "gpu_instance_id": _instance_id(getattr(proc, "gpuInstanceId", None)),
        "compute_instance_id": _instance_id(getattr(proc, "computeInstanceId", None)),
    } for proc in _compute_processes(handle, label)]
    return gpu


def _cuda_version():
    """``13.0`` from NVML's 13000, as nvidia-smi prints it; None where the call is missing."""
    try:
        version = pynvml.nvmlSystemGetCudaDriverVersion()
    except pynvml.NVMLError:
        return None
    return "%d.%d" % (version // 1000, version % 1000 // 10)


def read_nvml():
    """Everything gpu_info reports, through NVML. Raises NvmlError.

    Returns ``{driver_version, nvml_version, cuda_version, gpus, warnings}``; each GPU has
    ``index, uuid, name, pci_bus_id, memory_{total,reserved,used,free}_mib, mig_mode`` and
    ``processes`` (``pid`` as the host sees it, ``used_mib``, ``name``, MIG instance ids).
    """
    if pynvml is None:
        raise NvmlError("NVML: the nvidia-ml-py bindings (import pynvml) are not installed on this host")
    _call("nvmlInit", pynvml.nvmlInit)
    try:
        warnings = []
        result = {
            "driver_version": _text(_call("nvmlSystemGetDriverVersion", pynvml.nvmlSystemGetDriverVersion)),
            "nvml_version": _text(_call("nvmlSystemGetNVMLVersion", pynvml.nvmlSystemGetNVMLVersion)),
            "cuda_version": _cuda_version(),
        }
        count = _call("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
        result["gpus"] = [_read_gpu(index, warnings) for index in range(count)]
        result["warnings"] = warnings
        return result
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass  # the reading stands; a failed shutdown leaves nothing to undo
