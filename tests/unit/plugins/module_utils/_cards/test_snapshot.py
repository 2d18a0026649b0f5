"""Snapshots (versioned JSON of a gpu_info reading) and the lookups roles make on readings."""

from __future__ import annotations

import copy
import datetime
import json
import os
import stat

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import (
    SCHEMA,
    ReadingError,
    SnapshotError,
    beszel_gpus,
    beszel_mib,
    build_snapshot,
    dump_snapshot,
    free_mib_by_uuid,
    load_snapshot,
    read_snapshot_file,
    seat_mib,
    summary_line,
    utc_timestamp,
    write_snapshot_file,
)

GPU1 = {
    "index": 1, "uuid": "GPU-6b2d1d7f-4c8f-4027-8d66-1a2e3f4d5c6b",
    "name": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "pci_bus_id": "00000000:21:00.0",
    "memory_total_mib": 97887, "memory_reserved_mib": 532, "memory_used_mib": 86491, "memory_free_mib": 10864,
    "mig_mode": False, "attributed_mib": 86057, "unattributed_mib": 434, "unlisted_mib": 434,
    "processes": [
        {"pid": 202230, "used_mib": 17733, "name": "VLLM::EngineCore", "container": "fv-gen-small-1",
         "compose_project": "fv", "compose_service": "gen-small", "attribution": None},
        {"pid": 202455, "used_mib": 39864, "name": "VLLM::EngineCore", "container": "fv-meromero-rp-1",
         "compose_project": "fv", "compose_service": "meromero-rp", "attribution": None},
        {"pid": 202698, "used_mib": 28460, "name": "VLLM::EngineCore", "container": "other-intern-decision-1",
         "compose_project": "other", "compose_service": "intern-decision", "attribution": None},
    ],
}
GPU0 = dict(GPU1, index=0, uuid="GPU-5a1c0c6e-3b7e-4f1e-9c55-0f1d2e3c4b5a", memory_used_mib=10, memory_free_mib=97345,
            attributed_mib=0, unattributed_mib=10, unlisted_mib=10, processes=[
                {"pid": 9, "used_mib": 4, "name": "python3", "container": None, "compose_service": None,
                 "attribution": "PID 9 is not in a container (cgroup 0::/)"},
                {"pid": 10, "used_mib": None, "compose_service": "gen-small"}])
READING = {"source": "nvml", "driver_version": "580.95.05", "nvml_version": "13.580.95.05",
           "cuda_version": "13.0", "gpus": [GPU0, GPU1]}


def snapshot_text():
    return dump_snapshot(build_snapshot(READING, "fv-ml1", "2026-10-07T08:00:00Z"))


def test_a_snapshot_round_trips_with_its_header():
    snapshot = load_snapshot(snapshot_text(), "/p.json")
    assert snapshot["schema"] == SCHEMA and snapshot["schema_version"] == 1
    assert (snapshot["host"], snapshot["taken_at"], snapshot["source"]) == ("fv-ml1", "2026-10-07T08:00:00Z", "nvml")
    assert snapshot["gpus"] == READING["gpus"] and snapshot["driver_version"] == "580.95.05"
    assert snapshot_text().endswith("}\n") and snapshot_text() == snapshot_text()


def test_utc_timestamp_format():
    moment = datetime.datetime(2026, 10, 7, 8, 0, 5, tzinfo=datetime.timezone.utc)
    assert utc_timestamp(moment) == "2026-10-07T08:00:05Z"


def broken(change):
    document = json.loads(snapshot_text())
    change(document)
    return json.dumps(document)


@pytest.mark.parametrize("text, expected", [
    ("{not json", "snapshot /p.json: not JSON"),
    ("[]", "snapshot /p.json: the document: expected a JSON object, got 'list'"),
    (broken(lambda d: d.update(schema="other")), "snapshot /p.json: schema: expected 'llmfleet.seats/gpu_snapshot', got 'other'"),
    (broken(lambda d: d.update(schema_version=2)),
     "snapshot /p.json: schema_version 2 was written by a newer llmfleet.seats; this one reads version 1"),
    (broken(lambda d: d.update(schema_version="1")), "snapshot /p.json: schema_version: expected a whole number, got '1'"),
    (broken(lambda d: d.pop("host")), "snapshot /p.json: host: expected a non-empty string, got None"),
    (broken(lambda d: d.update(taken_at="yesterday")),
     "snapshot /p.json: taken_at: expected an ISO 8601 time such as 2026-10-07T08:00:00Z, got 'yesterday'"),
    (broken(lambda d: d.update(gpus={})), "snapshot /p.json: gpus: expected a list, got {}"),
    (broken(lambda d: d["gpus"][1].pop("uuid")), "snapshot /p.json: gpus[1].uuid: expected the GPU's UUID (GPU-...), got None"),
    (broken(lambda d: d["gpus"][0].update(memory_free_mib=-1)),
     "snapshot /p.json: gpus[0].memory_free_mib: expected a whole number >= 0, got -1"),
    (broken(lambda d: d["gpus"][0].update(memory_used_mib=True)),
     "snapshot /p.json: gpus[0].memory_used_mib: expected a whole number >= 0, got True"),
    (broken(lambda d: d["gpus"][1]["processes"][2].update(used_mib="12")),
     "snapshot /p.json: gpus[1].processes[2].used_mib: expected a whole number of MiB or null, got '12'"),
    (broken(lambda d: d["gpus"][1]["processes"][0].update(pid=0)), "snapshot /p.json: gpus[1].processes[0].pid: expected a PID, got 0"),
    (broken(lambda d: d["gpus"][1]["processes"][0].update(compose_service=3)),
     "snapshot /p.json: gpus[1].processes[0].compose_service: expected a string or null, got 3"),
    (broken(lambda d: d["gpus"][0].update(memory_reserved_mib=d["gpus"][0]["memory_total_mib"] + 1)),
     "snapshot /p.json: gpus[0].memory_reserved_mib: expected at most the card's memory_total_mib"),
    (broken(lambda d: d["gpus"][0].update(memory_used_mib=10 ** 18)),
     "snapshot /p.json: gpus[0].memory_used_mib: expected at most the card's memory_total_mib"),
    ("[" * 100000, "snapshot /p.json: nested deeper than 64 levels"),
    (broken(lambda d: d["gpus"][1].update(uuid=d["gpus"][0]["uuid"])),
     "snapshot /p.json: gpus[1].uuid: GPU-5a1c0c6e-3b7e-4f1e-9c55-0f1d2e3c4b5a appears twice"),
])
def test_a_bad_snapshot_names_the_file_and_the_field(text, expected):
    with pytest.raises(SnapshotError) as failure:
        load_snapshot(text, "/p.json")
    assert str(failure.value).startswith(expected)


def test_reading_a_missing_file_says_so(tmp_path):
    with pytest.raises(SnapshotError, match=r"snapshot .*/nope.json: cannot read it: No such file or directory"):
        read_snapshot_file(str(tmp_path / "nope.json"))


def test_write_creates_replaces_and_reports_change(tmp_path):
    path = str(tmp_path / "plateau.json")
    text = snapshot_text()
    assert write_snapshot_file(path, text, check_mode=True) is True
    assert not os.path.exists(path)                       # check mode wrote nothing
    assert write_snapshot_file(path, text) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert read_snapshot_file(path)["host"] == "fv-ml1"
    assert write_snapshot_file(path, text) is False       # same content: untouched
    os.chmod(path, 0o600)
    newer = text.replace("2026-10-07T08:00:00Z", "2026-10-08T08:00:00Z")
    assert write_snapshot_file(path, newer, check_mode=True) is True
    assert read_snapshot_file(path)["taken_at"] == "2026-10-07T08:00:00Z"
    assert write_snapshot_file(path, newer) is True
    assert read_snapshot_file(path)["taken_at"] == "2026-10-08T08:00:00Z"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600   # a replaced file keeps its mode
    assert sorted(os.listdir(tmp_path)) == ["plateau.json"]


def test_write_into_a_missing_directory_fails_with_the_reason(tmp_path):
    with pytest.raises(SnapshotError, match=r"snapshot .*/missing/p.json: cannot write in .*/missing: No such file"):
        write_snapshot_file(str(tmp_path / "missing" / "p.json"), "{}\n")


# Lookups -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mu, mib", [(0, 0), (86480.27, 88556), (88947.27, 91082), ("95594.73", 97889)])
def test_beszel_mu_times_1_024(mu, mib):
    assert beszel_mib(mu) == mib


@pytest.mark.parametrize("value", [None, "lots", True, -1])
def test_beszel_mib_refuses_what_is_not_a_reading(value):
    with pytest.raises(ReadingError, match=r"beszel_mib: expected a"):
        beszel_mib(value)


def test_beszel_gpus_from_a_stats_record_or_its_g_map():
    stats = {"cpu": 3.1, "g": {"0": {"n": "RTX PRO 6000", "mu": 91131.84, "mt": 95592.77, "u": 40.5},
                               "1": {"n": "RTX PRO 6000", "u": 0}}}
    expected = {"0": {"name": "RTX PRO 6000", "used_mib": 93319, "total_mib": 97887, "free_mib": 4568},
                "1": {"name": "RTX PRO 6000", "used_mib": 0, "total_mib": None, "free_mib": None}}
    assert beszel_gpus(stats) == expected
    assert beszel_gpus(stats["g"]) == expected
    with pytest.raises(ReadingError, match=r"beszel_gpus: g.0.mu: expected a Beszel memory reading"):
        beszel_gpus({"g": {"0": {"mu": "x"}}})
    with pytest.raises(ReadingError, match=r"beszel_gpus: expected Beszel system stats"):
        beszel_gpus([1, 2])


def test_free_mib_and_seat_mib_by_uuid():
    assert free_mib_by_uuid(READING) == {GPU0["uuid"]: 97345, GPU1["uuid"]: 10864}
    assert free_mib_by_uuid(READING["gpus"]) == free_mib_by_uuid(READING)
    assert seat_mib(READING) == {"gen-small": {GPU1["uuid"]: 17733}, "meromero-rp": {GPU1["uuid"]: 39864},
                                 "intern-decision": {GPU1["uuid"]: 28460}}
    assert seat_mib(READING, compose_project="fv") == {"gen-small": {GPU1["uuid"]: 17733},
                                                       "meromero-rp": {GPU1["uuid"]: 39864}}


def test_a_tensor_parallel_seat_appears_under_each_gpu():
    reading = copy.deepcopy(READING)
    reading["gpus"][0]["processes"] = [{"pid": 5, "used_mib": 40000, "compose_service": "gen-small"}]
    assert seat_mib(reading)["gen-small"] == {GPU0["uuid"]: 40000, GPU1["uuid"]: 17733}


@pytest.mark.parametrize("value, expected", [
    ("cards", "gpu_free_mib_by_uuid: expected a gpu_info result or its gpus list, got str"),
    ({"gpus": [{"index": 0}]}, "gpu_free_mib_by_uuid: gpus[0]: expected a GPU with a uuid, got {'index': 0}"),
])
def test_lookups_refuse_what_is_not_a_reading(value, expected):
    with pytest.raises(ReadingError) as failure:
        free_mib_by_uuid(value)
    assert str(failure.value) == expected


def test_summary_line():
    assert summary_line(GPU1) == (
        "GPU 1 (GPU-6b2d1d7f) NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition: 86,491 / 97,887 MiB "
        "used, 10,864 free, 532 reserved | gen-small 17,733, meromero-rp 39,864, intern-decision 28,460 | "
        "unattributed 434")
    bare = {"uuid": "GPU-1", "index": 3, "memory_total_mib": 100, "memory_used_mib": None, "memory_free_mib": 100,
            "processes": [{"pid": 7, "used_mib": None}]}
    assert summary_line(bare) == "GPU 3 (GPU-1) unknown GPU: ? / 100 MiB used, 100 free | pid 7 ?"
    with pytest.raises(ReadingError, match=r"gpu_summary: expected a GPU of a gpu_info result"):
        summary_line(["x"])
