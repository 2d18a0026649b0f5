"""The gated rebalance on the fleet twin's two-host fleet (tests/integration/fleets/twin-pair):
bring it up, run `playbooks/rebalance.yml` over real SSH, and read what each host holds."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from conftest import REPO_ROOT, VENV_BIN, ansible_env, run_ansible
from support.need import need_root_and

TWIN_DIR = REPO_ROOT / "tests" / "twin"
sys.path.insert(0, str(TWIN_DIR))

from twinlib import fleet  # noqa: E402

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair"
PLAYBOOK = REPO_ROOT / "playbooks" / "rebalance.yml"
HOSTS = ("twin1", "twin2")


def twin(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`tests/twin/twin ARGS` (on the instance LLMFLEET_TWIN_INSTANCE names)."""
    return subprocess.run([str(TWIN_DIR / "twin")] + list(args), capture_output=True, text=True,
                          timeout=timeout, check=False, env=ansible_env())


@contextlib.contextmanager
def twin_pair():
    """The fleet's twin, up with its models staged; yields the twin's inventory path."""
    need_root_and("ip", "dockerd", "sshd" if shutil.which("sshd") else "/usr/sbin/sshd")
    up = twin("up", "--spec", str(FLEET / "spec.json"))
    assert up.returncode == 0, up.stdout + up.stderr
    inventory = up.stdout.strip().splitlines()[-1]
    try:
        staged = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), "-i", inventory,
                              str(FLEET / "prepare.yml")])
        assert staged.returncode == 0, staged.stdout + staged.stderr
        yield inventory
    finally:
        down = twin("down")
        assert down.returncode == 0, down.stdout + down.stderr


def fleet_with(tmp_path: Path, **edits) -> Path:
    """A copy of the test fleet with seat fields changed: edits = {seat: {field: value}}."""
    copy = tmp_path / "fleet"
    shutil.copytree(FLEET, copy)
    for host in HOSTS:
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


def states() -> dict:
    return {host: state(host) for host in HOSTS}


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


def wait_for(condition, timeout=120, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("timed out waiting for %s" % what)
