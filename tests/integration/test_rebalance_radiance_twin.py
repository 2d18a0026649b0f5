"""A radiance seat beside a vLLM seat on one twin host, over real SSH and a real dockerd: the
plan says what each knob buys, the dry run touches nothing, a resize of the host pool is gated by
the boot ledger (vram_kv byte for byte on both cards of different totals, the pinned-RAM ledger)
and probed at depth,
the unsafe resizes are refused (the pool and the placement in one window; a ledger above
TTM_MIN_MIB; one the host's RAM cannot hold), a knob that loses to another claim rolls back to
byte-identical files, and a pin past the host's RAM takes the host's seats down."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, VENV_BIN, ansible_env
from support.rollout import live, twin_pair
from support.wait import DOCKER_HEALTH_POLL_S, DOCKER_STATE_POLL_S, wait_for

from twinlib import fleet as twin_fleet

# Its windows mostly end in a refusal or a rollback: it runs in the gates lane, beside the
# rollout lane rather than after it.
pytestmark = [pytest.mark.twin, pytest.mark.gates, pytest.mark.slow]

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-radiance"
PLAYBOOK = REPO_ROOT / "playbooks" / "rebalance.yml"
IMAGE = "llmfleet/radiance:1.8.1"


@pytest.fixture(scope="module")
def twin():
    with twin_pair(FLEET / "spec.json", FLEET) as inventory:
        yield inventory


def fleet_with(tmp_path: Path, **archon) -> Path:
    copy = tmp_path / "fleet"
    shutil.copytree(FLEET, copy)
    path = copy / "host_vars" / "twin1.yml"
    data = yaml.safe_load(path.read_text())
    for seat in data["llmfleet_seats"]:
        if seat["name"] == "archon":
            seat.update(archon)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy / "hosts.yml"


def rebalance(hosts: Path, inventory: str, report: Path, *extra: str):
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(hosts), "-i", inventory, str(PLAYBOOK),
                           "-e", "llmfleet_report_dir=%s" % report] + list(extra), cwd=REPO_ROOT,
                          env=ansible_env(), capture_output=True, text=True, timeout=900, check=False)


def host():
    return twin_fleet.find_host("twin1")


def state() -> dict:
    root = Path(host().path("/srv/compose"))
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/*"))
             if p.is_file() and not p.name.startswith(".llmfleet-")}
    out = host().docker(["ps", "-a", "--format", "{{.Names}} {{.ID}} {{.State}} {{.Status}}"]).stdout
    containers = {}
    for line in out.splitlines():
        name, cid, running, status = line.split(" ", 3)
        containers[name] = (cid, running, "(healthy)" in status)
    return {"files": files, "containers": containers}


def healthy() -> None:
    wait_for(lambda: all(running == "running" and ok for _cid, running, ok in state()["containers"].values()),
             what="every container on twin1 running and healthy", interval=DOCKER_HEALTH_POLL_S)


def report(path: Path) -> dict:
    return json.loads((path / "report.json").read_text())["hosts"]["twin1"]


def gates(section: dict, seat: str = "archon") -> dict:
    return {g["gate"]: g for g in section["gates"] if g["seat"] == seat}


def pinned_mib() -> int:
    return host().gpu_state()["host"]["pinned_mib"]


def test_the_dry_run_shows_the_funding_and_what_each_knob_buys_and_touches_nothing(twin, tmp_path):
    before = state()
    proc = rebalance(FLEET / "hosts.yml", twin, tmp_path / "report", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = proc.stdout
    # the seat table: runtime, image, its exposure (published where), whose arithmetic
    assert re.search(r"\| archon \| compose \| `%s` \| `[^|]+:\d+`[^|]* \| radiance 1\.8\.1 funding formula \|"
                     % re.escape(IMAGE), " ".join(out.split())), out[-3000:]
    assert "capacity 24,517 MiB, elastic 18,373 MiB, expert floor 11,008 MiB" in out, "the smaller card binds"
    assert "HOST_POOL_MIB +1024: +29120 tokens, demand +0 tokens, pinned +2048.00 MiB" in out
    assert "MAX_SEQS +1: +0 tokens, demand +65536 tokens" in out and "the tokens stay put" in out
    assert "to fund 250,000 tokens: HOST_POOL_MIB 30,720: 209,488 tokens -> HOST_POOL_MIB 31,744" in out
    assert "+HOST_POOL_MIB='30720'" in out and "+TTM_MIN_MIB='68000'" in out, "the env file's diff"
    assert state() == before


def test_it_boots_beside_the_vllm_seat_and_its_ledger_is_the_plan(twin, tmp_path):
    proc = rebalance(FLEET / "hosts.yml", twin, tmp_path / "report")
    assert proc.returncode == 0, proc.stdout[-4000:]
    section = report(tmp_path / "report")
    assert section["status"] == "applied" and all(g["ok"] for g in section["gates"]), \
        [g for g in section["gates"] if not g["ok"]]
    archon = gates(section)
    assert archon["vram_kv"]["measured"] == {"[0]": 7722565632, "[1]": 7722565632}
    assert archon["kv_tokens"]["measured"] == {"tokens": 209488, "sessions": 3}
    assert archon["pin_ledger"]["measured"] == 67455.84
    assert pinned_mib() == 67456, "the stand-in holds its ledger of the host's RAM"
    cards = {gpu["index"]: gpu for gpu in host().gpu_state()["gpus"]}
    assert sum(p["used_mib"] for p in cards[1]["processes"]) == 26528 == sum(
        p["used_mib"] for p in cards[2]["processes"]), "the smallest card's budget on both"


def test_a_host_pool_resize_funds_the_target_and_restarts_only_that_seat(twin, tmp_path):
    healthy()
    before = state()
    hosts = fleet_with(tmp_path, host_pool_mib=32768, ttm_min_mib=72000, ttm_target_mib=74000)
    proc = rebalance(hosts, twin, tmp_path / "report", "-e", "seat_rebalance_runtime_probe=true")
    assert proc.returncode == 0, proc.stdout[-4000:]
    section = report(tmp_path / "report")
    assert section["status"] == "applied", section.get("error")
    probe = gates(section)
    assert probe["runtime_probe"]["ok"] and probe["probe_refusal"]["measured"] == {"status": 400}, \
        "the engine answers within the depth and refuses past it"
    archon = {seat["name"]: seat for seat in section["plan"]["seats"]}["archon"]
    assert (archon["kv_tokens"], archon["binding"], archon["funded_fraction"]) == (262144, "demand", 1.0)
    assert gates(section)["kv_tokens"]["measured"]["tokens"] == 262144
    after = state()
    assert after["containers"]["vllm-alpha"][0] == before["containers"]["vllm-alpha"][0], "alpha stays up"
    assert after["containers"]["radiance-archon"][0] != before["containers"]["radiance-archon"][0]
    assert pinned_mib() == 71552


def test_the_pool_and_the_placement_in_one_window_are_refused_before_any_host_is_touched(twin, tmp_path):
    healthy()
    before = state()
    hosts = fleet_with(tmp_path, host_pool_mib=33792, placement="resident", ttm_min_mib=74000, ttm_target_mib=76000)
    proc = rebalance(hosts, twin, tmp_path / "report")
    assert proc.returncode != 0
    assert "changes the KV pool (HOST_POOL_MIB 32768 -> 33792) and the expert placement (auto -> resident) " \
           "at once" in proc.stdout, proc.stdout[-3000:]
    assert state() == before


def test_a_ledger_above_ttm_min_is_refused_before_any_host_is_touched(twin, tmp_path):
    healthy()
    before = state()
    proc = rebalance(fleet_with(tmp_path, host_pool_mib=34816, ttm_min_mib=72000, ttm_target_mib=80000), twin,
                     tmp_path / "report")
    assert proc.returncode != 0
    assert "seat archon: the pinned-RAM ledger: TTM_MIN_MIB 72,000 is below the pinned-RAM ledger 75,647.84 MiB" \
        in proc.stdout, proc.stdout[-3000:]
    assert state() == before


def _assert_rolled_back(before: dict) -> None:
    after = state()
    assert live(after["files"]) == live(before["files"])
    assert set(before["files"]) <= set(after["files"]), "the backups are kept"
    assert after["containers"]["radiance-archon"][1:] == ("running", True)


def test_a_knob_that_loses_to_another_claim_fails_vram_kv_and_rolls_back(twin, tmp_path):
    healthy()
    before = state()
    hosts = fleet_with(tmp_path, host_pool_mib=32768, ttm_min_mib=72000, ttm_target_mib=74000, gpu_headroom_mib=48,
                       environment={"FAKE_RADIANCE_CLAIM_MIB": "512"})
    proc = rebalance(hosts, twin, tmp_path / "report")
    assert proc.returncode != 0
    section = report(tmp_path / "report")
    assert section["status"] == "rolled_back", section.get("error")
    vram_kv = gates(section)["vram_kv"]
    assert not vram_kv["ok"] and "the knob lost to another claim" in vram_kv["detail"], vram_kv
    _assert_rolled_back(before)
    assert pinned_mib() == 71552


def test_a_ledger_the_hosts_ram_cannot_hold_is_refused_before_it_boots_and_rolls_back(twin, tmp_path):
    healthy()
    before = state()
    hosts = fleet_with(tmp_path, host_pool_mib=46080, ttm_min_mib=100000, ttm_target_mib=102000)
    proc = rebalance(hosts, twin, tmp_path / "report")
    assert proc.returncode != 0
    section = report(tmp_path / "report")
    assert section["status"] == "rolled_back", section.get("error")
    pinnable = gates(section)["host_pinnable_mib"]
    assert not pinnable["ok"] and pinnable["expected"] == {"pin_ledger_mib": 98175.84, "ttm_target_mib": 102000}
    assert pinnable["measured"]["total_mib"] == 98304
    _assert_rolled_back(before)


def test_the_under_funded_ladder_raises_the_pool_until_the_hosts_ram_says_no(twin, tmp_path):
    """A target the host cannot fund: the pool that would fund it needs a TTM_TARGET_MIB above
    the host's RAM, so its rung fails its pre-gate and the ladder settles on the largest pool the
    host holds, with the TTM variables moved by what it pins more. Demand stays as written."""
    healthy()
    hosts = fleet_with(tmp_path, host_pool_mib=32768, max_model_len=131072, ttm_min_mib=72000, ttm_target_mib=90000,
                       target_tokens=520000)
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(hosts), "-i", twin,
                           str(REPO_ROOT / "playbooks" / "ladder.yml"), "-e", "seat=archon",
                           "-e", "ladder_knob=host_pool_mib", "-e", "ladder_step=2048",
                           "-e", "llmfleet_report_dir=%s" % (tmp_path / "ladder")], cwd=REPO_ROOT, env=ansible_env(),
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    ladder = json.loads((tmp_path / "ladder" / "ladder.json").read_text())
    assert (ladder["low"], ladder["high"]) == (32768, 41984), "up to the pool the plan says funds 520,000 tokens"
    tried = {rung["value"]: rung for rung in ladder["rungs"]}
    assert not tried[41984]["passed"] and tried[41984]["failure_kind"] == "host RAM", tried[41984]
    assert ladder["best"] == 36864 and tried[36864]["passed"]
    assert ladder["suggested"] == {"seat": "archon", "host_pool_mib": 36864, "ttm_min_mib": 80192,
                                   "ttm_target_mib": 98192}
    assert all(rung["max_model_len"] == 131072 for rung in ladder["rungs"]), "demand is never touched"
    assert tried[36864]["kv_tokens"] < 520000


def test_a_pin_past_the_hosts_ram_takes_its_seats_down(twin):
    """What the gates prevent: a second endpoint started by hand pins more than the host has
    left, and the host's GPU processes die as under the OOM killer; docker brings them back."""
    healthy()
    restarts = {name: _restarts(name) for name in ("vllm-alpha", "radiance-archon")}
    proc = host().docker(["run", "--rm", "--gpus", "device=GPU-7a1c0003-0000-4000-8000-000000000001",
                          "-e", "TTM_MIN_MIB=1", "-e", "TTM_TARGET_MIB=98304", "-v", "/srv/models:/srv/models:ro",
                          IMAGE, "/srv/models/radiance-moe", "--max-num-seqs", "1", "--max-model-len", "1024",
                          "--host-pool-mib", "30000"], check=False, timeout=120)
    assert proc.returncode != 0
    log = (host().dir / "logs" / "fakegpud.log").read_text()
    assert "host out of memory: pinned memory exhausted the host's RAM" in log
    wait_for(lambda: all(_restarts(name) > count for name, count in restarts.items()),
             what="docker to restart the seats the host's OOM killed", interval=DOCKER_STATE_POLL_S)
    healthy()


def _restarts(container: str) -> int:
    return int(host().docker(["inspect", "--format", "{{.RestartCount}}", container]).stdout.strip())
