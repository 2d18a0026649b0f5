"""A seat's secrets on the fleet twin, over real SSH and the twin host's own dockerd: a window that
writes a secret over a world-readable .env leaves the file and its backup readable by their owner
alone, and a seat's api_key reaches vLLM from that file (never its command line) while the gates
ask its /v1 endpoints with it (the vLLM stand-in refuses /v1 without the key it was given)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.rollout import FLEET, ONLY_TWIN1, fleet, fleet_with, rebalance, report_of, twin, twin_pair

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.slow]

TOKEN, KEY = "hf_modeTOKEN0123456789", "sk-seat-KEY-0123456789abcdef"


@pytest.fixture(scope="module")
def twin_inventory():
    with twin_pair() as inventory:
        yield inventory


def _on_twin1(path: str) -> Path:
    return Path(fleet.find_host("twin1").path(path))


def test_a_secret_over_a_world_readable_env_leaves_it_and_its_backup_private(twin_inventory, tmp_path):
    # the secrets are alpha's, on twin1: twin2's window would be its own seats' alone
    rebalance(FLEET / "hosts.yml", twin_inventory, tmp_path / "baseline", *ONLY_TWIN1)
    env = _on_twin1("/srv/compose/alpha/.env")
    env.chmod(0o644)  # as a hand edit or another tool left it
    before = env.read_bytes()

    hosts = fleet_with(tmp_path, alpha={"secret_environment": {"HF_TOKEN": TOKEN}, "api_key": KEY})
    proc = rebalance(hosts, twin_inventory, tmp_path / "report", "--diff", "-vvv", *ONLY_TWIN1)
    section = report_of(tmp_path / "report")["hosts"]["twin1"]
    assert section["status"] == "applied", section["status"]

    assert env.stat().st_mode & 0o777 == 0o600, "a file holding secrets is private on every write"
    backups = [b for b in section["backups"] if os.path.basename(b).startswith(".env.bak-")]
    assert len(backups) == 1, section["backups"]
    backup = _on_twin1(backups[0])
    assert backup.read_bytes() == before and backup.stat().st_mode & 0o777 == 0o600, "so is its backup"
    text = env.read_text()
    assert "SEAT_SECRET_HF_TOKEN='%s'" % TOKEN in text and "SEAT_SECRET_VLLM_API_KEY='%s'" % KEY in text

    # vLLM reads the key from its environment; the command line, the outputs and the plan never hold it
    inspect = twin("exec", "twin1", "--", "docker", "inspect", "--format", "{{json .Config.Env}} {{json .Args}}",
                   "vllm-alpha").stdout
    container_env, args = inspect.split("] [", 1)
    assert "VLLM_API_KEY=%s" % KEY in container_env and KEY not in args
    shown = proc.stdout + proc.stderr
    assert TOKEN not in shown and KEY not in shown, "a secret reached the run's output at -vvv"
    for path in (tmp_path / "report").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text() and TOKEN not in path.read_text(), "a secret is in %s" % path.name
    plan = {s["name"]: s for s in section["plan"]["seats"]}
    assert plan["alpha"]["launch"]["secret_environment"] == ["HF_TOKEN", "VLLM_API_KEY"]

    # the stand-in answers /v1/models only with the key: the gate passed because it was sent
    served = [g for g in section["gates"] if g["seat"] == "alpha" and g["gate"] == "served_models"]
    assert served and all(g["ok"] for g in served), served
