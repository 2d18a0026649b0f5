"""The fleet twin end to end: three hosts made by `tests/twin/twin up`, reached by real
`ansible` over real SSH; a compose seat with a GPU reservation started by
community.docker.docker_compose_v2 on a host's own dockerd; the simulated GPU's state moving as
the seat allocates and dies; gpu_info over SSH attributing the memory to the compose service;
and `down` leaving nothing behind. The tests run in file order on one twin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO_ROOT, ansible_env, run_ansible
from support.need import need_root_and

from twinlib import fleet, host as hostlib
from twinlib.procs import alive, ns_inode, pids_in_namespaces

TWIN_DIR = REPO_ROOT / "tests" / "twin"

pytestmark = [pytest.mark.twin, pytest.mark.slow]

MODEL = REPO_ROOT / "inventories" / "fv-ml1" / "models" / "qwen3-8b"
KV_BYTES = 2 * 1024 ** 3
SEAT_PORT = 8011
COMPOSE = """\
name: seats
services:
  tiny:
    image: vllm/vllm-openai:v0.33.0
    command: ["/models/tiny", "--served-model-name", "tiny", "--port", "8000",
              "--max-model-len", "4096", "--kv-cache-memory-bytes", "{kv}"]
    ports: ["{address}:{port}:8000"]
    volumes: ["{model}:/models/tiny:ro"]
    init: true
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["{uuid}"]
              capabilities: [gpu]
"""


def twin(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(TWIN_DIR / "twin")] + list(args), capture_output=True, text=True,
                          timeout=timeout, check=False, env=ansible_env())


def ansible(inventory: str, pattern: str, module: str, args: dict | None = None,
            check: bool = True) -> dict:
    """Run an ad-hoc module over SSH; return {host: result} from the JSON callback."""
    cmd = ["ansible", pattern, "-i", inventory, "-m", module]
    if args:
        cmd += ["-a", json.dumps(args)]
    proc = run_ansible(cmd, extra_env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                                       "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    results = {host: tasks["hosts"][host] for tasks in json.loads(proc.stdout)["plays"][0]["tasks"]
               for host in tasks["hosts"]} if proc.stdout.strip() else {}
    if check:
        failed = {h: r.get("msg") or r.get("stderr") for h, r in results.items()
                  if r.get("failed") or r.get("unreachable")}
        assert proc.returncode == 0 and not failed, (failed, proc.stderr[-2000:])
    return results


def gpu_state(host_name: str) -> dict:
    return fleet.find_host(host_name).gpu_state()


def host_processes(record: dict) -> dict:
    """PIDs living in each twin host's namespaces, by host."""
    out = {}
    for entry in record["hosts"]:
        host = hostlib.Host(entry["index"], entry["name"], entry["pids"])
        out[host.name] = pids_in_namespaces(ns_inode(str(host.mntns)),
                                            ns_inode("/run/netns/" + host.netns))
    return out


@pytest.fixture(scope="module")
def twin_up():
    need_root_and("dockerd", "docker", "/usr/sbin/sshd", "ip", "nsenter")
    if fleet.record_in_use():
        pytest.fail("a twin is already up on this machine (`tests/twin/twin status`); this test "
                    "brings up its own: run `tests/twin/twin down` first", pytrace=False)
    proc = twin("up", "--hosts", "3")
    assert proc.returncode == 0, proc.stderr
    yield {"inventory": proc.stdout.strip().splitlines()[-1], "record": fleet.load_record()}
    twin("down")  # test_down_leaves_nothing_behind checks it; this is for a failed run


def test_up_writes_an_inventory_and_is_idempotent(twin_up):
    assert Path(twin_up["inventory"]).is_file()
    again = twin("up", "--hosts", "3")
    assert again.returncode == 0 and again.stdout.strip() == twin_up["inventory"]
    assert "already up" in again.stderr
    other = twin("up", "--hosts", "2")
    assert other.returncode == 1
    assert "a different twin is already up (hosts: twin1, twin2, twin3)" in other.stderr
    assert fleet.load_record() == twin_up["record"]


def test_every_host_answers_over_ssh_as_itself(twin_up):
    inventory = twin_up["inventory"]
    assert {h: r["ping"] for h, r in ansible(inventory, "all", "ping").items()} == {
        "twin1": "pong", "twin2": "pong", "twin3": "pong"}
    facts = ansible(inventory, "all", "command", {"cmd": "ip -4 -o addr show dev eth0"})
    for entry in twin_up["record"]["hosts"]:
        assert facts[entry["name"]]["stdout"].split()[3] == entry["address"] + "/24"
    names = ansible(inventory, "all", "command", {"cmd": "hostname"})
    assert {h: r["stdout"] for h, r in names.items()} == {h: h for h in names}


def test_each_host_has_its_own_srv_and_docker(twin_up):
    inventory = twin_up["inventory"]
    ansible(inventory, "all", "copy",
            {"dest": "/srv/whoami", "content": "{{ inventory_hostname }}", "mode": "0644"})
    seen = ansible(inventory, "all", "command", {"cmd": "cat /srv/whoami"})
    assert {h: r["stdout"] for h, r in seen.items()} == {h: h for h in seen}
    assert not Path("/srv/whoami").exists(), "a twin host's /srv leaked onto the machine"
    engines = {h: r["host_info"] for h, r in ansible(
        inventory, "all", "community.docker.docker_host_info").items()}
    roots = {h: info["DockerRootDir"] for h, info in engines.items()}
    assert {h: info["Name"] for h, info in engines.items()} == {h: h for h in engines}
    assert len({info["ID"] for info in engines.values()}) == 3
    assert roots == {h: str(hostlib.IMAGES_DIR / h / "docker") for h in roots}
    assert ansible(inventory, "twin1", "stat", {"path": "/run/docker.sock"})["twin1"]["stat"]["exists"]
    assert not Path("/run/docker.sock").exists(), "a twin host's docker.sock leaked onto the machine"


DEPLOY = """\
- name: Deploy one compose seat
  hosts: "{{ target }}"
  gather_facts: false
  tasks:
    - name: Make the project directory
      ansible.builtin.file: {path: /srv/seats, state: directory, mode: "0755"}
    - name: Write the compose file
      ansible.builtin.copy: {dest: /srv/seats/compose.yaml, content: "{{ compose }}", mode: "0644"}
    - name: Start the seat
      community.docker.docker_compose_v2: {project_src: /srv/seats, state: present}
"""


def deploy_seat(inventory: str, host: str, compose: str, playbook: Path) -> dict:
    """Run the deploy playbook on `host`; return its stats (ok/changed/failures)."""
    playbook.write_text(DEPLOY)
    extra = playbook.with_suffix(".json")
    extra.write_text(json.dumps({"target": host, "compose": compose}))
    proc = run_ansible(["ansible-playbook", "-i", inventory, str(playbook), "-e", "@%s" % extra],
                       extra_env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)["stats"][host]


def wait_for_seat_memory(host: str, index: int, minimum_mib: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        gpu = gpu_state(host)["gpus"][index]
        if sum(p["used_mib"] for p in gpu["processes"]) >= minimum_mib:
            return gpu
        assert time.monotonic() < deadline, "the seat never allocated: %s" % gpu
        time.sleep(0.2)


def container_pids(host: str) -> dict:
    """The host PIDs of every process in each running container (`docker top` on the twin
    host's own dockerd)."""
    twin_host = fleet.find_host(host)
    out = {}
    for container in twin_host.containers():
        if container["State"] == "running":
            top = twin_host.docker(["top", container["ID"], "-eo", "pid"]).stdout.split()
            out[container["Names"]] = {int(pid) for pid in top[1:]}
    return out


def test_gpu_reservation_allocates_on_the_reserved_gpu(twin_up, tmp_path):
    inventory, record = twin_up["inventory"], twin_up["record"]
    twin2 = next(h for h in record["hosts"] if h["name"] == "twin2")
    before = {h["name"]: gpu_state(h["name"]) for h in record["hosts"]}
    uuid = before["twin2"]["gpus"][1]["uuid"]
    compose = COMPOSE.format(kv=KV_BYTES, address=twin2["address"], port=SEAT_PORT, model=MODEL,
                             uuid=uuid)
    assert deploy_seat(inventory, "twin2", compose, tmp_path / "deploy.yml")["changed"] == 3

    gpu = wait_for_seat_memory("twin2", 1, KV_BYTES // 2 ** 20)
    (seat_pids,) = list(container_pids("twin2").values())
    (process,) = gpu["processes"]
    assert process["pid"] in seat_pids, "the driver saw a PID outside the seat's container"
    with open("/proc/%d/environ" % process["pid"], "rb") as handle:
        environ = handle.read().split(b"\0")
    assert ("NVIDIA_VISIBLE_DEVICES=%s" % uuid).encode() in environ
    after = {h["name"]: gpu_state(h["name"]) for h in record["hosts"]}
    assert after["twin2"]["gpus"][0] == before["twin2"]["gpus"][0]
    assert after["twin1"] == before["twin1"] and after["twin3"] == before["twin3"]

    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen("http://%s:%d/health" % (twin2["address"], SEAT_PORT),
                                        timeout=2) as reply:
                assert reply.status == 200
                break
        except OSError:
            assert time.monotonic() < deadline, "the seat's published port never answered"
            time.sleep(0.3)
    again = deploy_seat(inventory, "twin2", compose, tmp_path / "deploy.yml")
    assert again["changed"] == 0 and again["failures"] == 0, "a second deploy changed something"


def test_an_unknown_device_fails_the_start_like_the_nvidia_runtime(twin_up):
    twin1 = fleet.find_host("twin1")
    proc = twin1.docker(["run", "--rm", "--gpus", "device=GPU-00000000-0000-4000-8000-000000000000",
                         "vllm/vllm-openai:v0.33.0", "x"], check=False, timeout=60)
    assert proc.returncode != 0
    assert "nvidia-container-cli: device error: GPU-00000000-0000-4000-8000-000000000000: " \
           "unknown device" in proc.stderr
    assert all(not g["processes"] for g in gpu_state("twin1")["gpus"])
    probe = ["run", "--rm", "--entrypoint", "python3", "vllm/vllm-openai:v0.33.0", "-c",
             "import os; print(os.path.exists('/run/fakegpu/gpu.sock'))"]
    assert twin1.docker(probe).stdout.strip() == "False", "a container without a reservation saw the driver"
    assert twin1.docker(probe[:2] + ["--gpus", "all"] + probe[2:]).stdout.strip() == "True"


def test_a_seat_short_of_free_memory_fails_with_vllms_message(twin_up):
    twin1 = fleet.find_host("twin1")
    gpu0 = gpu_state("twin1")["gpus"][0]
    assert twin("gpu", "twin1", "--background", "0=%d" % (gpu0["memory_total_mib"] - 10000)).returncode == 0
    project = hostlib.STATE_DIR / "hosts" / "twin1" / "srv" / "short"
    project.mkdir(parents=True)
    (project / "compose.yaml").write_text(COMPOSE.format(
        kv=KV_BYTES, address=twin1.address, port=SEAT_PORT, model=MODEL, uuid=gpu0["uuid"]))
    ansible(twin_up["inventory"], "twin1", "community.docker.docker_compose_v2",
            {"project_src": "/srv/short", "state": "present"})
    deadline = time.monotonic() + 60
    while True:
        (seat,) = twin1.containers()
        if seat["State"] == "exited":
            break
        assert time.monotonic() < deadline, "the seat never failed: %s" % seat
        time.sleep(0.3)
    assert seat["Status"].startswith("Exited (1)")
    log = twin1.docker(["logs", seat["ID"]]).stderr
    total_gib = gpu0["memory_total_mib"] / 1024
    found = re.search(r"ValueError: Free memory on device cuda:0 \(([\d.]+)/%.1f GiB\) on startup is "
                      r"less than desired GPU memory utilization \(0\.92, %.2f GiB\)"
                      % (total_gib, 0.92 * total_gib), log)
    assert found, log[-3000:]
    # what the seat saw is what the driver left free, less the CUDA context it made first
    assert float(found.group(1)) <= 10000 / 1024
    twin1.docker(["rm", seat["ID"]])
    assert twin("gpu", "twin1", "--background", "0=0").returncode == 0


def test_gpu_info_over_ssh_attributes_the_seat_to_its_compose_service(twin_up):
    results = ansible(twin_up["inventory"], "all", "llmfleet.seats.gpu_info", {"source": "nvml"})
    for entry in twin_up["record"]["hosts"]:
        result = results[entry["name"]]
        expected = gpu_state(entry["name"])["gpus"]
        assert [(g["index"], g["uuid"], g["memory_total_mib"]) for g in result["gpus"]] == [
            (g["index"], g["uuid"], g["memory_total_mib"]) for g in expected]
    gpu1 = results["twin2"]["gpus"][1]
    (process,) = gpu1["processes"]
    assert (process["compose_project"], process["compose_service"]) == ("seats", "tiny")
    assert process["used_mib"] >= KV_BYTES // 2 ** 20
    assert gpu1["memory_used_mib"] == process["used_mib"]


def test_a_killed_seat_frees_its_memory(twin_up):
    twin2 = fleet.find_host("twin2")
    assert gpu_state("twin2")["gpus"][1]["processes"]
    twin2.docker(["kill", "seats-tiny-1"])
    deadline = time.monotonic() + 20
    while gpu_state("twin2")["gpus"][1]["processes"]:
        assert time.monotonic() < deadline, "a killed seat kept its GPU memory"
        time.sleep(0.1)
    assert fleet.gpu_request(twin2, {"op": "mem_get_info",
                                     "uuid": gpu_state("twin2")["gpus"][1]["uuid"]})["free_mib"] == \
        gpu_state("twin2")["gpus"][1]["memory_total_mib"]


def test_gpu_command_sets_background_memory_and_faults_seen_over_ssh(twin_up):
    inventory = twin_up["inventory"]
    proc = twin("gpu", "twin3", "--background", "1=2048")
    assert proc.returncode == 0, proc.stderr
    smi = ansible(inventory, "twin3", "command",
                  {"cmd": "nvidia-smi --query-gpu=index,memory.used --format=csv,noheader"})
    assert smi["twin3"]["stdout_lines"] == ["0, 0 MiB", "1, 2048 MiB"]
    assert twin("gpu", "twin3", "--faults", '{"nvidia_smi": "no_driver"}').returncode == 0
    broken = ansible(inventory, "twin3", "command", {"cmd": "nvidia-smi"}, check=False)["twin3"]
    assert broken["rc"] == 9
    assert "couldn't communicate with the NVIDIA driver" in broken["stdout"] + broken["stderr"]
    refused = twin("gpu", "twin3", "--background", "5=1")
    assert refused.returncode == 1
    assert refused.stderr.strip() == "twin: error: twin host twin3 has no GPU '5' (indices 0-1 or UUIDs)"


def test_a_host_whose_driver_is_down_refuses_gpu_containers(twin_up):
    twin3 = fleet.find_host("twin3")
    os.kill(twin3.pids["fakegpud"], 15)
    deadline = time.monotonic() + 10
    while alive(twin3.pids["fakegpud"]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc = twin3.docker(["run", "--rm", "--gpus", "all", "vllm/vllm-openai:v0.33.0", "x"],
                        check=False, timeout=60)
    assert proc.returncode != 0
    assert "nvidia-container-cli: initialization error: nvml error: driver not loaded" in proc.stderr
    assert "fakegpud DOWN" in twin("status").stdout


def test_down_leaves_nothing_behind(twin_up):
    record = twin_up["record"]
    processes = host_processes(record)
    assert all(processes.values()), "each host had processes before down"
    daemons = {pid for entry in record["hosts"] for pid in entry["pids"].values()}

    proc = twin("down")
    assert proc.returncode == 0, proc.stderr

    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert hostlib.NETNS_PREFIX not in netns.stdout
    links = os.listdir("/sys/class/net")
    assert [link for link in links if link.startswith((hostlib.VETH_PREFIX, hostlib.BRIDGE))] == []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        assert [line for line in handle if str(hostlib.STATE_DIR) + "/" in line] == []
    assert not hostlib.STATE_DIR.exists()
    survivors = {pid for pids in processes.values() for pid in pids if alive(pid)}
    assert survivors == set() and not any(alive(pid) for pid in daemons)
    # A client's own closed connections may sit in TIME-WAIT; no socket may still be open.
    connections = subprocess.run(["ss", "-Htanp", "exclude", "time-wait"], capture_output=True,
                                 text=True, check=True)
    assert hostlib.SUBNET + "." not in connections.stdout
    assert twin("status").stdout.strip() == "no twin is up"


def test_a_host_keeps_its_images_from_an_orderly_down_and_not_from_a_dead_dockerd():
    """What `up` imports into each host's dockerd is kept by `down` for the next `up` (each
    import costs CPU the suite spends forty times); a store whose dockerd died before `down`
    could empty it (containers it would start again) is not reused."""
    need_root_and("dockerd", "docker", "/usr/sbin/sshd", "ip", "nsenter")
    store = hostlib.IMAGES_DIR / "twin1"

    def up_image_ids():
        proc = twin("up", "--hosts", "1")
        assert proc.returncode == 0, proc.stderr
        assert not (store / hostlib.CLEAN_MARK).exists(), "the store is in use, not left clean"
        return fleet.find_host("twin1").image_ids(["vllm/vllm-openai:v0.33.0"])

    try:
        first = up_image_ids()
        assert twin("down").returncode == 0
        assert (store / hostlib.CLEAN_MARK).exists()
        assert up_image_ids() == first, "imported again"
        os.kill(fleet.load_record()["hosts"][0]["pids"]["dockerd"], 9)
        assert twin("down").returncode == 0
        assert not (store / hostlib.CLEAN_MARK).exists()
        assert up_image_ids() != first, "a store left by a dead dockerd was reused"
    finally:
        twin("down")


def test_a_record_that_outlived_its_twin_is_cleared_not_obeyed(tmp_path):
    """A machine restarted (or copied from one) with a twin up keeps the record on disk while
    the namespaces are gone and its pids may be anyone's: `up` clears it and touches nobody."""
    need_root_and("dockerd", "docker", "/usr/sbin/sshd", "ip", "nsenter")
    assert fleet.live_record() is None
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        hosts = [hostlib.Host(i, name) for i, name in enumerate(("twin1", "twin2"))]
        for host in hosts:
            host.pids = dict.fromkeys(("fakegpud", "dockerd", "sshd"), bystander.pid)
            host.mntns.parent.mkdir(parents=True, exist_ok=True)
            host.mntns.touch()
            Path("/run/netns", host.netns).touch()  # what a copied disk holds: plain files
        fleet.RECORD.write_text(json.dumps({"fleet": {"hosts": [{"name": "twin1"}, {"name": "twin2"}]},
                                            "hosts": [h.record() for h in hosts],
                                            "inventory": str(fleet.INVENTORY)}))
        assert twin("status").stdout.strip() == "no twin is up"

        proc = twin("up", "--hosts", "1")
        assert proc.returncode == 0, proc.stderr
        assert "removing the leftovers of an earlier twin" in proc.stderr
        assert [h["name"] for h in fleet.live_record()["hosts"]] == ["twin1"]
        assert not Path("/run/netns", hosts[1].netns).exists()
        assert bystander.poll() is None, "a pid from the stale record was signalled"
    finally:
        twin("down")
        bystander.kill()
        bystander.wait()


def test_a_twin_whose_owner_was_killed_is_cleared_by_the_next_up():
    """A test or script killed outright (SIGKILL: no trap, no finally) leaves its twin up. The
    twin names its owner, so the next `up`, even of another fleet, removes it instead of
    refusing to start beside it; a twin whose owner lives is still refused."""
    need_root_and("dockerd", "docker", "/usr/sbin/sshd", "ip", "nsenter")
    owner = subprocess.Popen(["sleep", "600"])
    try:
        first = twin("up", "--hosts", "1", "--owner", str(owner.pid))
        assert first.returncode == 0, first.stderr
        assert fleet.record_in_use()["owner"]["pid"] == owner.pid
        assert "owner pid %d" % owner.pid in twin("status").stdout
        refused = twin("up", "--hosts", "2")
        assert refused.returncode == 1 and "a different twin is already up" in refused.stderr

        owner.kill()
        owner.wait()
        assert fleet.record_in_use() is None
        assert "(gone: leftovers" in twin("status").stdout
        second = twin("up", "--hosts", "2")
        assert second.returncode == 0, second.stderr
        assert "(pid %d) is gone: removing its leftovers" % owner.pid in second.stderr
        assert [h["name"] for h in fleet.live_record()["hosts"]] == ["twin1", "twin2"]
    finally:
        owner.kill()
        owner.wait()
        twin("down")
    assert twin("status").stdout.strip() == "no twin is up"
