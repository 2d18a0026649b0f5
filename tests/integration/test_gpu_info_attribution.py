"""Attribution against real containers: a private dockerd (own socket, data-root and exec-root
under /tmp), an image imported from host binaries, seats started by ``docker compose`` so they
carry the compose labels, and a container started by plain ``docker run``. The fake NVML and
nvidia-smi report those containers' host PIDs (docker inspect State.Pid) as GPU processes, and
real ``ansible`` runs of gpu_info must name each seat's compose project and service, and record
what a seat of this collection (its label) ran."""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.attribution import Containers
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from conftest import run_ansible
from support.adhoc import run_module
from support.dockerd import SLEEP_IMAGE, private_dockerd, sleeping_seats
from fakegpu.simulated import build_fake_nvml, fake_gpu_env, gpu, proc, state, write_state
from support.need import need_root_and

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
GONE_PID = 4194100


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A dockerd with compose project "fv" (gen-small, coder) and a "scratch" container, and a
    simulated GPU state naming their host PIDs, this test process and a vanished PID."""
    need_root_and("dockerd", "docker")
    with private_dockerd() as engine:
        pids = sleeping_seats(engine, tmp_path_factory.mktemp("fv"))
        engine.docker("run", "-d", "--name", "scratch", "--network", "none", SLEEP_IMAGE, "/bin/sleep", "3600")
        pids["scratch"] = engine.container_pid("scratch")
        gpus = [
            gpu(0, background_mib=300, processes=[
                proc(pids["fv-gen-small-1"], 20480, "vllm"), proc(pids["scratch"], 1000, "sleep"),
                proc(os.getpid(), 512, "pytest"), proc(GONE_PID, 256, "ghost")]),
            gpu(1, background_mib=200, processes=[
                proc(pids["fv-coder-1"], 30000, "vllm"), proc(pids["fv-gen-small-1"], 20480, "vllm")]),
        ]
        path = write_state(tmp_path_factory.mktemp("gpu") / "state.json", state(gpus))
        yield {"engine": engine, "pids": pids, "env": fake_gpu_env(path, build_fake_nvml())}


def check_attribution(result, fleet):
    pids = fleet["pids"]
    gpu0, gpu1 = result["gpus"]
    by_pid = {p["pid"]: p for p in gpu0["processes"]}
    seat = by_pid[pids["fv-gen-small-1"]]
    assert (seat["container"], seat["compose_project"], seat["compose_service"], seat["attribution"]) == \
        ("fv-gen-small-1", "fv", "gen-small", None)
    assert len(seat["container_id"]) == 64 and 0 <= seat["running_s"] < 3600
    # a seat this collection runs (its label) records what it ran: the plan reuses a plateau
    # measurement only for the same launch
    assert (seat["seat"], seat["image"], seat["args"]) == ("gen-small", SLEEP_IMAGE, ["/bin/sleep", "3600"])
    assert "seat" not in next(p for p in gpu1["processes"] if p["compose_service"] == "coder")
    scratch = by_pid[pids["scratch"]]
    assert scratch["container"] == "scratch" and scratch["compose_service"] is None
    assert scratch["attribution"] == ("container scratch was not started by docker compose "
                                      "(no com.docker.compose.service label)")
    me = by_pid[os.getpid()]
    assert me["container"] is None and me["attribution"].startswith("PID %d is not in a container" % os.getpid())
    ghost = by_pid[GONE_PID]
    assert ghost["attribution"].startswith("PID %d is not visible here" % GONE_PID)
    assert gpu0["memory_used_mib"] == 300 + 20480 + 1000 + 512 + 256
    assert gpu0["attributed_mib"] == 20480 + 1000
    assert gpu0["unattributed_mib"] == 300 + 512 + 256
    assert gpu0["unlisted_mib"] == 300
    services = sorted((p["compose_service"], p["used_mib"]) for p in gpu1["processes"])
    assert services == [("coder", 30000), ("gen-small", 20480)]
    assert (gpu1["attributed_mib"], gpu1["unattributed_mib"]) == (50480, 200)


def test_nvml_source_through_the_docker_sdk(fleet):
    rc, result = run_module("llmfleet.seats.gpu_info", {"source": "nvml", "docker_host": fleet["engine"].host},
                            extra_env=fleet["env"])
    assert rc == 0, result
    assert "warnings" not in result
    check_attribution(result, fleet)


def test_nvidia_smi_source_honours_docker_host(fleet):
    env = dict(fleet["env"], DOCKER_HOST=fleet["engine"].host)
    rc, result = run_module("llmfleet.seats.gpu_info", {"source": "nvidia-smi"}, extra_env=env)
    assert rc == 0, result
    check_attribution(result, fleet)


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no /usr/bin/python3")
def test_without_the_docker_sdk_the_docker_cli_answers(fleet):
    """The system Python has neither pynvml nor the docker SDK: nvidia-smi and the docker CLI."""
    rc, result = run_module("llmfleet.seats.gpu_info", {"docker_host": fleet["engine"].host},
                            extra_env=fleet["env"], python=SYSTEM_PYTHON)
    assert rc == 0, result
    assert result["source"] == "nvidia-smi"
    check_attribution(result, fleet)


def test_an_engine_that_does_not_answer(fleet):
    rc, result = run_module("llmfleet.seats.gpu_info", {"source": "nvml", "docker_host": "unix:///tmp/llmfleet-none.sock"},
                            extra_env=fleet["env"])
    assert rc == 0, result
    assert len(result["warnings"]) == 1
    assert result["warnings"][0].startswith(
        "process attribution: the Docker engine at unix:///tmp/llmfleet-none.sock did not answer:")
    seat = next(p for p in result["gpus"][0]["processes"] if p["pid"] == fleet["pids"]["fv-gen-small-1"])
    assert seat["container"] is None and len(seat["container_id"]) == 64
    assert seat["attribution"].startswith("docker container %s: the Docker engine at unix:///tmp/llmfleet-none.sock "
                                          "did not answer" % seat["container_id"][:12])
    assert result["gpus"][0]["attributed_mib"] == 0


def test_the_docker_runner_names_containers_and_their_compose_labels(fleet):
    engine = fleet["engine"]
    ids = [engine.inspect(name)["Id"] for name in ("fv-gen-small-1", "fv-coder-1", "scratch")] + ["0" * 64]
    found, error = Containers(Docker(engine.host)).inspect(ids)
    assert error is None and set(found) == set(ids[:3]), "an unknown id is left out, not an error"
    assert sorted(r["name"] for r in found.values()) == ["fv-coder-1", "fv-gen-small-1", "scratch"]
    assert found[ids[1]]["compose_service"] == "coder" and found[ids[1]]["compose_project"] == "fv"
    assert found[ids[2]]["compose_service"] is None


def test_the_filters_on_a_live_result_in_a_playbook(fleet, tmp_path):
    playbook = tmp_path / "cards.yml"
    playbook.write_text("""\
- name: Read the cards and look things up
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the cards
      llmfleet.seats.gpu_info:
        docker_host: "%s"
      register: cards
    - name: Each seat's MiB per GPU
      ansible.builtin.assert:
        that:
          - (cards | llmfleet.seats.gpu_seat_mib)['gen-small'] | length == 2
          - (cards | llmfleet.seats.gpu_seat_mib)['coder'][cards.gpus[1].uuid] == 30000
          - (cards | llmfleet.seats.gpu_free_mib_by_uuid)[cards.gpus[0].uuid] == cards.gpus[0].memory_free_mib
          - (cards | llmfleet.seats.gpu_summary)[1] is search('gen-small 20,480')
          - (cards | llmfleet.seats.gpu_by_uuid)[cards.gpus[1].uuid].index == 1
""" % fleet["engine"].host)
    proc = run_ansible(["ansible-playbook", str(playbook)], extra_env=fleet["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok=2" in proc.stdout and "failed=0" in proc.stdout
