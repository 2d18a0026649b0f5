"""The simulated GPU for tests: the fake NVML library, state files, and recorded nvidia-smi runs.

The state file format is CONTRIBUTING.md's "The simulated GPU"; ``tests/twin/fakes/nvml`` (the
``libnvidia-ml.so.1`` the real nvidia-ml-py loads) and ``tests/twin/fakes/bin/nvidia-smi`` only read
it, so a test writes one with :func:`write_state` and runs a process with :func:`fake_gpu_env`.

    lib = build_fake_nvml()
    path = write_state(tmp_path / "state.json", state([gpu(0, processes=[proc(4242, 20480)])]))
    env = fake_gpu_env(path, lib)          # FAKE_GPU_STATE, LD_LIBRARY_PATH, PATH
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import tempfile
import uuid as uuidlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
FAKES = REPO / "tests" / "twin" / "fakes"
FAKE_BIN = FAKES / "bin"
FAKE_NVIDIA_SMI = FAKE_BIN / "nvidia-smi"
NVIDIA_SMI_FIXTURES = REPO / "tests" / "unit" / "fixtures" / "nvidia_smi"

H200_MIB = 143771
RTX_PRO_6000_MIB = 97887
RTX_PRO_6000_MAXQ = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"


def build_fake_nvml(out_dir: Path | None = None) -> Path:
    """Build ``libnvidia-ml.so.1`` (gcc; skipped when up to date) and return its path.

    Default location: ``.build/fakes/nvml/``. Put its directory on LD_LIBRARY_PATH.
    """
    command = [str(FAKES / "build")] + ([str(out_dir)] if out_dir else [])
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError("building the fake NVML failed:\n%s%s" % (proc.stdout, proc.stderr))
    return Path(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def fake_nvml_in_this_process(library: Path | None = None):
    """Make this process's nvidia-ml-py use the fake library, as LD_LIBRARY_PATH does for a new
    process (the bindings load ``libnvidia-ml.so.1`` once, with ctypes). Restored on exit."""
    import pynvml

    previous = pynvml.nvmlLib
    pynvml.nvmlLib = ctypes.CDLL(str(library or build_fake_nvml()))
    pynvml._nvmlGetFunctionPointer_cache.clear()
    try:
        yield
    finally:
        pynvml.nvmlLib = previous
        pynvml._nvmlGetFunctionPointer_cache.clear()


def gpu_uuid(index: int, seed: str = "llmfleet") -> str:
    """A stable, well-formed GPU UUID for a test GPU."""
    return "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "%s/%d" % (seed, index)))


def proc(pid: int, used_mib: int | None, name: str | None = None, **extra) -> dict:
    """A process entry of a GPU (``used_mib=None``: the driver cannot say, as on MIG)."""
    entry = {"pid": pid, "used_mib": used_mib}
    if name:
        entry["name"] = name
    entry.update(extra)
    return entry


def gpu(index: int, name: str = "NVIDIA H200", total_mib: int = H200_MIB, reserved_mib: int = 0,
        background_mib: int = 0, processes: list | tuple = (), mig_mode: bool | None = False,
        uuid: str | None = None, pci_bus_id: str | None = None, serial: str | None = None) -> dict:
    """One simulated GPU. ``mig_mode=None``: a card without MIG (NVML says Not Supported)."""
    return {
        "index": index,
        "uuid": uuid or gpu_uuid(index),
        "name": name,
        "pci_bus_id": pci_bus_id or "00000000:%02X:00.0" % (0x18 + 0x10 * index),
        "serial": serial or "16521234%05d" % index,
        "memory_total_mib": total_mib,
        "memory_reserved_mib": reserved_mib,
        "background_used_mib": background_mib,
        "mig_mode": mig_mode,
        "processes": list(processes),
    }


def state(gpus: list, faults: dict | None = None, driver_version: str = "580.95.05",
          nvml_version: str = "13.580.95.05", cuda_driver_version: int = 13000) -> dict:
    """A whole state document (schema 1)."""
    return {"schema": 1, "driver_version": driver_version, "nvml_version": nvml_version,
            "cuda_driver_version": cuda_driver_version, "gpus": gpus, "faults": faults or {}}


def used_mib(gpu_entry: dict) -> int:
    """What the driver reports as used: background + every process (CONTRIBUTING.md)."""
    return gpu_entry["background_used_mib"] + sum(p["used_mib"] or 0 for p in gpu_entry["processes"])


def free_mib(gpu_entry: dict) -> int:
    return gpu_entry["memory_total_mib"] - gpu_entry["memory_reserved_mib"] - used_mib(gpu_entry)


def write_state(path: Path, document: dict) -> Path:
    """Replace ``path`` atomically (temp file + rename), as every writer of the state must."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".state.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump(document, handle, indent=1)
    os.replace(tmp, path)
    return path


def fake_gpu_env(state_path: Path, nvml_library: Path | None = None, nvidia_smi: bool = True) -> dict:
    """Environment variables that make a process see the simulated GPU of ``state_path``:
    the fake NVML (when ``nvml_library`` is given) and the fake nvidia-smi first on PATH."""
    env = {"FAKE_GPU_STATE": str(state_path)}
    if nvml_library:
        env["LD_LIBRARY_PATH"] = str(Path(nvml_library).parent)
    if nvidia_smi:
        env["PATH"] = "%s:%s" % (FAKE_BIN, os.environ.get("PATH", ""))
    return env


def fixture(name: str) -> Path:
    """A recorded nvidia-smi output under tests/unit/fixtures/nvidia_smi/ (``h200_x8``...)."""
    path = NVIDIA_SMI_FIXTURES / (name if name.endswith(".txt") else name + ".txt")
    if not path.exists():
        raise FileNotFoundError(path)
    return path


def replaying_nvidia_smi(name: str):
    """``run(args) -> (rc, stdout, stderr)`` that runs the fake nvidia-smi replaying a fixture:
    the callable ``_nvidia_smi.read_nvidia_smi`` takes, crossing a real process boundary."""
    env = dict(os.environ, FAKE_NVIDIA_SMI_FIXTURE=str(fixture(name)))

    def run(args):
        done = subprocess.run([str(FAKE_NVIDIA_SMI)] + list(args), env=env, capture_output=True,
                              text=True, check=False)
        return done.returncode, done.stdout, done.stderr
    return run
