"""PID -> container -> compose service: cgroup files of every layout we meet, /proc readers on
a directory shaped like /proc, and the accounting per GPU. The Docker engine itself is exercised
for real in tests/integration/test_gpu_info_attribution.py; here an engine is a table."""

from __future__ import annotations

import os

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.attribution import (
    Containers,
    attribute_processes,
    container_ids_from_cgroup,
    read_proc_cgroup,
    read_process_running_seconds,
    without_attribution,
)

A = "d43b85cf75082f116bd8849557dbf5c2fad5568e6a1e330aa152dee9a93fff03"
B = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

# Captured on this project's CI machine: cgroup v1 + v2 hybrid, dockerd's cgroupfs driver.
V1_HYBRID_DOCKER = "\n".join(
    ["%d:%s:/docker/%s" % (n, ctl, A) for n, ctl in
     [(9, "name=systemd"), (8, "pids"), (7, "blkio"), (4, "memory"), (1, "cpu")]] + ["0::/docker/%s" % A]) + "\n"


@pytest.mark.parametrize("text, expected", [
    (V1_HYBRID_DOCKER, [("docker", A)]),
    ("0::/system.slice/docker-%s.scope\n" % A, [("docker", A)]),                       # v2, systemd driver
    ("0::/docker/%s\n" % A, [("docker", A)]),                                           # v2, cgroupfs driver
    ("12:memory:/docker/%s\n1:name=systemd:/docker/%s\n" % (A, A), [("docker", A)]),    # pure v1
    ("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b.slice/"
     "cri-containerd-%s.scope\n" % A, [("cri-containerd", A)]),                         # Kubernetes
    ("0::/default/%s\n" % A, [("containerd", A)]),                                      # nerdctl, cgroupfs
    ("0::/machine.slice/libpod-%s.scope/container\n" % A, [("libpod", A)]),             # podman
    ("0::/system.slice/docker-%s.scope/docker/%s\n" % (A, B), [("docker", B), ("docker", A)]),  # docker in docker
    ("0::/user.slice/user-1000.slice/session-3.scope\n", []),
    ("0::/\n", []),
    ("", []),
    ("garbage without colons\n", []),
])
def test_container_ids_from_every_cgroup_layout(text, expected):
    assert container_ids_from_cgroup(text) == expected


def test_the_cgroup_v2_line_wins_over_v1_hierarchies():
    text = "4:memory:/docker/%s\n0::/system.slice/docker-%s.scope\n" % (B, A)
    assert container_ids_from_cgroup(text) == [("docker", A)]


def fake_proc(tmp_path, pid, cgroup=None, stat=None, uptime="5000.00 9000.00\n"):
    """A directory shaped like /proc for one PID."""
    (tmp_path / str(pid)).mkdir(parents=True)
    if cgroup is not None:
        (tmp_path / str(pid) / "cgroup").write_text(cgroup)
    if stat is not None:
        (tmp_path / str(pid) / "stat").write_text(stat)
    (tmp_path / "uptime").write_text(uptime)
    return tmp_path


def test_read_proc_cgroup_and_why_a_pid_is_unreadable(tmp_path):
    root = fake_proc(tmp_path, 42, cgroup="0::/docker/%s\n" % A)
    assert read_proc_cgroup(42, str(root)) == ("0::/docker/%s\n" % A, None)
    text, why = read_proc_cgroup(43, str(root))
    assert text is None
    assert why == ("PID 43 is not visible here: it exited, or gpu_info runs in another PID namespace "
                   "(NVML reports host PIDs) and no container of the Docker engine runs it")


def test_running_seconds_from_proc_stat(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    # The command name holds spaces and a ")": only the last ")" ends it.
    fields = ["S"] + ["0"] * 18 + [str(1000 * ticks)] + ["0"] * 10
    root = fake_proc(tmp_path, 7, stat="7 (VLLM::Engine (x) y) %s\n" % " ".join(fields))
    assert read_process_running_seconds(7, str(root)) == 4000
    assert read_process_running_seconds(8, str(root)) is None
    assert read_process_running_seconds(os.getpid()) >= 0


class TableEngine:
    """An engine answering from a table, shaped like Containers."""

    docker_host = "unix:///run/test.sock"

    def __init__(self, records, error=None):
        self.records, self.error, self.asked = records, error, []

    def inspect(self, ids):
        self.asked.append(list(ids))
        if self.error:
            return {}, self.error
        return {cid: rec for cid, rec in self.records.items() if cid in ids}, None


CGROUPS = {
    101: "0::/docker/%s\n" % A,                         # a compose seat
    102: "0::/system.slice/docker-%s.scope\n" % B,      # a container docker run started
    103: "0::/user.slice/user-0.slice/session-1.scope\n",
    105: "0::/kubepods.slice/cri-containerd-%s.scope\n" % ("f" * 64),
}
RECORDS = {
    A: {"id": A, "name": "fv-gen-small-1", "compose_project": "fv", "compose_service": "gen-small"},
    B: {"id": B, "name": "scratch", "compose_project": None, "compose_service": None},
}


def read_cgroup(pid):
    if pid in CGROUPS:
        return CGROUPS[pid], None
    return None, "PID %d is gone" % pid


def gpus():
    return [
        {"uuid": "GPU-0", "memory_used_mib": 30000, "processes": [
            {"pid": 101, "used_mib": 20000}, {"pid": 102, "used_mib": 3000}, {"pid": 103, "used_mib": 500},
            {"pid": 104, "used_mib": 256}, {"pid": 105, "used_mib": 100}, {"pid": 101, "used_mib": None}]},
        {"uuid": "GPU-1", "memory_used_mib": 0, "processes": []},
    ]


class HiddenPidsEngine(TableEngine):
    """An engine that runs PIDs this PID namespace cannot see (gpu_info on a host whose
    systemd runs in a container)."""

    def __init__(self, records, owners):
        super().__init__(records)
        self.owners = owners

    def pid_owners(self):
        return self.owners


def test_a_pid_proc_cannot_show_is_named_by_the_engine_that_runs_it(tmp_path):
    seat = dict(RECORDS[A], seat="gen-small", image="vllm/vllm-openai:v0.33.0", args=[])
    engine = HiddenPidsEngine({A: seat}, {7001: A})
    root = fake_proc(tmp_path, 42, cgroup="0::/\n")
    hidden = [{"uuid": "GPU-0", "memory_used_mib": 2000, "processes": [
        {"pid": 7001, "used_mib": 1500}, {"pid": 7002, "used_mib": 100}]}]
    result, _warnings = attribute_processes(hidden, engine, read_cgroup=lambda pid: read_proc_cgroup(pid, str(root)),
                                            read_age=lambda pid: None)
    found, lost = result[0]["processes"]
    assert (found["container"], found["seat"], found["attribution"]) == ("fv-gen-small-1", "gen-small", None)
    assert lost["container"] is None and "no container of the Docker engine runs it" in lost["attribution"]
    assert result[0]["attributed_mib"] == 1500


def test_attribution_and_accounting():
    engine = TableEngine(RECORDS)
    result, warnings = attribute_processes(gpus(), engine, read_cgroup=read_cgroup, read_age=lambda pid: 60)
    assert warnings == []
    assert engine.asked == [sorted([A, B, "f" * 64])]      # one question for every container
    seat, scratch, host, gone, k8s, unknown_mib = result[0]["processes"]
    assert (seat["container"], seat["compose_project"], seat["compose_service"], seat["attribution"]) == \
        ("fv-gen-small-1", "fv", "gen-small", None)
    assert seat["container_id"] == A and seat["running_s"] == 60
    assert scratch["container"] == "scratch" and scratch["compose_service"] is None
    assert scratch["attribution"] == ("container scratch was not started by docker compose "
                                      "(no com.docker.compose.service label)")
    assert host["container"] is None
    assert host["attribution"] == "PID 103 is not in a container (cgroup 0::/user.slice/user-0.slice/session-1.scope)"
    assert gone["attribution"] == "PID 104 is gone"
    assert k8s["container_id"] == "f" * 64 and k8s["container"] is None
    assert k8s["attribution"] == ("cri-containerd container ffffffffffff is not known to the Docker engine at "
                                  "unix:///run/test.sock (another engine or runtime runs it)")
    assert unknown_mib["container"] == "fv-gen-small-1" and unknown_mib["used_mib"] is None
    # attributed: the seat and the scratch container; unlisted: what no process accounts for.
    assert result[0]["attributed_mib"] == 23000
    assert result[0]["unattributed_mib"] == 30000 - 23000
    assert result[0]["unlisted_mib"] == 30000 - (20000 + 3000 + 500 + 256 + 100)
    assert (result[1]["attributed_mib"], result[1]["unattributed_mib"], result[1]["unlisted_mib"]) == (0, 0, 0)


def test_an_engine_that_cannot_answer_is_said_once_and_per_process():
    engine = TableEngine(RECORDS, error="the Docker engine at unix:///run/test.sock did not answer: refused")
    result, warnings = attribute_processes(gpus(), engine, read_cgroup=read_cgroup, read_age=lambda pid: None)
    assert warnings == ["process attribution: the Docker engine at unix:///run/test.sock did not answer: refused"]
    seat = result[0]["processes"][0]
    assert seat["container"] is None and seat["container_id"] == A
    assert seat["attribution"] == ("docker container d43b85cf7508: the Docker engine at unix:///run/test.sock "
                                   "did not answer: refused")
    assert result[0]["attributed_mib"] == 0 and result[0]["unattributed_mib"] == 30000


def test_without_attribution_keeps_the_same_keys():
    plain = without_attribution(gpus(), "not attempted")
    assert set(plain[0]["processes"][0]) == {"pid", "used_mib", "container", "container_id", "compose_project",
                                             "compose_service", "attribution", "running_s"}
    assert plain[0]["unattributed_mib"] == 30000 and plain[0]["attributed_mib"] == 0


def test_the_engine_says_why_when_docker_is_not_installed():
    engine = Containers(Docker("unix:///nonexistent.sock", binary="/nonexistent/docker"))
    records, why = engine.inspect([A])
    assert records == {} and why.startswith("cannot run /nonexistent/docker: ")
    assert engine.inspect([]) == ({}, None)


def test_a_managed_seat_records_what_it_ran():
    attrs = {"Id": A, "Name": "/vllm-gen-small", "Config": {
        "Image": "vllm/vllm-openai:v0.33.0", "Cmd": ["Qwen/Qwen3.5-2B", "--max-model-len", "262144"],
        "Labels": {"com.docker.compose.project": "gen-small", "com.docker.compose.service": "gen-small",
                   "io.llmfleet.seat": "gen-small"}}}

    class Inspected:
        docker_host = None

        def inspect(self, ids):
            return {A: attrs, B: {"Id": B, "Name": "/x", "Config": {"Image": "i", "Cmd": ["an-arg"]}}}, None

    records, why = Containers(Inspected()).inspect([A, B])
    assert why is None
    record, unmanaged = records[A], records[B]
    assert (record["seat"], record["image"], record["args"]) == (
        "gen-small", "vllm/vllm-openai:v0.33.0", ["Qwen/Qwen3.5-2B", "--max-model-len", "262144"])
    assert (unmanaged["seat"], unmanaged["image"], unmanaged["args"]) == (None, None, None), \
        "only seats this collection runs are recorded"
    result, warnings = attribute_processes(gpus(), TableEngine({A: record, B: unmanaged}), read_cgroup=read_cgroup,
                                           read_age=lambda pid: 60)
    assert warnings == []
    seat, scratch = result[0]["processes"][:2]
    assert seat["seat"] == "gen-small" and seat["args"][0] == "Qwen/Qwen3.5-2B"
    assert "seat" not in scratch and "args" not in scratch
