"""The nvidia-smi reader on recorded real-format outputs (tests/unit/fixtures/nvidia_smi/), each
replayed by the fake nvidia-smi in its own process, and the CSV parser on crafted edge cases."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.nvidia_smi import (
    GPU_FIELDS,
    LEGACY_GPU_FIELDS,
    NvidiaSmiError,
    check_failure,
    parse_compute_apps,
    parse_gpus,
    parse_query_csv,
    query_compute_apps_args,
    query_gpu_args,
    read_nvidia_smi,
)
from fakegpu.simulated import FAKE_NVIDIA_SMI, gpu, proc, replaying_nvidia_smi, state, write_state


def read(fixture_name):
    return read_nvidia_smi(replaying_nvidia_smi(fixture_name))


def by_uuid(reading):
    return {gpu["uuid"]: gpu for gpu in reading["gpus"]}


def test_query_command_lines_ask_for_csv_without_units():
    assert query_gpu_args() == ["--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,nounits"]
    assert "memory.reserved" in GPU_FIELDS and "memory.reserved" not in LEGACY_GPU_FIELDS
    assert query_compute_apps_args() == ["--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                                         "--format=csv,nounits"]


def test_eight_h200_with_processes_and_an_unresolvable_name():
    reading = read("h200_x8")
    gpus = reading["gpus"]
    assert reading["driver_version"] == "580.95.05" and reading["warnings"] == []
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {"NVIDIA H200"}
    assert {g["memory_total_mib"] for g in gpus} == {143771}
    for gpu in gpus:
        assert gpu["memory_total_mib"] == gpu["memory_reserved_mib"] + gpu["memory_used_mib"] + gpu["memory_free_mib"]
    assert gpus[0]["pci_bus_id"] == "00000000:18:00.0" and gpus[0]["mig_mode"] is False
    assert [len(g["processes"]) for g in gpus] == [1, 1, 1, 1, 1, 0, 1, 1]
    assert gpus[0]["processes"] == [{"pid": 1328667, "used_mib": 130004, "name": "/usr/local/bin/python3.10",
                                     "gpu_instance_id": None, "compute_instance_id": None}]
    # "[Not Found]": nvidia-smi could not name the PID (another PID namespace).
    assert gpus[7]["processes"][0]["name"] is None and gpus[7]["processes"][0]["used_mib"] == 58060


def test_fv_ml1_layout_after_the_rebalance():
    gpus = read("rtx_pro_6000_maxq_x4")["gpus"]
    assert [g["memory_free_mib"] for g in gpus] == [4036, 10864, 97355, 97355]   # seed 000
    assert [len(g["processes"]) for g in gpus] == [5, 3, 0, 0]
    assert sum(p["used_mib"] for p in gpus[1]["processes"]) == 86057
    assert {p["name"] for p in gpus[0]["processes"]} == {"VLLM::EngineCore", "python"}


def test_values_with_units_and_a_header_only_process_list():
    reading = read("rtx_pro_6000_idle")
    assert [(g["index"], g["memory_total_mib"], g["memory_reserved_mib"], g["memory_free_mib"])
            for g in reading["gpus"]] == [(4, 97887, 532, 97355), (5, 97887, 532, 97355)]
    assert all(g["processes"] == [] for g in reading["gpus"])


def test_mig_and_unavailable_markers_become_none():
    gpus = read("a100_mig")["gpus"]
    assert [g["mig_mode"] for g in gpus] == [True, None]
    assert [p["used_mib"] for p in gpus[0]["processes"]] == [None, 9826, None]
    assert gpus[0]["memory_total_mib"] == 40960


def test_old_driver_without_memory_reserved_is_read_with_the_legacy_fields():
    reading = read("old_driver_no_reserved")
    gpu = reading["gpus"][0]
    assert gpu["memory_reserved_mib"] is None and gpu["memory_used_mib"] == 20116
    assert reading["driver_version"] == "470.256.02"
    assert reading["warnings"] == ["nvidia-smi does not know memory.reserved (driver before R510): "
                                   "memory_used_mib includes reserved memory"]
    assert gpu["processes"][0]["pid"] == 3301


@pytest.mark.parametrize("fixture_name", ["no_devices", "no_supported_gpus"])
def test_no_gpu_is_an_empty_list_not_an_error(fixture_name):
    reading = read(fixture_name)
    assert reading["gpus"] == [] and reading["driver_version"] is None


@pytest.mark.parametrize("fixture_name, expected", [
    ("no_driver", "nvidia-smi cannot talk to the NVIDIA driver (exit 9): the kernel module is not loaded"),
    ("gpu_lost", 'nvidia-smi cannot open a GPU (exit 15): "Unable to determine the device handle for GPU '
                 '0000:02:00.0: GPU is lost. Reboot the system to recover this GPU"; the card is lost or '
                 'wedged'),
    ("version_mismatch", '"Failed to initialize NVML: Driver/library version mismatch" (exit 18): the '
                         "driver's library and kernel module differ"),
    ("malformed_row", "nvidia-smi --query-gpu: row 1 has 5 values for the 10 columns index, uuid, name"),
])
def test_failures_are_one_line_that_says_what_to_do(fixture_name, expected):
    with pytest.raises(NvidiaSmiError) as failure:
        read(fixture_name)
    message = str(failure.value)
    assert expected in message
    assert "\n" not in message


def test_unknown_exit_codes_are_named_from_the_man_page():
    with pytest.raises(NvidiaSmiError, match=r"failed with exit code 4 \(the current user may not access"):
        check_failure(["-L"], 4, "", "Insufficient Permissions\n")
    with pytest.raises(NvidiaSmiError, match=r"exit code 77 \(an undocumented exit code\): no output"):
        check_failure(["-L"], 77, "", "")


def test_a_process_name_with_commas_keeps_its_commas():
    rows, notes = parse_query_csv("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
                                  "GPU-1, 42, python3 -c print(1, 2), 100\n", "q", free_text="process_name")
    assert notes == [] and rows == [{"gpu_uuid": "GPU-1", "pid": "42", "process_name": "python3 -c print(1, 2)",
                                     "used_memory": "100"}]


def test_lines_before_the_header_come_back_as_notes():
    _driver, gpus, notes = parse_gpus("WARNING: infoROM is corrupted at gpu 0000:18:00.0\n"
                                      "index, uuid, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"
                                      "0, GPU-1, 1000, 10, 990\n")
    assert notes == ["WARNING: infoROM is corrupted at gpu 0000:18:00.0"]
    assert gpus[0]["memory_free_mib"] == 990 and gpus[0]["memory_reserved_mib"] is None


@pytest.mark.parametrize("text, expected", [
    ("index, uuid, memory.used [MiB]\n0, GPU-1, lots\n", "row 1, memory.used: expected a whole number of MiB, got 'lots'"),
    ("index, uuid\nx, GPU-1\n", "row 1, index: expected a whole number, got 'x'"),
    ("index, uuid\n0, [N/A]\n", "row 1 has no GPU UUID"),
    ("index, uuid\n0, GPU-1, extra\n", "row 1 has more values than the columns index, uuid"),
    ("Something went wrong, badly\n", "expected a CSV header line, got 'Something went wrong, badly'"),
])
def test_unreadable_gpu_rows_name_the_row_and_the_field(text, expected):
    with pytest.raises(NvidiaSmiError) as failure:
        parse_gpus(text)
    assert expected in str(failure.value)


def test_processes_on_devices_the_gpu_query_did_not_list_are_reported_not_dropped_silently():
    outputs = {
        "--query-gpu": "index, uuid\n0, GPU-1\n",
        "--query-compute-apps": "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nMIG-9, 7, python, 10\n",
    }
    reading = read_nvidia_smi(lambda args: (0, outputs[args[0].split("=")[0]], ""))
    assert reading["gpus"][0]["processes"] == []
    assert reading["warnings"] == ["nvidia-smi lists PID 7 on a device that --query-gpu did not report "
                                   "(a MIG instance?); it is left out"]


names = st.text(alphabet=st.characters(codec="ascii", exclude_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85"),
                min_size=1, max_size=40).map(str.strip).filter(
    lambda s: s and not (s.startswith("[") and s.endswith("]")) and s != "N/A")


@given(processes=st.lists(st.tuples(st.integers(1, 4_194_304), names, st.one_of(st.none(), st.integers(0, 200_000))),
                          max_size=6),
       units=st.booleans())
def test_compute_apps_round_trip_through_the_csv_nvidia_smi_prints(processes, units):
    lines = ["gpu_uuid, pid, process_name, used_gpu_memory [MiB]"]
    for pid, name, used in processes:
        value = "[N/A]" if used is None else ("%d MiB" % used if units else str(used))
        lines.append("GPU-0, %d, %s, %s" % (pid, name, value))
    parsed, notes = parse_compute_apps("\n".join(lines) + "\n")
    assert notes == []
    # nvidia-smi separates with ", ", so runs of spaces around a comma in a name collapse.
    assert [(p["pid"], p["name"], p["used_mib"]) for p in parsed] == [
        (pid, ", ".join(part.strip() for part in name.split(",")), used) for pid, name, used in processes]


def run_fake(tmp_path, document, *args):
    """The fake nvidia-smi rendering a state file (what the twin's hosts and seats see)."""
    path = write_state(tmp_path / "state.json", document)
    done = subprocess.run([str(FAKE_NVIDIA_SMI)] + list(args), env={"FAKE_GPU_STATE": str(path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def test_the_fake_renders_the_state_like_nvidia_smi(tmp_path):
    document = state([gpu(0, processes=[proc(4242, 20480, "python3")]), gpu(1, mig_mode=None)])
    uuid0, uuid1 = document["gpus"][0]["uuid"], document["gpus"][1]["uuid"]
    assert run_fake(tmp_path, document, "-L") == (
        0, "GPU 0: NVIDIA H200 (UUID: %s)\nGPU 1: NVIDIA H200 (UUID: %s)\n" % (uuid0, uuid1), "")
    assert run_fake(tmp_path, document, "-i", uuid1, "--query-gpu=index,memory.free,mig.mode.current",
                    "--format=csv,noheader")[:2] == (0, "1, 143771 MiB, [N/A]\n")
    rc, out, err = run_fake(tmp_path, document)
    assert err == "" and rc == 0 and "| NVIDIA-SMI 580.95.05" in out and "20480MiB / 143771MiB" in out
    assert "python3                             20480MiB |" in out
    assert run_fake(tmp_path, document, "--bogus")[:2] == (
        2, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
    assert run_fake(tmp_path, document, "-i", "7", "-L")[:2] == (6, "No devices were found\n")


@pytest.mark.parametrize("faults, code, first_line", [
    ({"nvidia_smi": "no_driver"}, 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
    ({"nvmlInit": "NVML_ERROR_LIB_RM_VERSION_MISMATCH"}, 18, "Failed to initialize NVML: Driver/library version mismatch"),
    ({"gpu_lost": [0]}, 15, "Unable to determine the device handle for GPU00000000:18:00.0: GPU is lost."),
])
def test_the_fake_fails_like_nvidia_smi(tmp_path, faults, code, first_line):
    rc, out, err = run_fake(tmp_path, state([gpu(0), gpu(1)], faults=faults), "--query-gpu=index", "--format=csv")
    assert rc == code and out.startswith(first_line) and err == ""
