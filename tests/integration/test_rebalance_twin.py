"""A rollout's life on the fleet twin: two hosts over real SSH, each with its own dockerd and
simulated GPUs, vLLM-like seats under compose, real `ansible-playbook playbooks/rebalance.yml` runs.

The first test deploys the fleet; every later test starts from the state the one before left:
a dry run, a second run, a change, a concurrent run, a run killed half way and a host lost
mid-run (each ends with the next run recovering), then secrets written over a world-readable
.env. The gates' failures and rollbacks are in test_rebalance_twin_gates.py, on a twin of their
own.

Then windows cut short and run again with the same inventory (issue 34.3). ansible-playbook is
SIGKILLed (its whole process group) while a changed seat boots. Its worker left that group
(Ansible's workers call setsid) and keeps running the boot on the host, so the next run waits for
it, or refuses while it runs, and never runs beside it. Once it is gone, the next run takes the
lock over and gates the seat the dead run never saw gated: the report says so and the host is
`applied` (or put back, when the operator asks for that), never `unchanged`. When the worker is
killed too, the module it ran keeps running on the host (the boot goes on over a closed SSH
channel); the next run finds it there by the run id it carries, and waits for it or refuses
naming it, as for the worker.

Last, a seat on an older vLLM image is planned and gated with that release's KV arithmetic: the
stand-in image tagged v0.19.1 plays 0.19 (its capacity line counts blocks per group, and it
prints its own version), so the plan's tokens must be 0.19's for the boot-log gates to pass. A
build whose tag says 0.33 but which runs 0.19 is caught by the version gate at boot and rolled
back."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.lock import host_processes, run_processes
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import evaluate_kv_budget
from conftest import run_ansible
from support.rollout import (FLEET, HOSTS, ONLY_TWIN1, assert_rolled_back, fleet, fleet_with, gates_failed,
                             rebalance, report_of, state, states, twin, twin_pair, wait_for, wait_healthy)
from support.wait import DOCKER_STATE_POLL_S

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.slow]

TWIN1_SEATS = {"alpha", "beta", "gamma", "asr"}
TWIN2_SEATS = {"delta", "epsilon"}
OLDER = "vllm/vllm-openai:v0.19.1"
MISTAGGED = "llmfleet/vllm-openai:v0.33.0"  # a local build: says 0.33, runs 0.19
# Not a multiple of the block size: 0.19's tokens (blocks x 16) and 0.33's (concurrency x length)
# then differ.
LENGTH = 30001


@pytest.fixture(scope="module")
def twin_inventory(tmp_path_factory):
    """The fleet's twin, whose hosts also hold the stand-in as an older release and as a build
    that runs another release than its tag says."""
    spec = json.loads((FLEET / "spec.json").read_text())
    spec["images"].update({OLDER: "vllm", MISTAGGED: "vllm"})
    spec["image_env"] = {MISTAGGED: {"FAKE_VLLM_VERSION": "0.19.1"}}
    path = tmp_path_factory.mktemp("twin") / "spec.json"
    path.write_text(json.dumps(spec))
    with twin_pair(path) as inventory:
        yield inventory


def test_first_run_deploys_every_seat_and_passes_every_gate(twin_inventory, tmp_path):
    rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path)
    report = report_of(tmp_path)
    for host, seats in (("twin1", TWIN1_SEATS), ("twin2", TWIN2_SEATS)):
        section = report["hosts"][host]
        assert section["status"] == "applied"
        for stamp in ("started", "finished"):  # UTC, and it says so
            assert re.match(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z", section[stamp]), section[stamp]
        assert section["gates"] and all(g["ok"] for g in section["gates"])
        gated = {g["seat"] for g in section["gates"] if g["gate"] == "health"}
        assert gated == seats, "every seat passed the health gate"
        wait_healthy(host)
    tokens = {g["seat"]: g for g in report["hosts"]["twin1"]["gates"] if g["gate"] == "kv_cache_tokens"}
    plan = {s["name"]: s for s in report["hosts"]["twin1"]["plan"]["seats"]}
    assert tokens["beta"]["measured"] == plan["beta"]["kv_cache_tokens"] == 65536, \
        "the seat's boot log prints the tokens the plan computed for 8 GiB"
    gpus = fleet.find_host("twin1").gpu_state()["gpus"]
    held = sum(p["used_mib"] for gpu in gpus for p in gpu["processes"])
    assert held >= sum(s["footprint_mib"] for s in plan.values()) - 4096
    assert (tmp_path / "report.md").read_text().count("**applied**") == 2
    svg = (tmp_path / "twin1.svg").read_text()
    assert svg.startswith("<svg") and "planned at plateau, and measured after the window" in svg
    measured = [gpu["holders_mib"]["beta"] for gpu in report["hosts"]["twin1"]["after"] if "beta" in gpu["holders_mib"]]
    assert measured and all("<title>beta: {:,} MiB</title>".format(mib) in svg for mib in measured), \
        "the bar measured after the window shows what beta held"
    # one writer per file: the plan's own files sit beside the report's, each as its writer left it
    planned = (tmp_path / "twin1-plan.svg").read_text()
    assert planned.startswith("<svg") and "measured" not in planned, "seat_plan's SVG, not the report's"
    assert json.loads((tmp_path / "twin1-plan.json").read_text()) == report["hosts"]["twin1"]["plan"]


def test_a_dry_run_shows_the_diff_and_touches_nothing(twin_inventory, tmp_path):
    before = states()
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 16384})
    proc = rebalance(hosts, twin_inventory, tmp_path / "report", "--check", "--diff")
    assert "-SEAT_MAX_MODEL_LEN='32768'" in proc.stdout
    assert "+SEAT_MAX_MODEL_LEN='16384'" in proc.stdout
    assert "boot order (one seat at a time per GPU, the GPUs side by side): alpha" in proc.stdout
    assert report_of(tmp_path / "report")["hosts"]["twin1"]["status"] == "planned"
    for host in ("twin1", "twin2"):
        assert state(host) == before[host], "a dry run changed %s" % host


def test_a_second_run_changes_nothing_and_restarts_nothing(twin_inventory, tmp_path):
    before = states()
    proc = rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path)
    # the report and plan files on the controller are the run's record: changed=0 everywhere
    assert re.findall(r"^(twin\d)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M) == [
        ("twin1", "0"), ("twin2", "0")], proc.stdout[-3000:]
    assert all(s["status"] == "unchanged" for s in report_of(tmp_path)["hosts"].values())
    for host in ("twin1", "twin2"):
        assert state(host) == before[host]
    # nothing to undo, so nothing journaled: each host's lock is taken and released, no more; the
    # journal and the writes are skipped whole, and no journal of the window's changes is reached
    journals = re.findall(r"^TASK \[llmfleet\.seats\.seat_rebalance : (Journal [^\]]*)\][^\n]*\n(\w+): \[(twin\d)\]",
                          proc.stdout, re.M)
    assert sorted(journals) == [("Journal what a rollback must restore, and write the files that change", "skipping", host)
                                for host in ("twin1", "twin2")], journals


def test_a_change_recreates_only_that_seat_and_keeps_a_dated_backup(twin_inventory, tmp_path):
    """A new context and new secrets for alpha, with --diff at -vvv: only alpha is recreated, its
    old .env kept as a dated backup, and its secrets reach its container and nothing else."""
    token, key = "hf_twinTOKEN0123456789", "sk-twin-KEY-9876543210"
    before = state("twin1")
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 16384, "secret_environment": {"HF_TOKEN": token},
                                        "environment": {"UPSTREAM_API_KEY": key, "LOG_LEVEL": "info"}})
    proc = rebalance(hosts, twin_inventory, tmp_path / "report", "-e", "seat_rebalance_settle_seconds=2",
                     "--diff", "-vvv")
    after = state("twin1")
    changed = {n for n in before["containers"] if after["containers"][n][0] != before["containers"][n][0]}
    assert changed == {"vllm-alpha"}
    backups = report_of(tmp_path / "report")["hosts"]["twin1"]["backups"]
    assert [os.path.dirname(b) for b in backups] == ["/srv/compose/alpha"] * 2, backups
    for backup in backups:  # .env (the numbers) and compose.yaml (the secrets' references)
        name = os.path.basename(backup).split(".bak-")[0]
        assert after["files"]["alpha/" + os.path.basename(backup)] == before["files"]["alpha/" + name]
    assert b"SEAT_MAX_MODEL_LEN='16384'" in after["files"]["alpha/.env"]
    plateau = [g for g in report_of(tmp_path / "report")["hosts"]["twin1"]["gates"]
               if g["gate"] == "free_mib_plateau"]
    assert [g["seat"] for g in plateau] == ["GPU 0", "GPU 1"] and all(g["ok"] for g in plateau), \
        "after the settle wait every GPU is re-read against the plan's spare at plateau"

    shown = proc.stdout + proc.stderr
    assert token not in shown and key not in shown, "a secret reached the run's output at -vvv"
    assert "SEAT_SECRET_HF_TOKEN='<secret changed>'" in shown, "the diff names the secret, not its value"
    for path in (tmp_path / "report").rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert token not in text and key not in text, "a secret is in %s" % path.name
    plan = {s["name"]: s for s in report_of(tmp_path / "report")["hosts"]["twin1"]["plan"]["seats"]}
    assert plan["alpha"]["launch"]["secret_environment"] == ["HF_TOKEN", "UPSTREAM_API_KEY"]
    assert plan["alpha"]["launch"]["environment"] == {"LOG_LEVEL": "info"}
    assert token.encode() not in after["files"]["alpha/compose.yaml"]
    assert key.encode() not in after["files"]["alpha/compose.yaml"]
    assert b"HF_TOKEN: \"${SEAT_SECRET_HF_TOKEN:?}\"" in after["files"]["alpha/compose.yaml"]
    assert ("SEAT_SECRET_HF_TOKEN='%s'" % token).encode() in after["files"]["alpha/.env"]
    assert Path(fleet.find_host("twin1").path("/srv/compose/alpha/.env")).stat().st_mode & 0o777 == 0o600
    env = twin("exec", "twin1", "--", "docker", "inspect", "--format", "{{json .Config.Env}}",
               "vllm-alpha").stdout
    assert "HF_TOKEN=%s" % token in env and "UPSTREAM_API_KEY=%s" % key in env and "LOG_LEVEL=info" in env


def test_a_seat_the_inventory_dropped_is_not_stopped_unless_retired(twin_inventory, tmp_path):
    wait_healthy("twin1")  # alpha, recreated by the test before, has docker's verdict to come
    before = states()
    hosts = fleet_with(tmp_path)
    host_vars = hosts.parent / "host_vars" / "twin1.yml"
    dropped = yaml.safe_load(host_vars.read_text())
    dropped["llmfleet_seats"] = [seat for seat in dropped["llmfleet_seats"] if seat["name"] == "asr"]
    host_vars.write_text(yaml.safe_dump(dropped))
    proc = rebalance(hosts, twin_inventory, tmp_path / "refused", "--check", "-e", "target=twin1", check=False)
    assert proc.returncode != 0
    assert ("host twin1: alpha, beta, gamma run here but the inventory no longer lists them; a seat "
            "is only stopped when llmfleet_retire names it") in " ".join(proc.stdout.split())
    assert states() == before, "a refused run changed a host"


def _lock_held() -> bool:
    return Path(fleet.find_host("twin1").path("/srv/llmfleet/rebalance.lock")).exists()


def _alpha_recreated(old_id: str) -> bool:
    return state("twin1")["containers"].get("vllm-alpha", (old_id,))[0] != old_id


def test_a_concurrent_run_is_refused_before_it_touches_anything(twin_inventory, tmp_path):
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 20480,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": "12"}})
    first = rebalance(hosts, twin_inventory, tmp_path / "first", background=True)
    try:
        wait_for(_lock_held, what="the first run's lock")
        second = rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path / "second", check=False)
        assert second.returncode != 0
        assert "another rebalance holds /srv/llmfleet/rebalance.lock" in second.stdout
        assert "re-run with -e seat_rebalance_break_lock=true" in second.stdout, \
            "the refusal names the variable the role reads"
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
    for host in HOSTS:  # docker's verdict on seats deployed just before (this test run alone), to come
        wait_healthy(host)
    before = states()
    old_alpha = before["twin1"]["containers"]["vllm-alpha"][0]
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 24576,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": "30"}})
    first = rebalance(hosts, twin_inventory, tmp_path / "first", background=True)
    try:
        wait_for(lambda: _alpha_recreated(old_alpha), what="alpha recreated by the first run",
                 interval=DOCKER_STATE_POLL_S)
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
    before = states()
    old_alpha = before["twin1"]["containers"]["vllm-alpha"][0]
    veth = fleet.find_host("twin1").veth
    hosts = fleet_with(tmp_path, alpha={"max_model_len": 28672,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": "30"}})
    first = rebalance(hosts, twin_inventory, tmp_path / "first", background=True)
    try:
        wait_for(lambda: _alpha_booting(old_alpha), what="alpha booting in its wave", interval=DOCKER_STATE_POLL_S)
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
    wait_for(lambda: run_ansible(["ansible", "twin1", "-i", str(again), "-i", twin_inventory,
                                  "-m", "ping"]).returncode == 0, what="twin1 back on the network", interval=1)
    rebalance(again, twin_inventory, tmp_path / "second")
    report = report_of(tmp_path / "second")
    assert report["hosts"]["twin1"]["status"] == "applied"
    files = state("twin1")["files"]
    alpha_backups = [b for b in report["hosts"]["twin1"]["backups"] if "/alpha/.env.bak-" in b]
    assert alpha_backups, "the recovering run reports the first run's backup"
    assert files["alpha/" + os.path.basename(alpha_backups[0])] == before["twin1"]["files"]["alpha/.env"], \
        "the backup holds the file from before the first run"


def _on_twin1(path: str) -> Path:
    return Path(fleet.find_host("twin1").path(path))


def test_a_secret_over_a_world_readable_env_leaves_it_and_its_backup_private(twin_inventory, tmp_path):
    """A window that writes a secret over a world-readable .env leaves the file and its backup
    readable by their owner alone, and a seat's api_key reaches vLLM from that file (never its
    command line) while the gates ask its /v1 endpoints with it (the vLLM stand-in refuses /v1
    without the key it was given)."""
    token, key = "hf_modeTOKEN0123456789", "sk-seat-KEY-0123456789abcdef"
    # the secrets are alpha's, on twin1: twin2's window would be its own seats' alone
    rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path / "baseline", *ONLY_TWIN1)
    env = _on_twin1("/srv/compose/alpha/.env")
    env.chmod(0o644)  # as a hand edit or another tool left it
    before = env.read_bytes()

    hosts = fleet_with(tmp_path, alpha={"secret_environment": {"HF_TOKEN": token}, "api_key": key})
    proc = rebalance(hosts, twin_inventory, tmp_path / "report", "--diff", "-vvv", *ONLY_TWIN1)
    section = report_of(tmp_path / "report")["hosts"]["twin1"]
    assert section["status"] == "applied", section["status"]

    assert env.stat().st_mode & 0o777 == 0o600, "a file holding secrets is private on every write"
    backups = [b for b in section["backups"] if os.path.basename(b).startswith(".env.bak-")]
    assert len(backups) == 1, section["backups"]
    backup = _on_twin1(backups[0])
    assert backup.read_bytes() == before and backup.stat().st_mode & 0o777 == 0o600, "so is its backup"
    text = env.read_text()
    assert "SEAT_SECRET_HF_TOKEN='%s'" % token in text and "SEAT_SECRET_VLLM_API_KEY='%s'" % key in text

    # vLLM reads the key from its environment; the command line, the outputs and the plan never hold it
    inspect = twin("exec", "twin1", "--", "docker", "inspect", "--format", "{{json .Config.Env}} {{json .Args}}",
                   "vllm-alpha").stdout
    container_env, args = inspect.split("] [", 1)
    assert "VLLM_API_KEY=%s" % key in container_env and key not in args
    shown = proc.stdout + proc.stderr
    assert token not in shown and key not in shown, "a secret reached the run's output at -vvv"
    for path in (tmp_path / "report").rglob("*"):
        if path.is_file():
            assert key not in path.read_text() and token not in path.read_text(), "a secret is in %s" % path.name
    plan = {s["name"]: s for s in section["plan"]["seats"]}
    assert plan["alpha"]["launch"]["secret_environment"] == ["HF_TOKEN", "VLLM_API_KEY"]

    # the stand-in answers /v1/models only with the key: the gate passed because it was sent
    served = [g for g in section["gates"] if g["seat"] == "alpha" and g["gate"] == "served_models"]
    assert served and all(g["ok"] for g in served), served


def _lock() -> dict | None:
    path = Path(fleet.find_host("twin1").path("/srv/llmfleet/rebalance.lock"))
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):  # free, or being replaced
        return None


def _alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_while_alpha_boots(inventory: str, tmp_path: Path, max_model_len: int, boot_delay_s: int):
    """Start a window that changes alpha, SIGKILL ansible-playbook's process group while alpha
    boots; (the dead run's lock record, the state before, its processes left)."""
    before = state("twin1")
    hosts = fleet_with(tmp_path, alpha={"max_model_len": max_model_len,
                                        "environment": {"FAKE_VLLM_BOOT_DELAY_S": str(boot_delay_s)}})
    first = rebalance(hosts, inventory, tmp_path / "first", *ONLY_TWIN1, background=True)
    try:
        wait_for(lambda: _alpha_booting(before["containers"]["vllm-alpha"][0]), what="alpha booting",
                 interval=DOCKER_STATE_POLL_S)
        held = _lock()
        assert held and held["controller"]["pid"] == first.pid
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    left = run_processes(held["controller"], os.getpid())
    return held, before, hosts, left


def _next_run_watching(pids: list, held: dict, hosts: Path, inventory: str, report: Path) -> tuple:
    """Run the next window on twin1 with the default wait while watching the dead run's
    ``pids`` and the lock: (when the last of them was gone or None, when the lock changed hands)."""
    seen = {}

    def watch():
        while "lock" not in seen:
            if "gone" not in seen and not any(_alive(pid) for pid in pids):
                seen["gone"] = time.monotonic()
            record = _lock()
            if record and record["run_id"] != held["run_id"]:
                seen["lock"] = time.monotonic()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rebalance(hosts, inventory, report, *ONLY_TWIN1)
    seen.setdefault("lock", time.monotonic())
    watcher.join(timeout=10)
    return seen.get("gone"), seen["lock"]


def test_a_worker_that_outlives_its_run_is_waited_for_and_the_seat_is_gated(twin_inventory, tmp_path):
    held, _before, hosts, left = _kill_while_alpha_boots(twin_inventory, tmp_path, 24576, 25)
    workers = [p["pid"] for p in left if p["role"] == "worker"]
    assert workers and all(_alive(pid) for pid in workers), \
        "killing ansible-playbook's process group leaves the worker that runs the boot"

    refused = rebalance(hosts, twin_inventory, tmp_path / "refused", *ONLY_TWIN1,
                        "-e", "seat_rebalance_takeover_wait=1", check=False)
    assert refused.returncode != 0
    assert ("run %s holds /srv/llmfleet/rebalance.lock on twin1; its ansible-playbook is gone but"
            % held["run_id"]) in refused.stdout, refused.stdout[-3000:]
    assert "pid %d" % workers[0] in refused.stdout
    assert _lock()["run_id"] == held["run_id"], "the refused run took nothing"
    assert not (tmp_path / "refused" / "report.json").exists()

    # The next run with the default wait: it takes the lock only once the worker has gone.
    gone, locked = _next_run_watching(workers, held, hosts, twin_inventory, tmp_path / "second")
    assert gone is not None and gone <= locked, "the next run took the lock while a worker of the dead run still ran"

    section = report_of(tmp_path / "second")["hosts"]["twin1"]
    assert section["status"] == "applied", section["status"]
    assert section["interrupted"] == {"run_id": held["run_id"], "seats": ["alpha"]}
    assert "took over the lock of run %s, which was cut short; finishing an interrupted window (run %s): alpha" \
        % (held["run_id"], held["run_id"]) in section["actions"]
    gated = {g["gate"] for g in section["gates"] if g["seat"] == "alpha"}
    assert {"health", "kv_cache_tokens"} <= gated and all(g["ok"] for g in section["gates"]), gated
    assert ("Finishing an interrupted window (run %s): alpha" % held["run_id"]
            in (tmp_path / "second" / "report.md").read_text())
    assert _lock() is None, "the finished window released the lock"

    again = rebalance(hosts, twin_inventory, tmp_path / "third", *ONLY_TWIN1)
    assert report_of(tmp_path / "third")["hosts"]["twin1"]["status"] == "unchanged", again.stdout[-2000:]


def test_an_interrupted_window_is_rolled_back_when_the_operator_asks(twin_inventory, tmp_path):
    held, before, hosts, left = _kill_while_alpha_boots(twin_inventory, tmp_path, 20480, 5)
    wait_for(lambda: not run_processes(held["controller"], os.getpid()), timeout=180,
             what="the dead run's worker to finish the boot it had under way")
    assert left, "the dead run had a worker to wait for"

    proc = rebalance(hosts, twin_inventory, tmp_path / "second", *ONLY_TWIN1,
                     "-e", "seat_rebalance_interrupted_window=roll_back", check=False)
    assert proc.returncode != 0, "a window rolled back did not apply"
    section = report_of(tmp_path / "second")["hosts"]["twin1"]
    assert section["status"] == "rolled_back", section["error"]
    assert section["interrupted"]["seats"] == ["alpha"]
    assert "seat_rebalance_interrupted_window=roll_back" in section["error"]
    assert_rolled_back(before)
    assert _lock() is None


def test_a_module_that_outlives_its_killed_worker_is_waited_for_on_the_host(twin_inventory, tmp_path):
    held, _before, hosts, left = _kill_while_alpha_boots(twin_inventory, tmp_path, 28672, 30)
    workers = [p["pid"] for p in left if p["role"] == "worker"]
    assert workers, "the dead run had a worker running the boot"
    for worker in workers:  # the worker called setsid: its group is it and its ssh client
        os.killpg(worker, signal.SIGKILL)
    wait_for(lambda: not run_processes(held["controller"], os.getpid()), what="the killed workers to go")

    # The twin's hosts run on this machine: the test sees the host's processes as the host does.
    on_host = host_processes(held["run_id"], os.getpid())
    modules = [p["pid"] for p in on_host if p["name"].startswith("python")]
    assert modules and all(_alive(pid) for pid in modules), \
        "the boot the killed worker started goes on on the host: %s" % on_host

    refused = rebalance(hosts, twin_inventory, tmp_path / "refused", *ONLY_TWIN1,
                        "-e", "seat_rebalance_takeover_wait=1", check=False)
    assert refused.returncode != 0
    refusal = [line for line in refused.stdout.splitlines()
               if "of its processes still run on twin1 after" in line]
    assert refusal, refused.stdout[-3000:]
    assert ("run %s holds /srv/llmfleet/rebalance.lock on twin1; " % held["run_id"]) in refusal[0]
    assert "pid %d (python" % modules[0] in refusal[0], refusal[0]
    assert "Traceback" not in refused.stdout + refused.stderr
    assert _lock()["run_id"] == held["run_id"], "the refused run took nothing"
    assert not (tmp_path / "refused" / "report.json").exists()

    # With the default wait the next run takes the lock only once the module on the host is gone.
    gone, locked = _next_run_watching(modules, held, hosts, twin_inventory, tmp_path / "second")
    assert gone is not None and gone <= locked, \
        "the next run took the lock while a module of the dead run still ran on the host"

    section = report_of(tmp_path / "second")["hosts"]["twin1"]
    assert section["status"] == "applied", section["status"]
    assert section["interrupted"] == {"run_id": held["run_id"], "seats": ["alpha"]}
    assert all(g["ok"] for g in section["gates"]), section["gates"]
    assert _lock() is None, "the finished window released the lock"


def test_a_seat_on_an_older_image_is_planned_and_gated_with_its_releases_numbers(twin_inventory, tmp_path):
    hosts = fleet_with(tmp_path, alpha={"image": OLDER, "max_model_len": LENGTH})
    proc = rebalance(hosts, twin_inventory, tmp_path / "first")
    assert re.search(r"\| alpha \| compose \| `%s` \| `[^|]+:8101`[^|]* \| vLLM 0\.19\.1 \(image tag\) \|"
                     % re.escape(OLDER), " ".join(proc.stdout.split())), "the plan says whose arithmetic"
    section = report_of(tmp_path / "first")["hosts"]["twin1"]
    assert section["status"] == "applied" and all(g["ok"] for g in section["gates"]), section["gates"]
    alpha = {seat["name"]: seat for seat in section["plan"]["seats"]}["alpha"]
    assert alpha["vllm_release"] == {"version": "0.19.1", "release": "0.19.1", "nearest": False, "from": "image tag"}
    assert alpha["kv_cache_tokens"] == alpha["num_blocks"] * alpha["block_size"], "0.19 counts blocks per group"
    config = json.loads((FLEET / "models" / "qwen3-8b" / "config.json").read_text())
    latest = evaluate_kv_budget(config, LENGTH, alpha["kv_cache_memory_bytes"])
    assert latest["kv_cache_tokens"] != alpha["kv_cache_tokens"], "0.33's arithmetic would have gated it wrong"
    gates = {g["gate"]: g for g in section["gates"] if g["seat"] == "alpha"}
    assert gates["vllm_version"]["measured"] == "0.19.1"
    assert gates["kv_cache_tokens"]["measured"] == alpha["kv_cache_tokens"], "the log printed 0.19's count"


def test_a_build_running_another_release_than_its_tag_fails_the_version_gate_and_rolls_back(twin_inventory,
                                                                                            tmp_path):
    wait_healthy("twin1")
    before = state("twin1")
    hosts = fleet_with(tmp_path, alpha={"image": OLDER, "max_model_len": LENGTH},
                       beta={"image": MISTAGGED, "max_model_len": LENGTH})
    proc = rebalance(hosts, twin_inventory, tmp_path / "report", check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path / "report")
    assert report["hosts"]["twin1"]["status"] == "rolled_back", report["hosts"]["twin1"].get("error")
    assert {("beta", "vllm_version"), ("beta", "kv_cache_tokens")} <= set(gates_failed(report)), gates_failed(report)
    version = next(g for g in report["hosts"]["twin1"]["gates"] if (g["seat"], g["gate"]) == ("beta", "vllm_version"))
    assert version["detail"].startswith("the boot log says vLLM 0.19.1; the plan used 0.33.0's KV arithmetic "
                                        "(its image tag says 0.33.0)"), version["detail"]
    assert_rolled_back(before)
