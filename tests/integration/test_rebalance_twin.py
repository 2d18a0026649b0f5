"""The gated rebalance end to end on the fleet twin: two hosts over real SSH, each with its own
dockerd and simulated GPUs, vLLM-like seats under compose, real `ansible-playbook
playbooks/rebalance.yml` runs.

The first test deploys the fleet; every later test starts from that baseline and leaves it
behind. Each fault ends with the faulty host rolled back: its files byte-identical, the seats
that ran before running and healthy, and the other host untouched."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, VENV_BIN, ansible_env, run_ansible
from support.need import need_root_and

TWIN_DIR = REPO_ROOT / "tests" / "twin"
sys.path.insert(0, str(TWIN_DIR))

from twinlib import fleet  # noqa: E402

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.slow]

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair"
PLAYBOOK = REPO_ROOT / "playbooks" / "rebalance.yml"
TWIN1_SEATS = {"alpha", "beta", "gamma", "asr"}
TWIN2_SEATS = {"delta", "epsilon"}


def twin(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TWIN_DIR / "twin")] + list(args), capture_output=True, text=True,
                          timeout=300, check=False, env=ansible_env())


@pytest.fixture(scope="module")
def twin_inventory():
    need_root_and("ip", "dockerd", "sshd" if shutil.which("sshd") else "/usr/sbin/sshd")
    up = twin("up", "--spec", str(FLEET / "spec.json"))
    assert up.returncode == 0, up.stdout + up.stderr
    inventory = up.stdout.strip().splitlines()[-1]
    staged = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), "-i", inventory,
                          str(FLEET / "prepare.yml")])
    assert staged.returncode == 0, staged.stdout + staged.stderr
    yield inventory
    down = twin("down")
    assert down.returncode == 0, down.stdout + down.stderr


def fleet_with(tmp_path: Path, **edits) -> Path:
    """A copy of the test fleet with seat fields changed: edits = {seat: {field: value}}."""
    copy = tmp_path / "fleet"
    shutil.copytree(FLEET, copy)
    for host in ("twin1", "twin2"):
        path = copy / "host_vars" / ("%s.yml" % host)
        data = yaml.safe_load(path.read_text())
        for seat in data["llmfleet_seats"]:
            seat.update(edits.get(seat["name"], {}))
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy / "hosts.yml"


def rebalance(hosts: Path, twin_inventory: str, report: Path, *extra: str, check: bool = True,
              background: bool = False):
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(hosts), "-i", twin_inventory,
           str(PLAYBOOK), "-e", "llmfleet_report_dir=%s" % report] + list(extra)
    if background:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, env=ansible_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=ansible_env(), capture_output=True, text=True,
                          timeout=900, check=False)
    if check:
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    return proc


def report_of(report: Path) -> dict:
    return json.loads((report / "report.json").read_text())


def state(host: str) -> dict:
    """The host's seat files (bytes) and containers (id, running, health)."""
    files = {}
    root = Path(fleet.find_host(host).path("/srv/compose"))
    for path in sorted(root.glob("*/*")):
        if path.is_file() and not path.name.startswith(".llmfleet-"):  # a killed run's temp files
            files[str(path.relative_to(root))] = path.read_bytes()
    out = twin("exec", host, "--", "docker", "ps", "-a", "--format",
               "{{.Names}} {{.ID}} {{.State}} {{.Status}}").stdout
    containers = {}
    for line in out.splitlines():
        name, cid, running, status = line.split(" ", 3)
        containers[name] = (cid, running, "(healthy)" in status)
    return {"files": files, "containers": containers}


def live(files: dict) -> dict:
    """The files compose reads, without the dated backups a run keeps."""
    return {name: data for name, data in files.items() if ".bak-" not in name}


def assert_rolled_back(before: dict, host: str = "twin1") -> None:
    after = state(host)
    assert live(after["files"]) == live(before["files"]), "files differ after the rollback: %s" % sorted(
        k for k in set(live(after["files"])) | set(live(before["files"]))
        if after["files"].get(k) != before["files"].get(k))
    assert set(before["files"]) <= set(after["files"]), "a rollback keeps every backup"
    for name, (_cid, running, healthy) in before["containers"].items():
        if running == "running":
            assert after["containers"][name][1] == "running" and after["containers"][name][2], \
                "%s is not running and healthy after the rollback: %s" % (name, after["containers"][name])


def gates_failed(report: dict, host: str = "twin1") -> list:
    return [(g["seat"], g["gate"]) for g in report["hosts"][host]["gates"] if not g["ok"]]


def test_first_run_deploys_every_seat_and_passes_every_gate(twin_inventory, tmp_path):
    rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path)
    report = report_of(tmp_path)
    for host, seats in (("twin1", TWIN1_SEATS), ("twin2", TWIN2_SEATS)):
        section = report["hosts"][host]
        assert section["status"] == "applied"
        assert section["gates"] and all(g["ok"] for g in section["gates"])
        gated = {g["seat"] for g in section["gates"] if g["gate"] == "health"}
        assert gated == seats, "every seat passed the health gate"
        _wait_for(lambda: all(running == "running" and healthy for _cid, running, healthy
                              in state(host)["containers"].values()),
                  what="docker's healthcheck to call every container on %s healthy" % host)
    tokens = {g["seat"]: g for g in report["hosts"]["twin1"]["gates"] if g["gate"] == "kv_cache_tokens"}
    plan = {s["name"]: s for s in report["hosts"]["twin1"]["plan"]["seats"]}
    assert tokens["beta"]["measured"] == plan["beta"]["kv_cache_tokens"] == 65536, \
        "the seat's boot log prints the tokens the plan computed for 8 GiB"
    gpus = fleet.find_host("twin1").gpu_state()["gpus"]
    held = sum(p["used_mib"] for gpu in gpus for p in gpu["processes"])
    assert held >= sum(s["footprint_mib"] for s in plan.values()) - 4096
    assert (tmp_path / "report.md").read_text().count("**applied**") == 2
    assert (tmp_path / "twin1.svg").read_text().startswith("<svg")


def test_a_dry_run_shows_the_diff_and_touches_nothing(twin_inventory, tmp_path):
    before = {host: state(host) for host in ("twin1", "twin2")}
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 16384})
    proc = rebalance(hosts, twin_inventory, tmp_path / "report", "--check", "--diff")
    assert "-SEAT_MAX_MODEL_LEN='32768'" in proc.stdout
    assert "+SEAT_MAX_MODEL_LEN='16384'" in proc.stdout
    assert "boot waves (one seat per GPU each): alpha" in proc.stdout
    assert report_of(tmp_path / "report")["hosts"]["twin1"]["status"] == "planned"
    for host in ("twin1", "twin2"):
        assert state(host) == before[host], "a dry run changed %s" % host


def test_a_second_run_changes_nothing_and_restarts_nothing(twin_inventory, tmp_path):
    before = {host: state(host) for host in ("twin1", "twin2")}
    proc = rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path)
    # Only the report and plan files on the controller change; nothing on a host.
    on_hosts = [line for line in proc.stdout.splitlines()
                if line.startswith("changed: [twin") and "-> localhost" not in line]
    assert on_hosts == []
    assert all(s["status"] == "unchanged" for s in report_of(tmp_path)["hosts"].values())
    for host in ("twin1", "twin2"):
        assert state(host) == before[host]


def test_a_change_recreates_only_that_seat_and_keeps_a_dated_backup(twin_inventory, tmp_path):
    before = state("twin1")
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 16384})
    rebalance(hosts, twin_inventory, tmp_path / "report", "-e", "seat_rebalance_settle_seconds=2")
    after = state("twin1")
    changed = {n for n in before["containers"] if after["containers"][n][0] != before["containers"][n][0]}
    assert changed == {"vllm-alpha"}
    backups = report_of(tmp_path / "report")["hosts"]["twin1"]["backups"]
    assert len(backups) == 1 and backups[0].startswith("/srv/compose/alpha/.env.bak-")
    assert after["files"]["alpha/" + os.path.basename(backups[0])] == before["files"]["alpha/.env"]
    assert b"SEAT_MAX_MODEL_LEN='16384'" in after["files"]["alpha/.env"]
    plateau = [g for g in report_of(tmp_path / "report")["hosts"]["twin1"]["gates"]
               if g["gate"] == "free_mib_plateau"]
    assert [g["seat"] for g in plateau] == ["GPU 0", "GPU 1"] and all(g["ok"] for g in plateau), \
        "after the settle wait every GPU is re-read against the plan's spare at plateau"


@pytest.mark.parametrize("fault, failed_gate", [
    ("oom_at_boot", ("gamma", "container_running")),
    ("health_stuck", ("gamma", "health")),
])
def test_a_seat_that_fails_after_start_is_rolled_back(twin_inventory, tmp_path, fault, failed_gate):
    before = {host: state(host) for host in ("twin1", "twin2")}
    hosts = fleet_with(tmp_path, gamma={"kv_factor": 1.2, "environment": {"FAKE_VLLM_FAULT": fault}})
    proc = rebalance(hosts, twin_inventory, tmp_path, "-e", "seat_rebalance_health_timeout=10",
                     check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert failed_gate in gates_failed(report)
    assert "twin2" not in report["hosts"], "the rollout stopped at the failed host"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def test_boot_is_not_runtime_the_long_request_probe_catches_it(twin_inventory, tmp_path):
    """Seed 003: a seat passes every boot gate, then dies on its first long request. The
    runtime probe sends one, and the host is rolled back."""
    before = {host: state(host) for host in ("twin1", "twin2")}
    hosts = fleet_with(tmp_path, gamma={"kv_factor": 1.2,
                                        "environment": {"FAKE_VLLM_FAULT": "oom_on_long_request"}})
    proc = rebalance(hosts, twin_inventory, tmp_path, "-e", "seat_rebalance_runtime_probe=true",
                     check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path)
    passed = {(g["seat"], g["gate"]) for g in report["hosts"]["twin1"]["gates"] if g["ok"]}
    assert {("gamma", "health"), ("gamma", "kv_cache_tokens")} <= passed, "it passed every boot gate"
    assert ("gamma", "runtime_probe") in gates_failed(report)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def test_a_boot_log_that_disagrees_with_the_plan_is_rolled_back(twin_inventory, tmp_path):
    """The checkpoint on the host is not the one planned for (a different layer count): the
    seat boots, but its KV line differs from the plan."""
    config = Path(fleet.find_host("twin1").path("/srv/models/llama-3.1-8b-instruct/config.json"))
    original = config.read_text()
    before = {host: state(host) for host in ("twin1", "twin2")}
    swapped = json.loads(original)
    swapped["num_hidden_layers"] = 30
    config.write_text(json.dumps(swapped))
    try:
        hosts = fleet_with(tmp_path, beta={"kv_cache_memory_bytes": "9GiB"})
        proc = rebalance(hosts, twin_inventory, tmp_path, check=False)
    finally:
        config.write_text(original)
    assert proc.returncode != 0
    report = report_of(tmp_path)
    assert ("beta", "kv_cache_tokens") in gates_failed(report)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def test_a_gpu_short_of_memory_before_start_is_refused_and_rolled_back(twin_inventory, tmp_path):
    """Planned from a snapshot recorded earlier, while the card filled up since (seed 001: the
    margin measured against the wrong number). The pre-start gate reads the card itself."""
    snapshot = tmp_path / "twin1.json"
    saved = run_ansible(["ansible", "twin1", "-i", str(FLEET / "hosts.yml"), "-i", twin_inventory,
                         "-m", "llmfleet.seats.gpu_info", "-a", "save_snapshot_path=/srv/snap.json"])
    assert saved.returncode == 0, saved.stdout
    shutil.copy(fleet.find_host("twin1").path("/srv/snap.json"), snapshot)
    before = {host: state(host) for host in ("twin1", "twin2")}
    free_gpu1 = json.loads(snapshot.read_text())["gpus"][1]["memory_free_mib"]
    assert twin("gpu", "twin1", "--background", "1=%d" % (free_gpu1 - 1000)).returncode == 0
    try:
        hosts = fleet_with(tmp_path, alpha={"max_model_len": 40960})
        proc = rebalance(hosts, twin_inventory, tmp_path / "report", "-e", "target=twin1",
                         "-e", "seat_plan_cards_source=snapshot",
                         "-e", "seat_plan_cards_snapshot=%s" % snapshot, check=False)
    finally:
        assert twin("gpu", "twin1", "--background", "1=0").returncode == 0
    assert proc.returncode != 0
    report = report_of(tmp_path / "report")
    assert ("alpha", "free_mib_before_start") in gates_failed(report)
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def _wait_for(condition, timeout=120, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("timed out waiting for %s" % what)


def _lock_held() -> bool:
    return Path(fleet.find_host("twin1").path("/srv/llmfleet/rebalance.lock")).exists()


def _alpha_recreated(old_id: str) -> bool:
    return state("twin1")["containers"].get("vllm-alpha", (old_id,))[0] != old_id


def test_a_concurrent_run_is_refused_before_it_touches_anything(twin_inventory, tmp_path):
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 20480,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": "12"}})
    first = rebalance(hosts, twin_inventory, tmp_path / "first", background=True)
    try:
        _wait_for(_lock_held, what="the first run's lock")
        second = rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path / "second", check=False)
        assert second.returncode != 0
        assert "another rebalance holds /srv/llmfleet/rebalance.lock" in second.stdout
        out = first.communicate(timeout=600)[0]
        assert first.returncode == 0, out[-4000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert report_of(tmp_path / "first")["hosts"]["twin1"]["status"] == "applied"
    assert not (tmp_path / "second" / "report.json").exists(), "the refused run wrote nothing"


def test_an_interrupted_run_is_recovered_by_the_next_one(twin_inventory, tmp_path):
    """ansible-playbook killed mid-boot: the lock stays with its journal. The next run sees the
    holder's process is gone, takes the lock over, and still rolls back to the state before the
    FIRST run when its own gate fails."""
    before = {host: state(host) for host in ("twin1", "twin2")}
    old_alpha = before["twin1"]["containers"]["vllm-alpha"][0]
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 24576,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": "30"}})
    first = rebalance(hosts, twin_inventory, tmp_path / "first", background=True)
    try:
        _wait_for(lambda: _alpha_recreated(old_alpha), what="alpha recreated by the first run")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    assert _lock_held(), "the interrupted run's lock and journal stay"
    assert state("twin1")["files"] != before["twin1"]["files"], "the first run got to write"

    # the re-run fails a gate of its own: its rollback must reach back past the first run
    failing = fleet_with(tmp_path / "again", alpha={
        "max_model_len": 24576, "environment": {"FAKE_VLLM_FAULT": "oom_at_boot"}})
    proc = rebalance(failing, twin_inventory, tmp_path / "second", check=False)
    assert proc.returncode != 0
    assert report_of(tmp_path / "second")["hosts"]["twin1"]["status"] == "rolled_back"
    assert not _lock_held()
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]


def _alpha_booting(old_id: str) -> bool:
    """The first run's new alpha container runs and is still booting (its delay)."""
    cid, running, healthy = state("twin1")["containers"].get("vllm-alpha", (old_id, "", False))
    return cid != old_id and running == "running" and not healthy


def test_a_host_lost_mid_run_stops_the_rollout_and_the_next_run_recovers(twin_inventory, tmp_path):
    before = {host: state(host) for host in ("twin1", "twin2")}
    old_alpha = before["twin1"]["containers"]["vllm-alpha"][0]
    veth = fleet.find_host("twin1").veth
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 28672,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": "30"}})
    first = rebalance(hosts, twin_inventory, tmp_path / "first", background=True)
    try:
        _wait_for(lambda: _alpha_booting(old_alpha), what="alpha booting in its wave")
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)
        out = first.communicate(timeout=300)[0]
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode != 0
    assert "UNREACHABLE!" in out, out[-3000:]
    assert state("twin2") == before["twin2"], "the rollout stopped before the next host"
    assert _lock_held(), "the lost host keeps its lock and journal"

    again = fleet_with(tmp_path / "again", alpha={"max_model_len": 28672})
    _wait_for(lambda: run_ansible(["ansible", "twin1", "-i", str(again), "-i", twin_inventory,
                                   "-m", "ping"]).returncode == 0, what="twin1 back on the network")
    rebalance(again, twin_inventory, tmp_path / "second")
    report = report_of(tmp_path / "second")
    assert report["hosts"]["twin1"]["status"] == "applied"
    files = state("twin1")["files"]
    alpha_backups = [b for b in report["hosts"]["twin1"]["backups"] if "/alpha/.env.bak-" in b]
    assert alpha_backups, "the recovering run reports the first run's backup"
    assert files["alpha/" + os.path.basename(alpha_backups[0])] == before["twin1"]["files"]["alpha/.env"], \
        "the backup holds the file from before the first run"


@pytest.fixture
def gateway(twin_inventory, tmp_path):
    """A real LiteLLM in front of twin1's seats, as the fleet's gateway would be."""
    from support.litellm import LiteLLMProxy, litellm_bin, stop  # the litellm venv is only built for this

    hosts = {name: host for group in yaml.safe_load(Path(twin_inventory).read_text())["all"]["children"].values()
             for name, host in (group.get("hosts") or {}).items()}
    address = hosts["twin1"]["ansible_host"]
    key = "sk-" + os.urandom(16).hex()
    config = tmp_path / "litellm.yaml"
    # alpha's route is a thinking alias (seed 002): the gateway turns thinking on for it
    thinking = {"extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}
    config.write_text(yaml.safe_dump({
        "model_list": [{"model_name": name, "litellm_params": dict({
            "model": "hosted_vllm/" + name, "api_base": "http://%s:%d/v1" % (address, port)}, **extra)}
            for name, port, extra in (("alpha", 8101, thinking), ("gamma", 8103, {}))],
        "litellm_settings": {"num_retries": 0, "request_timeout": 30},
        "general_settings": {"master_key": key}}))
    proxy = LiteLLMProxy(litellm_bin(), config, key)
    yield proxy
    stop(proxy.proc)


def _gateway_args(gateway, routes):
    return ["-e", json.dumps({"seat_rebalance_gateway_url": gateway.url,
                              "seat_rebalance_gateway_api_key": gateway.master_key,
                              "seat_rebalance_gateway_routes": routes})]


@pytest.mark.litellm
def test_the_rebalance_ends_with_the_gateway_contract_and_rolls_back_a_broken_one(
        twin_inventory, gateway, tmp_path):
    routes = [{"model": "alpha", "checks": ["chat", "stream", "reasoning"]},
              {"model": "gamma", "checks": ["chat"]}]
    # seed 002's set: a reasoning parser, and thinking off by default so prose stays in content
    contract = {"reasoning_parser": "qwen3", "default_chat_template_kwargs": {"enable_thinking": False}}
    hosts = fleet_with(tmp_path, alpha=dict(contract, max_model_len=8192), gamma=contract)
    proc = rebalance(hosts, twin_inventory, tmp_path / "ok", *_gateway_args(gateway, routes))
    assert gateway.master_key not in proc.stdout + proc.stderr, "the gateway key is never printed"
    section = report_of(tmp_path / "ok")["hosts"]["twin1"]
    checked = {(g["seat"], g["gate"]): g for g in section["gates"] if g["gate"].startswith("gateway_")}
    assert set(checked) == {("route alpha", "gateway_chat"), ("route alpha", "gateway_stream"),
                            ("route alpha", "gateway_reasoning"), ("route gamma", "gateway_chat")}
    assert all(g["ok"] for g in checked.values()) and section["status"] == "applied"
    assert checked[("route alpha", "gateway_reasoning")]["measured"]["reasoning_key"] == "reasoning_content", \
        "through LiteLLM the reasoning arrives as reasoning_content (seed 002's key-name trap)"

    # alpha loses its reasoning parser: its thinking lands in content, and the route says it
    # must be split. The contract fails through the gateway and the host is rolled back.
    before = {host: state(host) for host in ("twin1", "twin2")}
    broken = [{"model": "alpha", "checks": ["chat", "reasoning"]}]
    hosts = fleet_with(tmp_path / "broken", alpha={"max_model_len": 8192, "reasoning_parser": None},
                       gamma=contract)
    proc = rebalance(hosts, twin_inventory, tmp_path / "broken-report",
                     *_gateway_args(gateway, broken), check=False)
    assert proc.returncode != 0
    assert gateway.master_key not in proc.stdout + proc.stderr
    report = report_of(tmp_path / "broken-report")
    assert ("route alpha", "gateway_reasoning") in gates_failed(report)
    assert report["hosts"]["twin1"]["status"] == "rolled_back"
    assert_rolled_back(before["twin1"])
    assert state("twin2") == before["twin2"]
