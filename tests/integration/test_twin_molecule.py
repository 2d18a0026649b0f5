"""The molecule scenario (extensions/molecule/default): its create and destroy bring the
twin-pair fleet's twin up and down; converge is the collection's rebalance of twin2 over SSH,
idempotence must change nothing, verify re-plans and checks every seat's files, health and
gates."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPO_ROOT, VENV_BIN, ansible_env
from support.need import need_root_and

from twinlib import fleet

pytestmark = [pytest.mark.twin, pytest.mark.slow]


def test_molecule_default_scenario_converges_idempotently_and_verifies():
    need_root_and("dockerd", "docker", "/usr/sbin/sshd", "ip", "nsenter")
    if fleet.record_in_use():
        pytest.fail("a twin is already up on this machine (`tests/twin/twin status`); the "
                    "scenario brings up its own: run `tests/twin/twin down` first", pytrace=False)
    proc = subprocess.run([str(VENV_BIN / "molecule"), "test"], cwd=REPO_ROOT, env=ansible_env(
        {"NO_COLOR": "1", "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0"}), capture_output=True,
        text=True, timeout=900, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    executed = re.findall(r"default (?:➜|>) (\w+): Executed: Successful", log)
    assert executed == ["destroy", "syntax", "create", "converge", "idempotence", "verify",
                        "destroy"], log[-6000:]
    deployed = re.findall(r"(twin2)\s+: ok=\d+\s+changed=[1-9]\d*\s+unreachable=0\s+failed=0", log)
    assert deployed == ["twin2"], "converge did not deploy twin2"
    assert "TASK [llmfleet.seats.seat_rebalance : Render each seat's .env and compose.yaml" in log, \
        "converge ran the collection's rebalance role"
    unchanged = re.findall(r"(twin[12])\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", log)
    assert unchanged == ["twin1", "twin2", "twin2"], "idempotence (both hosts) or verify (twin2) changed something"
    assert log.count("TASK [Check the seats, their files and their gates against the plan]") == 1, \
        "verify checked every seat against the plan"
    assert fleet.load_record() is None, "destroy left the twin up"
