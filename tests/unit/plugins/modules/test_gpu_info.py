"""gpu_info's main(): snapshots in and out, check mode, refusals, and a live read through the real
nvidia-ml-py bindings on the fake NVML (the same reads through real ansible runs, nvidia-smi and
a real Docker engine are in tests/integration/test_gpu_info_*.py)."""

from __future__ import annotations

import json
import os

import pytest
from support.module_args import patch_module_args

from ansible_collections.llmfleet.seats.plugins.module_utils._cards import read
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import build_snapshot, dump_snapshot
from ansible_collections.llmfleet.seats.plugins.modules import gpu_info
from fakegpu.simulated import fake_nvml_in_this_process, gpu, proc, state, write_state


@pytest.fixture(scope="module", autouse=True)
def fake_nvml_loaded():
    with fake_nvml_in_this_process():
        yield


@pytest.fixture
def cards(tmp_path, monkeypatch):
    """One H200 holding this test process (a host process, not in a container)."""
    path = write_state(tmp_path / "state.json", state([gpu(0, reserved_mib=512, background_mib=300,
                                                           processes=[proc(os.getpid(), 2048, "pytest")])]))
    monkeypatch.setenv("FAKE_GPU_STATE", str(path))
    monkeypatch.setenv("DOCKER_HOST", "unix://%s" % (tmp_path / "no-docker.sock"))
    return path


def run(capsys, check_mode=False, **args):
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        gpu_info.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_live_read_through_nvml(cards, capsys):
    code, result = run(capsys, source="nvml")
    assert code == 0 and result["changed"] is False and result["source"] == "nvml"
    only = result["gpus"][0]
    assert (only["memory_used_mib"], only["memory_reserved_mib"], only["memory_free_mib"]) == \
        (2348, 512, 143771 - 512 - 2348)
    me = only["processes"][0]
    assert me["pid"] == os.getpid() and me["container"] is None and me["running_s"] >= 0
    assert me["attribution"].startswith("PID %d is not in a container (cgroup " % os.getpid())
    assert (only["attributed_mib"], only["unattributed_mib"], only["unlisted_mib"]) == (0, 2348, 300)
    assert "snapshot" not in result


def test_attribution_can_be_switched_off(cards, capsys):
    _code, result = run(capsys, source="nvml", attribute_processes=False)
    assert result["gpus"][0]["processes"][0]["attribution"] == "not attempted (attribute_processes=false)"


def test_save_a_snapshot_then_plan_from_it(cards, tmp_path, capsys):
    path = tmp_path / "plateau.json"
    code, saved = run(capsys, check_mode=True, save_snapshot_path=str(path), snapshot_host="fv-ml1")
    assert code == 0 and saved["changed"] is True and not path.exists()
    code, saved = run(capsys, save_snapshot_path=str(path), snapshot_host="fv-ml1")
    assert code == 0 and saved["changed"] is True and path.exists()
    assert saved["snapshot"]["path"] == str(path) and saved["snapshot"]["host"] == "fv-ml1"
    code, read = run(capsys, source="snapshot", snapshot_path=str(path))
    assert code == 0 and read["changed"] is False and read["source"] == "snapshot"
    assert read["gpus"] == saved["gpus"]
    assert read["snapshot"] == saved["snapshot"]
    assert read["snapshot"]["source"] == "nvml" and read["driver_version"] == "580.95.05"


def test_a_snapshot_from_another_host(tmp_path, capsys):
    path = tmp_path / "fv-ml1.json"
    reading = {"source": "nvidia-smi", "driver_version": "580.95.05",
               "gpus": [dict(gpu(0), memory_used_mib=0, memory_free_mib=143771, processes=[])]}
    path.write_text(dump_snapshot(build_snapshot(reading, "fv-ml1", "2026-10-07T08:00:00Z")))
    code, result = run(capsys, source="snapshot", snapshot_path=str(path))
    assert code == 0
    assert result["snapshot"] == {"path": str(path), "host": "fv-ml1", "taken_at": "2026-10-07T08:00:00Z",
                                  "source": "nvidia-smi", "schema_version": 1}
    assert result["nvml_version"] is None and result["gpus"][0]["memory_free_mib"] == 143771


@pytest.mark.parametrize("args, expected", [
    ({"source": "snapshot"}, "source is snapshot but all of the following are missing: snapshot_path"),
    ({"source": "snapshot", "snapshot_path": "/x.json", "save_snapshot_path": "/y.json"},
     "save_snapshot_path: a snapshot is recorded from a live source (auto, nvml or nvidia-smi), not from "
     "another snapshot; copy the file to keep a second one"),
    ({"source": "nvml", "snapshot_path": "/x.json"},
     "snapshot_path: only read with source=snapshot (source is nvml); to record this reading use "
     "save_snapshot_path"),
    ({"source": "snapshot", "snapshot_path": "/nonexistent/x.json"},
     "snapshot /nonexistent/x.json: cannot read it: No such file or directory"),
    ({"source": "fpga"}, "value of source must be one of: auto, nvml, nvidia-smi, snapshot, got: fpga"),
])
def test_refusals_are_one_clear_line(cards, capsys, args, expected):
    code, result = run(capsys, **args)
    assert code == 1 and result["msg"] == expected


def test_nvml_failure_with_source_nvml_is_one_line(cards, capsys):
    document = json.loads(cards.read_text())
    document["faults"] = {"gpu_lost": [0]}
    write_state(cards, document)
    code, result = run(capsys, source="nvml")
    assert code == 1
    assert result["msg"].startswith("NVML nvmlDeviceGetHandleByIndex on GPU 0 failed with NVML_ERROR_GPU_IS_LOST")
    assert "\n" not in result["msg"]


def test_an_unwritable_snapshot_path_fails_cleanly(cards, tmp_path, capsys):
    code, result = run(capsys, save_snapshot_path=str(tmp_path / "missing" / "p.json"))
    assert code == 1 and result["msg"].startswith("snapshot %s: cannot write in " % (tmp_path / "missing" / "p.json"))


def test_a_hung_nvidia_smi_is_one_line_naming_it_and_its_timeout(tmp_path, monkeypatch, capsys):
    """nvidia-smi waiting on a wedged driver never returns: it is killed at the bound, and the
    operator reads what hung and for how long, not a bug report."""
    pid_file = tmp_path / "nvidia-smi.pid"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\necho $$ > "%s"\nexec sleep 600\n' % pid_file)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (smi.parent, os.environ["PATH"]))
    monkeypatch.setattr(read, "NVIDIA_SMI_TIMEOUT_S", 1)
    code, result = run(capsys, source="nvidia-smi", attribute_processes=False)
    assert code == 1 and "exception" not in result, "an operator's error, not a bug's traceback"
    assert result["msg"].startswith("nvidia-smi --query-gpu did not finish within 1s and was killed: the NVIDIA "
                                    "driver is not answering")
    assert "\n" not in result["msg"] and "bug" not in result["msg"]
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
