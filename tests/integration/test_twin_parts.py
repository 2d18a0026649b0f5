"""The fleet twin's parts, each at its own boundary: the spec, the simulated GPU driver (a real
daemon on a real unix socket, real client processes), the runtime hook's device selection and
the seat image's root filesystem (run with chroot). The whole twin is in test_twin.py."""

from __future__ import annotations

import json
import marshal
import os
import select
import socket
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from conftest import HOST_PYTHON, REPO_ROOT, VENV_BIN, ansible_env, run_ansible
from fakegpu import hook
from support.adhoc import JSON_OUTPUT, play_tasks
from support.need import need
from support.wait import wait_for
from twinlib import fleet, rootfs
from twinlib.spec import SpecError, gpu_state, parse_spec, spec_from_inventory, stable_uuid

TWIN_DIR = Path(__file__).resolve().parents[1] / "twin"

REPO = TWIN_DIR.parents[1]
H200 = {"name": "NVIDIA H200", "memory_total_mib": 143771}


# -- the spec --
def test_hosts_count_gives_named_hosts_with_stable_unique_uuids():
    fleet_spec = parse_spec(None, 3)
    names = [h["name"] for h in fleet_spec["hosts"]]
    assert names == ["twin1", "twin2", "twin3"]
    uuids = [g["uuid"] for h in fleet_spec["hosts"] for g in h["gpus"]]
    assert len(uuids) == 6 and len(set(uuids)) == 6
    assert uuids == [g["uuid"] for h in parse_spec(None, 3)["hosts"] for g in h["gpus"]]
    assert uuids[0] == stable_uuid("twin1", 0) != stable_uuid("twin2", 0)
    assert fleet_spec["images"]["vllm/vllm-openai:v0.33.0"] == "vllm"


def test_fv_ml1_spec_matches_the_fv_ml1_inventory():
    with open(TWIN_DIR / "specs" / "fv-ml1.json", encoding="utf-8") as handle:
        fleet_spec = parse_spec(json.load(handle))
    (host,) = fleet_spec["hosts"]
    with open(REPO / "inventories" / "fv-ml1" / "host_vars" / "fv-ml1.yml", encoding="utf-8") as handle:
        inventory = yaml.safe_load(handle)
    assert host["name"] == "fv-ml1"
    assert [(g["index"], g["uuid"], g["name"], g["memory_total_mib"]) for g in host["gpus"]] == [
        (g["index"], g["uuid"], g["name"], g["memory_total_mib"])
        for g in inventory["llmfleet_gpus"]]
    assert [g["memory_total_mib"] for g in host["gpus"]] == [97887] * 4
    seat_images = {s["image"] for s in inventory["llmfleet_seats"]}
    assert seat_images <= set(fleet_spec["images"])


def test_a_twin_of_the_fv_ml1_inventory_is_the_fv_ml1_spec():
    proc = run_ansible(["ansible-inventory", "-i", "inventories/fv-ml1", "--list"], check=True)
    from_inventory = parse_spec(spec_from_inventory(json.loads(proc.stdout)))
    with open(TWIN_DIR / "specs" / "fv-ml1.json", encoding="utf-8") as handle:
        assert from_inventory == parse_spec(json.load(handle))
    # the fixed-size tenants get the ASR stand-in, holding the inventory's cap
    assert from_inventory["images"] == {"vllm/vllm-openai:v0.33.0": "vllm",
                                        "parakeet-nemo:local": "asr", "qwen3-embed:local": "asr"}
    assert from_inventory["image_env"] == {"parakeet-nemo:local": {"FAKE_ASR_MEMORY": "3840MiB"},
                                           "qwen3-embed:local": {"FAKE_ASR_MEMORY": "3400MB"}}


def test_an_inventory_without_gpu_hosts_is_refused():
    with pytest.raises(SpecError) as caught:
        spec_from_inventory({"_meta": {"hostvars": {"gw": {"ansible_host": "10.0.0.1"}}}})
    assert str(caught.value) == ("twin spec inventory: expected at least one host with "
                                 "llmfleet_gpus, got ['gw']")


def test_gpu_entries_expand_counts_uuids_and_background():
    uuids = ["GPU-%08x-0000-4000-8000-000000000000" % i for i in range(3)]
    spec = {"hosts": [{"name": "box", "gpus": [
        dict(H200, count=3, uuids=uuids, background_used_mib=[0, 512, 0]),
        {"name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920, "memory_reserved_mib": 520}]}]}
    (host,) = parse_spec(spec)["hosts"]
    assert [g["index"] for g in host["gpus"]] == [0, 1, 2, 3]
    assert [g["uuid"] for g in host["gpus"][:3]] == uuids
    assert [g["background_used_mib"] for g in host["gpus"]] == [0, 512, 0, 0]
    state = gpu_state(host, parse_spec(spec)["driver"])
    assert state["schema"] == 1 and state["faults"] == {}
    assert len({g["pci_bus_id"] for g in state["gpus"]}) == 4
    assert state["gpus"][3]["memory_reserved_mib"] == 520 and state["gpus"][3]["processes"] == []


@pytest.mark.parametrize("spec, hosts, message", [
    ({"hosts": [{"name": "Bad_Name"}]}, None, "hosts[0].name: expected a host name"),
    ({"hosts": [{"name": "a"}, {"name": "a"}]}, None, "hosts[1].name: expected a name no other"),
    ({"gpus": [{"name": "X", "memory_total_mib": "97GB"}]}, None,
     "gpus[0].memory_total_mib: expected an integer >= 1, got '97GB'"),
    ({"gpus": [dict(H200, count=2, uuids=["GPU-x"])]}, None, "gpus[0].uuids: expected a list of 2"),
    ({"gpus": [dict(H200, background_used_mib=200000)]}, None,
     "gpus[0].background_used_mib: expected at most memory_total_mib"),
    ({"gpus": [dict(H200, colour="red")]}, None, "gpus[0]: expected only the keys"),
    ({"hosts": [{"name": "a"}]}, 3, "the spec lists 1 host(s) but --hosts 3"),
    ({"images": {"x:1": "llama"}}, None, "images['x:1']: expected one of vllm, asr"),
    ({"hosts": [{"name": "a", "kind": "docker"}]}, None, "hosts[0].kind: expected plain or systemd, got 'docker'"),
    ({"hosts": [{"name": "a", "kind": ["systemd"]}]}, None, "hosts[0].kind: expected plain or systemd, got ['systemd']"),
    ({"hosts": 2, "gpus": [dict(H200, uuid=stable_uuid("x", 0))]}, None,
     "expected UUIDs unique across the fleet"),
])
def test_bad_specs_fail_with_one_line_naming_the_field(spec, hosts, message):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec, hosts)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_cli_reports_a_bad_spec_file_in_one_line(tmp_path):
    bad = tmp_path / "spec.json"
    bad.write_text('{"hosts": [{"name": "ok", "gpus": []}]}')
    proc = subprocess.run([str(TWIN_DIR / "twin"), "up", "--spec", str(bad)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("twin: error: twin spec hosts[0].gpus: expected a non-empty "
                                   "list of GPU entries, got []")


# -- the simulated GPU driver --
class DriverClient:
    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.reader = self.sock.makefile("r")

    def send_line(self, line: bytes) -> dict:
        self.sock.sendall(line + b"\n")
        return json.loads(self.reader.readline())

    def __call__(self, **request) -> dict:
        return self.send_line(json.dumps(request).encode())

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


@pytest.fixture
def driver(tmp_path):
    """A fakegpud with two GPUs (one with 1,000 MiB of background use) on a private socket."""
    spec = parse_spec({"hosts": [{"name": "gpuhost", "gpus": [
        dict(H200, count=2, background_used_mib=[0, 1000])]}]})
    (tmp_path / "gpus.json").write_text(json.dumps(gpu_state(spec["hosts"][0], spec["driver"])))
    sock, state = str(tmp_path / "gpu.sock"), tmp_path / "state.json"
    proc = subprocess.Popen([sys.executable, str(TWIN_DIR / "fakegpu" / "fakegpud.py"),
                             "--initial", str(tmp_path / "gpus.json"), "--state", str(state),
                             "--socket", sock], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
        time.sleep(0.02)
    uuids = [g["uuid"] for g in spec["hosts"][0]["gpus"]]
    yield {"socket": sock, "state": state, "uuids": uuids, "proc": proc}
    proc.terminate()
    proc.wait(timeout=10)
    assert not os.path.exists(sock), "the driver removes its socket when it stops"


def read_state(path: Path) -> dict:
    return json.loads(path.read_text())


def test_driver_lists_gpus_and_allocates_against_free_memory(driver):
    gpu0, gpu1 = driver["uuids"]
    client = DriverClient(driver["socket"])
    listing = client(op="list")
    assert [(g["index"], g["uuid"], g["free_mib"]) for g in listing["gpus"]] == [
        (0, gpu0, 143771), (1, gpu1, 142771)]
    assert client(op="alloc", uuid=gpu1, mib=100000, tag="weights") == {"ok": True, "used_mib": 100000}
    assert client(op="alloc", uuid=gpu1, mib=40000, tag="kv") == {"ok": True, "used_mib": 140000}
    assert client(op="mem_get_info", uuid=gpu1) == {"ok": True, "free_mib": 2771, "total_mib": 143771}
    assert client(op="alloc", uuid=gpu1, mib=2772, tag="kv") == {
        "ok": False, "error": "out of memory", "free_mib": 2771}
    assert client(op="free", uuid=gpu1, mib=40000) == {"ok": True, "used_mib": 100000}
    refused = client(op="free", uuid=gpu1, mib=100001)
    assert not refused["ok"] and "holds 100000 MiB" in refused["error"]

    state = read_state(driver["state"])
    assert state["gpus"][0]["processes"] == []
    (proc,) = state["gpus"][1]["processes"]
    assert proc["pid"] == os.getpid() and proc["used_mib"] == 100000
    assert proc["name"] == sys.executable or os.path.basename(proc["name"]).startswith("python")
    assert state["gpus"][1]["background_used_mib"] == 1000
    client.close()


def test_driver_answers_bad_requests_and_keeps_the_connection(driver):
    client = DriverClient(driver["socket"])
    assert client.send_line(b"{not json")["error"].startswith("bad request:")
    assert client.send_line(b"[1, 2]") == {"ok": False, "error": "bad request: expected a JSON object"}
    assert client(op="format") == {"ok": False, "error": "unknown op 'format'"}
    assert "unknown device 'GPU-nope'" in client(op="alloc", uuid="GPU-nope", mib=1)["error"]
    assert client(op="alloc", uuid=driver["uuids"][0], mib=0)["error"] == \
        "bad request: mib must be an integer >= 1"
    assert client(op="list")["ok"]
    client.close()


def test_a_killed_process_gives_its_memory_back(driver):
    gpu0 = driver["uuids"][0]
    holder = subprocess.Popen([sys.executable, "-c", """
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(json.dumps({"op": "alloc", "uuid": sys.argv[2], "mib": 30000, "tag": "kv"}).encode() + b"\\n")
print(s.makefile().readline(), flush=True)
time.sleep(600)
""", driver["socket"], gpu0], stdout=subprocess.PIPE, text=True)
    assert json.loads(holder.stdout.readline()) == {"ok": True, "used_mib": 30000}
    (proc,) = read_state(driver["state"])["gpus"][0]["processes"]
    assert proc["pid"] == holder.pid and proc["used_mib"] == 30000

    holder.kill()
    holder.wait()
    deadline = time.monotonic() + 5
    while read_state(driver["state"])["gpus"][0]["processes"]:
        assert time.monotonic() < deadline, "memory of a killed process was never released"
        time.sleep(0.02)
    client = DriverClient(driver["socket"])
    assert client(op="mem_get_info", uuid=gpu0)["free_mib"] == 143771
    client.close()


def test_state_file_is_replaced_atomically_under_load(driver):
    gpu0 = driver["uuids"][0]
    torn, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                json.loads(driver["state"].read_text())
            except ValueError as exc:
                torn.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    client = DriverClient(driver["socket"])
    for attempt in range(300):
        assert client(op="alloc", uuid=gpu0, mib=10)["ok"], attempt
    stop.set()
    thread.join()
    assert torn == []
    assert read_state(driver["state"])["gpus"][0]["processes"][0]["used_mib"] == 3000
    client.close()


def test_background_memory_and_a_lost_gpu(driver):
    gpu0, gpu1 = driver["uuids"]
    client = DriverClient(driver["socket"])
    assert client(op="set_background", uuid=gpu0, mib=143000) == {"ok": True, "free_mib": 771}
    assert client(op="alloc", uuid=gpu0, mib=772)["error"] == "out of memory"
    assert client(op="set_faults", faults={"gpu_lost": [1]}) == {"ok": True}
    assert [g["index"] for g in client(op="list")["gpus"]] == [0]
    assert client(op="alloc", uuid=gpu1, mib=1) == {"ok": False, "error": "GPU has fallen off the bus"}
    state = read_state(driver["state"])
    assert state["faults"] == {"gpu_lost": [1]} and state["gpus"][0]["background_used_mib"] == 143000
    client.close()


def test_a_slow_context_holds_only_context_creation_on_that_gpu_until_the_fault_clears(driver):
    gpu0, gpu1 = driver["uuids"]
    control = DriverClient(driver["socket"])
    assert control(op="set_faults", faults={"slow_context_s": {"0": 600}}) == {"ok": True}
    assert control(op="set_faults", faults={"slow_context_s": {"0": -1}})["error"].startswith(
        "bad request: slow_context_s")
    assert control(op="set_faults", faults={"slow_context_s": {"0": 600}}) == {"ok": True}
    seat = DriverClient(driver["socket"])
    seat.sock.sendall(json.dumps({"op": "alloc", "uuid": gpu0, "mib": 512, "tag": "cuda_context"})
                      .encode() + b"\n")
    # Meanwhile the driver answers everyone else, and a context on the other GPU is not held.
    other = DriverClient(driver["socket"])
    assert other(op="alloc", uuid=gpu1, mib=512, tag="cuda_context")["ok"]
    assert other(op="alloc", uuid=gpu0, mib=10, tag="kv")["ok"]
    assert select.select([seat.sock], [], [], 0)[0] == [], "the context is held"
    assert control(op="set_faults", faults={}) == {"ok": True}
    assert json.loads(seat.reader.readline()) == {"ok": True, "used_mib": 512}

    assert control(op="set_faults", faults={"slow_context_s": {"0": 0.5}}) == {"ok": True}
    started = time.monotonic()
    assert seat(op="alloc", uuid=gpu0, mib=1, tag="cuda_context")["ok"]
    assert time.monotonic() - started >= 0.5
    for client in (control, seat, other):
        client.close()


# -- the runtime hook --
GPUS = [{"index": 0, "uuid": "GPU-aaaaaaaa-0000-4000-8000-000000000000"},
        {"index": 1, "uuid": "GPU-bbbbbbbb-0000-4000-8000-000000000000"}]


@pytest.mark.parametrize("visible, expected", [
    ("all", [0, 1]), ("1", [1]), ("0,1", [0, 1]), (GPUS[1]["uuid"], [1]),
    ("%s,0" % GPUS[1]["uuid"], [1, 0]),
])
def test_hook_selects_devices_as_nvidia_container_cli(visible, expected):
    assert [g["index"] for g in hook.select_devices(visible, GPUS)] == expected


def test_hook_refuses_an_unknown_device_with_the_cli_message():
    with pytest.raises(hook.HookError) as caught:
        hook.select_devices("0,GPU-deadbeef", GPUS)
    assert str(caught.value) == "nvidia-container-cli: device error: GPU-deadbeef: unknown device"


def test_hook_reads_the_variable_docker_appends_last():
    env = ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES=GPU-x"]
    assert hook.last_env(env, "NVIDIA_VISIBLE_DEVICES") == "GPU-x"
    assert hook.last_env(env, "NVIDIA_DRIVER_CAPABILITIES") is None


# -- the seat image's root filesystem --
def test_seat_rootfs_runs_debian_python_and_the_seat(tmp_path):
    need(os.geteuid() == 0, "needs root (chroot into the image's root filesystem)")
    programs = [entry[0] for entry in fleet.ENTRYPOINTS.values()]
    tarball = rootfs.build_rootfs(fleet.SEAT_DIR, tmp_path / "cache", programs)
    assert rootfs.build_rootfs(fleet.SEAT_DIR, tmp_path / "cache", programs) == tarball
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
        links = {m.name for m in members if m.issym()}
        assert all((m.uid, m.gid) == (0, 0) for m in members)
        # docker import refuses members below a symlink (/lib is one on Debian 12)
        assert not [m.name for m in members
                    if any(m.name.startswith(link + "/") for link in links)]
        tar.extractall(tmp_path / "root")
    bytecode = {path: path.stat().st_mtime_ns for path in (tmp_path / "root").rglob("*.pyc")}
    probe = ("import ssl, json, http.server, ctypes, sqlite3, decimal, asyncio, socket; "
             "print('python', __import__('sys').version.split()[0])")
    proc = subprocess.run(["/usr/sbin/chroot", str(tmp_path / "root"), "/usr/bin/python3", "-c", probe],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("python 3.11")
    for program in programs:
        proc = subprocess.run(["/usr/sbin/chroot", str(tmp_path / "root"), "/bin/sh", "-c",
                               program + " --help"], capture_output=True, text=True, timeout=60,
                              check=False, env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage: " + program), proc.stdout
    # the standard library and the seat's modules came with valid bytecode: python compiled none
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "root").rglob("*.pyc")} == bytecode
    assert any(path.match("opt/seat/fakevllm/__pycache__/server.cpython-311.pyc") for path in bytecode)


# -- the hosts' python --
def test_the_hosts_python_keeps_a_zips_compiled_code_by_its_source_and_names_each_run_its_own(tmp_path):
    kept = tmp_path / "bytecode"
    source = "def fails():\n    raise ValueError('from the zip')\n\nVALUE = 42\n"
    probe = ("import sys, traceback; sys.path.insert(0, sys.argv[1]); import payload; print(payload.VALUE)\n"
             "try:\n    payload.fails()\nexcept ValueError as exc:\n"
             "    print(traceback.extract_tb(exc.__traceback__)[-1].filename)")

    def run(name):
        zipped = tmp_path / name / "payload.zip"
        zipped.parent.mkdir(exist_ok=True)
        with zipfile.ZipFile(zipped, "w") as archive:
            archive.writestr("payload.py", source)
        proc = subprocess.run([str(HOST_PYTHON), "-c", probe, str(zipped)], capture_output=True, text=True,
                              timeout=60, check=True, env=dict(os.environ, LLMFLEET_TWIN_BYTECODE=str(kept)))
        return proc.stdout.split()

    assert run("first") == ["42", str(tmp_path / "first" / "payload.zip" / "payload.py")]
    [code] = kept.iterdir()
    assert oct(kept.stat().st_mode & 0o777) == "0o700"
    # another run's zip of the same source: the kept code, named after that zip
    assert run("second") == ["42", str(tmp_path / "second" / "payload.zip" / "payload.py")]
    assert list(kept.iterdir()) == [code]
    # what is kept is what runs: kept code of another value is what a third run prints
    code.write_bytes(marshal.dumps(compile(source.replace("42", "43"), "payload.py", "exec")))
    assert run("third")[0] == "43"


# -- the test runs' ansible --
def test_the_test_runs_build_a_module_once_and_an_installed_copy_builds_its_own(tmp_path):
    """Every ansible-playbook of the suite ships the zip of a module the first one built
    (CONTRIBUTING.md); a run of another copy of the collection is given no shared cache."""
    playbook = tmp_path / "lock.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"llmfleet.seats.rebalance_lock": {"path": str(tmp_path / "lock"), "run_id": "x", "state": "released"}}]}]))
    shared = tmp_path / "modules"
    extra = {"LLMFLEET_TEST_MODULE_CACHE": str(shared), "ANSIBLE_DEBUG": "1"}
    first = run_ansible(["ansible-playbook", str(playbook)], extra, check=True)
    assert "ANSIBALLZ: Creating module" in first.stdout + first.stderr
    assert (shared / "ansible_collections.llmfleet.seats.plugins.modules.rebalance_lock-ZIP_DEFLATED-none").is_file()
    assert oct(shared.stat().st_mode & 0o777) == "0o700"
    second = run_ansible(["ansible-playbook", str(playbook)], extra, check=True)
    assert "ANSIBALLZ: Creating module" not in second.stdout + second.stderr
    assert "ANSIBALLZ: using cached module" in second.stdout + second.stderr
    assert "LLMFLEET_TEST_MODULE_CACHE" not in ansible_env({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)})


def test_the_test_runs_workers_find_the_collections_controller_plugins_imported(tmp_path):
    """Each ansible-playbook of the suite imports the collection's filter, action and lookup
    plugins once, before its workers fork (CONTRIBUTING.md): a worker's first task finds them
    imported. A run of another copy of the collection is left as an operator runs it."""
    plugins = REPO / "plugins"
    expected = sorted("ansible_collections.llmfleet.seats.plugins.%s.%s" % (kind, path.stem)
                      for kind in ("filter", "action", "lookup") for path in (plugins / kind).glob("*.py")
                      if path.stem != "__init__")
    playbook = tmp_path / "workers.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.debug": {"msg": "{{ %s | imported_in_worker }}" % json.dumps(expected)}}]}]))
    filters = {"ANSIBLE_FILTER_PLUGINS": str(REPO / "tests" / "support" / "controller" / "filter"),
               "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    run = run_ansible(["ansible-playbook", str(playbook)], filters, check=True)
    [task] = json.loads(run.stdout)["plays"][0]["tasks"]
    assert len(expected) > 10 and task["hosts"]["localhost"]["msg"] == expected
    assert "preloaded_plugins" not in ansible_env({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)}).get(
        "ANSIBLE_CALLBACKS_ENABLED", "")


def test_the_test_runs_compile_a_collection_file_once(tmp_path):
    """Each ansible-playbook of the suite keeps the code Ansible's collection loader compiles from
    the collection's files (CONTRIBUTING.md): a second run compiles and keeps nothing anew."""
    kept = tmp_path / "bytecode"
    playbook = tmp_path / "size.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.debug": {"msg": "{{ '1GiB' | llmfleet.seats.to_bytes }}"}}]}]))
    extra = {"LLMFLEET_TWIN_BYTECODE": str(kept), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    runs = []
    for attempt in ("first", "second"):
        run = run_ansible(["ansible-playbook", str(playbook)], extra, check=True)
        [task] = json.loads(run.stdout)["plays"][0]["tasks"]
        assert task["hosts"]["localhost"]["msg"] == 1073741824, (attempt, "the kept code is the collection's")
        runs.append({path.name: path.stat().st_mtime_ns for path in kept.iterdir()})
    plugins = [path for kind in ("filter", "action", "lookup") for path in (REPO / "plugins" / kind).glob("*.py")]
    assert len(runs[0]) > len(plugins), "every plugin the run imported, and their module_utils"
    assert runs[1] == runs[0]


def test_the_test_runs_keep_a_templates_code_and_render_it_as_jinja_compiles_it(tmp_path):
    """Each ansible-playbook of the suite keeps the code Jinja compiles from a template or a
    conditional (CONTRIBUTING.md): the kept code renders what a compile renders (Ansible's
    backslash escaping, statements, conditionals, a template that does not compile), a second
    run keeps nothing anew, and what is kept is what runs."""
    kept = tmp_path / "templates"

    def run(tasks, cache):
        """``{task name: (msg, failed, skipped)}`` of one run with the kept code in ``cache``."""
        _proc, results = play_tasks(tasks, tmp_path, extra_env={"LLMFLEET_TEST_TEMPLATE_CACHE": cache})
        return {name: tuple(result.get(key) for key in ("msg", "failed", "skipped")) for name, result in results.items()}

    def files():
        return {path.name: path.stat().st_mtime_ns for path in kept.iterdir()}

    tasks = [
        {"name": "a backslash in an expression",
         "ansible.builtin.debug": {"msg": "{{ 'gpu-7' | regex_replace('^gpu-(\\d+)$', 'card \\1') }}"}},
        {"name": "a statement", "ansible.builtin.debug": {"msg": "{% for n in [1, 2] %}{{ n * 2 }},{% endfor %}"}},
        {"name": "a conditional", "ansible.builtin.debug": {"msg": "taken"}, "when": "[3, 4] | sum == 7"},
        {"name": "a conditional that is false", "ansible.builtin.debug": {"msg": "not taken"}, "when": "[3, 4] | sum == 8"},
        {"name": "an assertion", "ansible.builtin.assert": {
            "that": ["'1GiB' | llmfleet.seats.to_bytes == 1073741824"], "quiet": True}},
        {"name": "a template that does not compile", "ansible.builtin.debug": {"msg": "{{ 1 + }}"}, "ignore_errors": True},
    ]
    compiled = run(tasks, "")
    assert compiled["a backslash in an expression"][0] == "card 7" and compiled["a statement"][0] == "2,4,"
    assert compiled["a conditional"][0] == "taken" and compiled["a conditional that is false"][2]
    msg, failed, _skipped = compiled["a template that does not compile"]
    assert failed and "syntax" in msg.lower()
    assert not kept.exists()
    assert run(tasks, str(kept)) == compiled
    first = files()
    assert len(first) >= 5 and oct(kept.stat().st_mode & 0o777) == "0o700"
    assert run(tasks, str(kept)) == compiled
    assert files() == first, "a second run compiles and keeps nothing anew"

    # what is kept is what runs: the code kept for one template, swapped for another's
    second = [{"name": "second", "ansible.builtin.debug": {"msg": "{{ 'sec' ~ 'ond' }}"}}]
    run(second, str(kept))
    [kept_second] = set(files()) - set(first)
    run([{"name": "third", "ansible.builtin.debug": {"msg": "{{ 'thi' ~ 'rd' }}"}}], str(kept))
    [kept_third] = set(files()) - set(first) - {kept_second}
    (kept / kept_second).write_bytes((kept / kept_third).read_bytes())
    assert run(second, str(kept))["second"][0] == "third"


def _main_thread_switches(pid):
    """How often a process's main thread has given up the CPU of its own accord (a sleep, a wait)."""
    status = Path("/proc/%d/status" % pid).read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def test_the_test_runs_wait_for_results_woken_by_each_and_still_find_a_dead_worker(tmp_path):
    """Each ansible-playbook of the suite waits for its workers' results woken by each, where
    Ansible polls for them (CONTRIBUTING.md): while a task runs, the waiting process wakes about
    ten times a second, not a thousand; the results are the tasks' own; and a worker killed
    before its result fails the run as Ansible's own wait does."""
    started, release = tmp_path / "started", tmp_path / "release"
    playbook = tmp_path / "wait.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "start", "ansible.builtin.file": {"path": str(started), "state": "touch"}},
        {"name": "wait", "ansible.builtin.wait_for": {"path": str(release), "timeout": 300}},
        {"name": "after", "ansible.builtin.debug": {"msg": "{{ [1, 2] | sum }}"}}]}]))
    run = subprocess.Popen([str(VENV_BIN / "ansible-playbook"), str(playbook)], cwd=REPO_ROOT,
                           env=ansible_env(JSON_OUTPUT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(started.exists, what="the run's first task")
        before = _main_thread_switches(run.pid)
        time.sleep(1)  # a second of the wait task, measured
        woken = _main_thread_switches(run.pid) - before
    finally:
        release.touch()
        out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    results = {task["task"]["name"]: task["hosts"]["localhost"] for task in json.loads(out)["plays"][0]["tasks"]}
    assert results["start"]["changed"] and not results["wait"].get("failed") and results["after"]["msg"] == 3
    # polled: one wake a millisecond (some 900 a second on this machine, fewer only when it is
    # starved of CPU); woken: the results, and a look for a dead worker every 0.1 s
    assert woken < 100, "the waiting ansible-playbook woke %d times in a second" % woken

    # a worker that dies without a result: its run fails, found by the wait's look at its workers
    dies = tmp_path / "dies.yml"
    dies.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "kill this task's worker", "ansible.builtin.shell":
            "p=$$; while [ \"$(cat /proc/$p/comm)\" != ansible-playboo ]; do p=$(cut -d' ' -f4 /proc/$p/stat); done;"
            " kill -9 $p"},
        {"name": "never", "ansible.builtin.debug": {"msg": "not reached"}}]}]))
    proc = run_ansible(["ansible-playbook", str(dies)], timeout=300)
    assert proc.returncode != 0 and "A worker was found in a dead state" in proc.stdout + proc.stderr, \
        proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "not reached" not in proc.stdout
