"""The NVML reader with the real nvidia-ml-py bindings calling the fake libnvidia-ml.so.1.

The bindings load ``libnvidia-ml.so.1`` once per process with ctypes; here that library is the
fake (tests/twin/fakes/nvml), loaded from its build path exactly as the dynamic loader would find it
on LD_LIBRARY_PATH (the integration tests do it that way, through real ansible runs). Each test
writes its own simulated-GPU state and points $FAKE_GPU_STATE at it.
"""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.nvml import NvmlError, read_nvml
from fakegpu.simulated import (
    RTX_PRO_6000_MAXQ,
    RTX_PRO_6000_MIB,
    fake_nvml_in_this_process,
    free_mib,
    gpu,
    proc,
    state,
    used_mib,
    write_state,
)


@pytest.fixture(scope="module", autouse=True)
def fake_nvml_loaded():
    with fake_nvml_in_this_process():
        yield


@pytest.fixture
def gpu_state(tmp_path, monkeypatch):
    """write(document) -> path, with $FAKE_GPU_STATE pointing at it."""
    path = tmp_path / "state.json"
    monkeypatch.setenv("FAKE_GPU_STATE", str(path))
    return lambda document: write_state(path, document)


FV_ML1 = [
    gpu(0, RTX_PRO_6000_MAXQ, RTX_PRO_6000_MIB, reserved_mib=532, background_mib=432, mig_mode=False, processes=[
        proc(201144, 27810, "vllm"), proc(202011, 3462, "python")]),
    gpu(1, RTX_PRO_6000_MAXQ, RTX_PRO_6000_MIB, reserved_mib=532, background_mib=434, mig_mode=None, processes=[
        proc(202230, 17733, "vllm")]),
]


def test_reads_every_gpu_as_the_state_describes_it(gpu_state):
    gpu_state(state(FV_ML1))
    reading = read_nvml()
    assert (reading["driver_version"], reading["nvml_version"], reading["cuda_version"]) == \
        ("580.95.05", "13.580.95.05", "13.0")
    assert reading["warnings"] == []
    first, second = reading["gpus"]
    assert first == {
        "index": 0, "uuid": FV_ML1[0]["uuid"], "name": RTX_PRO_6000_MAXQ, "pci_bus_id": "00000000:18:00.0",
        "memory_total_mib": 97887, "memory_reserved_mib": 532, "memory_used_mib": used_mib(FV_ML1[0]),
        "memory_free_mib": free_mib(FV_ML1[0]), "mig_mode": False,
        "processes": [
            {"pid": 201144, "used_mib": 27810, "name": "vllm", "gpu_instance_id": None, "compute_instance_id": None},
            {"pid": 202011, "used_mib": 3462, "name": "python", "gpu_instance_id": None, "compute_instance_id": None},
        ],
    }
    assert first["memory_used_mib"] == 432 + 27810 + 3462
    assert second["mig_mode"] is None      # NVML: Not Supported
    assert second["memory_free_mib"] == 97887 - 532 - 434 - 17733


def test_mig_instances_and_memory_the_driver_cannot_report(gpu_state):
    gpu_state(state([gpu(0, "NVIDIA A100-SXM4-40GB", 40960, mig_mode=True, processes=[
        proc(88120, None, "python3", gpu_instance_id=3, compute_instance_id=0),
        proc(88342, 9826, "python3", gpu_instance_id=5, compute_instance_id=0)])]))
    only = read_nvml()["gpus"][0]
    assert only["mig_mode"] is True
    assert [(p["used_mib"], p["gpu_instance_id"], p["compute_instance_id"]) for p in only["processes"]] == \
        [(None, 3, 0), (9826, 5, 0)]


def test_no_gpus(gpu_state):
    gpu_state(state([]))
    assert read_nvml()["gpus"] == []


def test_memory_moves_while_the_library_stays_loaded(gpu_state):
    document = state([gpu(0, processes=[proc(7, 1000)])])
    gpu_state(document)
    assert read_nvml()["gpus"][0]["memory_used_mib"] == 1000
    document["gpus"][0]["processes"].append(proc(8, 24000))
    gpu_state(document)
    assert read_nvml()["gpus"][0]["memory_used_mib"] == 25000


def test_a_driver_without_the_v2_memory_call_still_reads(gpu_state):
    gpu_state(state([gpu(0, reserved_mib=512, processes=[proc(7, 1000)])],
                    faults={"nvmlDeviceGetMemoryInfo_v2": "NVML_ERROR_FUNCTION_NOT_FOUND"}))
    reading = read_nvml()
    only = reading["gpus"][0]
    assert only["memory_reserved_mib"] is None
    assert only["memory_used_mib"] == 1512          # v1 counts reserved memory as used
    assert only["memory_free_mib"] == 143771 - 1512
    assert reading["warnings"] == ["GPU 0: this driver has no nvmlDeviceGetMemoryInfo_v2 "
                                   "(NVML_ERROR_FUNCTION_NOT_FOUND), so reserved memory is not reported "
                                   "separately and memory_used_mib includes it"]


def test_a_driver_before_r510_lists_processes_through_the_v2_call(gpu_state):
    gpu_state(state([gpu(0, processes=[proc(7, 1000, "python3")])],
                    faults={"nvmlDeviceGetComputeRunningProcesses_v3": "NVML_ERROR_FUNCTION_NOT_FOUND"}))
    assert [p["pid"] for p in read_nvml()["gpus"][0]["processes"]] == [7]


@pytest.mark.parametrize("faults, expected", [
    ({"nvmlInit": "NVML_ERROR_DRIVER_NOT_LOADED"},
     "NVML nvmlInit failed with NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded): the NVIDIA kernel module is "
     "not loaded: check `lsmod | grep nvidia` and `dmesg`; after a kernel update rebuild the module (DKMS) and reboot"),
    ({"nvmlInit": "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
     "NVML nvmlInit failed with NVML_ERROR_LIB_RM_VERSION_MISMATCH (RM has detected an NVML/RM version mismatch.): "
     "libnvidia-ml and the loaded kernel module come from different driver versions"),
    ({"gpu_lost": [1]},
     "NVML nvmlDeviceGetHandleByIndex on GPU 1 failed with NVML_ERROR_GPU_IS_LOST (GPU is lost): the GPU has "
     "fallen off the bus (look for Xid 79 in `dmesg`); its seats are dead: drain the host and reboot it"),
    ({"nvmlDeviceGetComputeRunningProcesses": "NVML_ERROR_NO_PERMISSION"},
     "NVML nvmlDeviceGetComputeRunningProcesses on GPU 0 failed with NVML_ERROR_NO_PERMISSION (Insufficient "
     "Permissions): this user may not query the GPU: run the task with become: true"),
    ({"nvmlDeviceGetUUID": "NVML_ERROR_FUNCTION_NOT_FOUND"},
     "NVML nvmlDeviceGetUUID on GPU 0 failed with NVML_ERROR_FUNCTION_NOT_FOUND (Function Not Found): this "
     "driver's NVML lacks the call"),
    ({"nvmlDeviceGetMemoryInfo_v2": "NVML_ERROR_TIMEOUT"},
     "NVML nvmlDeviceGetMemoryInfo_v2 on GPU 0 failed with NVML_ERROR_TIMEOUT (Timeout)"),
    ({"nvmlSystemGetDriverVersion": "NVML_ERROR_INVALID_STATE"},
     "NVML nvmlSystemGetDriverVersion failed with NVML_ERROR_INVALID_STATE (Invalid state)"),
])
def test_nvml_errors_are_named_with_what_to_do(gpu_state, faults, expected):
    gpu_state(state([gpu(0), gpu(1)], faults=faults))
    with pytest.raises(NvmlError) as failure:
        read_nvml()
    assert str(failure.value).startswith(expected)
    # Every failed read leaves NVML shut down, so the next one starts clean.
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_no_state_file_reads_as_a_driver_that_is_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_GPU_STATE", str(tmp_path / "absent.json"))
    with pytest.raises(NvmlError, match=r"^NVML nvmlInit failed with NVML_ERROR_DRIVER_NOT_LOADED"):
        read_nvml()


def test_the_fake_follows_the_nvml_contracts_the_bindings_rely_on(gpu_state):
    """Struct versions, the two-call process protocol and handles of lost GPUs, straight
    through the bindings (what a newer nvidia-ml-py would trip over first)."""
    gpu_state(state([gpu(0, processes=[proc(7, 10), proc(8, 20), proc(9, 30)]), gpu(1)], faults={"gpu_lost": [1]}))
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
            pynvml.nvmlDeviceGetMemoryInfo(handle, version=0x01000028)
        count = ctypes.c_uint(1)
        infos = (pynvml.c_nvmlProcessInfo_v3_t * 1)()
        status = pynvml.nvmlLib.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), infos)
        assert (status, count.value) == (pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 3)
        assert pynvml.nvmlDeviceGetHandleByUUID(pynvml.nvmlDeviceGetUUID(handle)).contents is not None
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetHandleByIndex(1)
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetHandleByIndex(2)
        assert pynvml.nvmlDeviceGetPciInfo(handle).busIdLegacy == "0000:18:00.0"
        assert pynvml.nvmlDeviceGetSerial(handle) == "1652123400000"
    finally:
        pynvml.nvmlShutdown()
