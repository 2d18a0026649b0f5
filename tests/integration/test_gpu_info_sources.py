"""gpu_info through real Ansible runs on localhost, for every source: the real nvidia-ml-py
bindings loading the fake libnvidia-ml.so.1 from LD_LIBRARY_PATH, the fake nvidia-smi first on
PATH (rendering the same state, or replaying recorded real outputs), and snapshots on disk. No
Docker here: the processes are host processes or gone.

The runs that stand alone are the tasks of one ansible-playbook (RUNS), each with its host's
environment: a run of Ansible costs half a CPU-second before its first task, and these are a
score of them. The snapshot's runs follow one another on one file, each an ``ansible`` ad-hoc
run."""

from __future__ import annotations

import json
import shutil

import pytest

from support.adhoc import play_tasks, run_module
from fakegpu.simulated import (
    RTX_PRO_6000_MAXQ,
    RTX_PRO_6000_MIB,
    build_fake_nvml,
    fake_gpu_env,
    fixture,
    gpu,
    proc,
    state,
    write_state,
)

pytestmark = pytest.mark.slow

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
# PIDs no process has (the kernel's limit is 4194304): NVML still lists them, as for a process
# in a PID namespace gpu_info cannot see.
GONE = (4194000, 4194001, 4194002)
FV_ML1 = [
    gpu(0, RTX_PRO_6000_MAXQ, RTX_PRO_6000_MIB, reserved_mib=532, background_mib=432,
        processes=[proc(GONE[0], 27810, "vllm"), proc(GONE[1], 3462, "python")]),
    gpu(1, RTX_PRO_6000_MAXQ, RTX_PRO_6000_MIB, reserved_mib=532, background_mib=434,
        processes=[proc(GONE[2], 17733, "vllm")]),
    gpu(2, RTX_PRO_6000_MAXQ, RTX_PRO_6000_MIB, reserved_mib=532),
    gpu(3, RTX_PRO_6000_MAXQ, RTX_PRO_6000_MIB, reserved_mib=532),
]


@pytest.fixture(scope="module")
def nvml_library():
    return build_fake_nvml()


@pytest.fixture
def cards(tmp_path, nvml_library):
    """write(gpus, faults) -> the environment of a host with those simulated cards."""
    def write(gpus=None, faults=None):
        path = write_state(tmp_path / "state.json", state(FV_ML1 if gpus is None else gpus, faults=faults))
        return fake_gpu_env(path, nvml_library)
    return write


def gpu_info(env, check_mode=False, **args):
    """One ``ansible localhost -m llmfleet.seats.gpu_info`` run: (exit code, the host's result)."""
    return run_module("llmfleet.seats.gpu_info", args, extra_env=env, check_mode=check_mode)


def run(gpus=None, faults=None, system_python=False, no_library=False, recording=None, **args):
    """A gpu_info run of RUNS: its module arguments, on a host with ``gpus`` (fv-ml1's cards
    unless said) and the driver ``faults``; run by the system's python3, which has no
    nvidia-ml-py; with no libnvidia-ml on the library path; the fake nvidia-smi replaying
    ``recording``."""
    return {"gpus": FV_ML1 if gpus is None else gpus, "faults": faults, "system_python": system_python,
            "no_library": no_library, "recording": recording, "args": args}


LOST_GPU = {"gpu_lost": [1]}
NO_DRIVER = {"nvmlInit": "NVML_ERROR_DRIVER_NOT_LOADED"}
OLD_DRIVER = {"nvmlDeviceGetMemoryInfo_v2": "NVML_ERROR_FUNCTION_NOT_FOUND"}
RECORDED = ("h200_x8", "a100_mig", "old_driver_no_reserved", "no_devices")
RECORDED_FAILURES = ("no_driver", "version_mismatch", "malformed_row")
RUNS = {
    "nvml": run(source="nvml"),
    "nvidia-smi": run(source="nvidia-smi"),
    "auto": run(),
    "auto without libnvidia-ml": run(no_library=True),
    "nvml without the bindings": run(source="nvml", system_python=True),
    "auto without the bindings": run(system_python=True),
    "nvml, driver not loaded": run(faults=NO_DRIVER, source="nvml"),
    "nvidia-smi, driver not loaded": run(faults=NO_DRIVER, source="nvidia-smi"),
    "auto, driver not loaded": run(faults=NO_DRIVER),
    "nvml, a lost GPU": run(faults=LOST_GPU, source="nvml"),
    "nvidia-smi, a lost GPU": run(faults=LOST_GPU, source="nvidia-smi"),
    "nvml, an old driver": run(faults=OLD_DRIVER, source="nvml"),
    "nvml, no GPU": run(gpus=[], source="nvml"),
    "nvidia-smi, no GPU": run(gpus=[], source="nvidia-smi"),
    **{"recorded " + name: run(recording=name, source="nvidia-smi", attribute_processes=False) for name in RECORDED},
    **{"recorded failure " + name: run(recording=name, source="nvidia-smi") for name in RECORDED_FAILURES},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, nvml_library):
    """name -> the host's result of each run of RUNS, all tasks of one real ansible-playbook
    (each with its own environment and python; a failed one does not stop the others)."""
    root = tmp_path_factory.mktemp("gpu-info-runs")
    (root / "no-driver-lib").mkdir()
    tasks = []
    for number, (name, case) in enumerate(RUNS.items()):
        if case["system_python"] and SYSTEM_PYTHON is None:
            continue  # its test is skipped
        env = fake_gpu_env(write_state(root / ("state-%d.json" % number), state(case["gpus"], faults=case["faults"])),
                           nvml_library)
        if case["no_library"]:
            env["LD_LIBRARY_PATH"] = str(root / "no-driver-lib")
        if case["recording"]:
            env["FAKE_NVIDIA_SMI_FIXTURE"] = str(fixture(case["recording"]))
        task = {"name": name, "llmfleet.seats.gpu_info": case["args"], "environment": env, "ignore_errors": True}
        if case["system_python"]:
            task["vars"] = {"ansible_python_interpreter": SYSTEM_PYTHON}
        tasks.append(task)
    return play_tasks(tasks, root)[1]


def comparable(result):
    """What both live sources must agree on."""
    return [{key: value for key, value in g.items() if key != "processes"} | {
        "processes": [(p["pid"], p["used_mib"], p["name"]) for p in g["processes"]]} for g in result["gpus"]]


def test_nvml_and_nvidia_smi_read_the_same_cards(runs):
    by_nvml, by_smi = runs["nvml"], runs["nvidia-smi"]
    assert not by_nvml.get("failed") and not by_smi.get("failed")
    assert (by_nvml["source"], by_smi["source"]) == ("nvml", "nvidia-smi")
    assert comparable(by_nvml) == comparable(by_smi)
    gpu0 = by_nvml["gpus"][0]
    assert (gpu0["memory_total_mib"], gpu0["memory_reserved_mib"], gpu0["memory_used_mib"], gpu0["memory_free_mib"]) \
        == (97887, 532, 432 + 27810 + 3462, 97887 - 532 - 432 - 27810 - 3462)
    assert [g["memory_free_mib"] for g in by_nvml["gpus"]][2:] == [97355, 97355]
    assert by_nvml["cuda_version"] == "13.0" and by_smi["cuda_version"] is None
    assert by_nvml["driver_version"] == by_smi["driver_version"] == "580.95.05"
    # NVML reports host PIDs; these are not visible here, and each process says so.
    assert gpu0["processes"][0]["attribution"].startswith("PID %d is not visible here" % GONE[0])
    assert gpu0["unattributed_mib"] == gpu0["memory_used_mib"] and gpu0["unlisted_mib"] == 432


def test_auto_uses_nvml_and_falls_back_to_nvidia_smi_saying_why(runs):
    assert runs["auto"]["source"] == "nvml"
    result = runs["auto without libnvidia-ml"]
    assert not result.get("failed") and result["source"] == "nvidia-smi"
    assert result["warnings"][0].startswith(
        "read with nvidia-smi because NVML could not be used: NVML nvmlInit failed with "
        "NVML_ERROR_LIBRARY_NOT_FOUND (NVML Shared Library Not Found): libnvidia-ml.so.1 is not on this "
        "host's library path")
    assert len(result["gpus"]) == 4


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no /usr/bin/python3")
def test_a_host_without_the_bindings(runs):
    result = runs["nvml without the bindings"]
    assert result["failed"] is True
    assert result["msg"].startswith("Failed to import the required Python library (nvidia-ml-py)")
    assert "to read the GPUs with source=nvml" in result["msg"]
    result = runs["auto without the bindings"]
    assert not result.get("failed") and result["source"] == "nvidia-smi"
    assert result["warnings"][0] == ("read with nvidia-smi because NVML could not be used: NVML: the "
                                     "nvidia-ml-py bindings (import pynvml) are not installed on this host")


def test_driver_not_loaded(runs):
    nvml_msg = ("NVML nvmlInit failed with NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded): the NVIDIA kernel "
                "module is not loaded: check `lsmod | grep nvidia` and `dmesg`; after a kernel update rebuild "
                "the module (DKMS) and reboot")
    smi_msg = ": nvidia-smi cannot talk to the NVIDIA driver (exit 9): the kernel module is not loaded"
    result = runs["nvml, driver not loaded"]
    assert result["failed"] and result["msg"] == nvml_msg
    result = runs["nvidia-smi, driver not loaded"]
    assert result["failed"] and result["msg"].startswith("nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,")
    assert smi_msg in result["msg"]
    result = runs["auto, driver not loaded"]
    assert result["failed"] and result["msg"].endswith("; before that, " + nvml_msg)
    assert "\n" not in result["msg"]


def test_a_lost_gpu_is_named(runs):
    result = runs["nvml, a lost GPU"]
    assert result["failed"] and result["msg"].startswith(
        "NVML nvmlDeviceGetHandleByIndex on GPU 1 failed with NVML_ERROR_GPU_IS_LOST (GPU is lost): the GPU has "
        "fallen off the bus (look for Xid 79 in `dmesg`)")
    result = runs["nvidia-smi, a lost GPU"]
    assert result["failed"] and ('"Unable to determine the device handle for GPU00000000:28:00.0: GPU is lost. Reboot '
                                 'the system to recover this GPU"' in result["msg"])


def test_an_old_driver_without_reserved_memory(runs):
    result = runs["nvml, an old driver"]
    assert not result.get("failed")
    gpu0 = result["gpus"][0]
    assert gpu0["memory_reserved_mib"] is None and gpu0["memory_used_mib"] == 532 + 432 + 27810 + 3462
    assert len(result["warnings"]) == 4
    assert result["warnings"][0].startswith("GPU 0: this driver has no nvmlDeviceGetMemoryInfo_v2")


def test_a_host_with_no_gpu(runs):
    for source in ("nvml", "nvidia-smi"):
        result = runs["%s, no GPU" % source]
        assert not result.get("failed") and result["gpus"] == [] and result["source"] == source


@pytest.mark.parametrize("recording, check", [
    ("h200_x8", lambda r: [g["memory_total_mib"] for g in r["gpus"]] == [143771] * 8
        and sum(len(g["processes"]) for g in r["gpus"]) == 7),
    ("a100_mig", lambda r: [g["mig_mode"] for g in r["gpus"]] == [True, None]
        and [p["used_mib"] for p in r["gpus"][0]["processes"]] == [None, 9826, None]
        and r["gpus"][0]["unlisted_mib"] == 24110 - 9826),
    ("old_driver_no_reserved", lambda r: r["gpus"][0]["memory_reserved_mib"] is None
        and r["warnings"] == ["nvidia-smi does not know memory.reserved (driver before R510): memory_used_mib "
                              "includes reserved memory"]),
    ("no_devices", lambda r: r["gpus"] == [] and r["driver_version"] is None),
])
def test_recorded_nvidia_smi_outputs_through_the_module(runs, recording, check):
    result = runs["recorded " + recording]
    assert not result.get("failed") and check(result), result


@pytest.mark.parametrize("recording, message", [
    ("no_driver", "nvidia-smi cannot talk to the NVIDIA driver (exit 9)"),
    ("version_mismatch", "the driver's library and kernel module differ, usually after a driver upgrade "
                         "without a reboot; reboot the host"),
    ("malformed_row", "nvidia-smi --query-gpu: row 1 has 5 values for the 10 columns"),
])
def test_recorded_failures_are_one_line(runs, recording, message):
    result = runs["recorded failure " + recording]
    assert result["failed"] and message in result["msg"] and "\n" not in result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_record_a_snapshot_then_read_it(cards, tmp_path):
    env = cards()
    path = tmp_path / "plateau" / "fv-ml1.json"
    path.parent.mkdir()
    rc, result = gpu_info(env, check_mode=True, save_snapshot_path=str(path), snapshot_host="fv-ml1")
    assert rc == 0 and result["changed"] is True and not path.exists()
    rc, saved = gpu_info(env, save_snapshot_path=str(path), snapshot_host="fv-ml1")
    assert rc == 0 and saved["changed"] is True
    document = json.loads(path.read_text())
    assert (document["schema"], document["schema_version"], document["host"], document["source"]) == \
        ("llmfleet.seats/gpu_snapshot", 1, "fv-ml1", "nvml")
    assert document["gpus"] == saved["gpus"] and document["taken_at"] == saved["snapshot"]["taken_at"]

    # The cards move on; the snapshot does not.
    write_state(env["FAKE_GPU_STATE"], state(FV_ML1[:1]))
    rc, read = gpu_info(env, source="snapshot", snapshot_path=str(path))
    assert rc == 0 and read["changed"] is False and read["source"] == "snapshot"
    assert read["gpus"] == saved["gpus"] and len(read["gpus"]) == 4
    assert read["snapshot"] == saved["snapshot"]

    path.write_text(path.read_text().replace('"schema_version": 1', '"schema_version": 7'))
    rc, result = gpu_info(env, source="snapshot", snapshot_path=str(path))
    assert rc != 0 and result["msg"] == ("snapshot %s: schema_version 7 was written by a newer llmfleet.seats; "
                                         "this one reads version 1" % path)
