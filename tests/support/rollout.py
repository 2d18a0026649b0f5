"""The gated rebalance on the fleet twin's two-host fleet (tests/integration/fleets/twin-pair):
bring it up, run `playbooks/rebalance.yml` over real SSH, and read what each host holds."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import yaml

from conftest import REPO_ROOT, VENV_BIN, ansible_env, run_ansible
from support.need import need_root_and
from support.wait import DOCKER_HEALTH_POLL_S, wait_for

from twinlib import fleet

TWIN_DIR = REPO_ROOT / "tests" / "twin"

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair"
PLAYBOOK = REPO_ROOT / "playbooks" / "rebalance.yml"
HOSTS = ("twin1", "twin2")
# the window on twin1 alone, for a test that says nothing of twin2
ONLY_TWIN1 = ("-e", "target=twin1")


def twin(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`tests/twin/twin ARGS` (on the instance LLMFLEET_TWIN_INSTANCE names)."""
    return subprocess.run([str(TWIN_DIR / "twin")] + list(args), capture_output=True, text=True,
                          timeout=timeout, check=False, env=ansible_env())


@contextlib.contextmanager
def twin_pair(spec: Path = FLEET / "spec.json", fleet_dir: Path = FLEET):
    """The fleet's twin (its hosts as ``spec`` describes them), up with the models of the fleet
    in ``fleet_dir`` staged; yields the twin's inventory path."""
    need_root_and("ip", "dockerd", "sshd" if shutil.which("sshd") else "/usr/sbin/sshd")
    up = twin("up", "--spec", str(spec))
    assert up.returncode == 0, up.stdout + up.stderr
    inventory = up.stdout.strip().splitlines()[-1]
    try:
        staged = run_ansible(["ansible-playbook", "-i", str(fleet_dir / "hosts.yml"), "-i", inventory,
                              str(fleet_dir / "prepare.yml")])
        assert staged.returncode == 0, staged.stdout + staged.stderr
        yield inventory
    finally:
        down = twin("down")
        assert down.returncode == 0, down.stdout + down.stderr


def address_of(twin_inventory: str, host: str = "twin1") -> str:
    """The address a twin host answers at (its ansible_host in the twin's inventory)."""
    hosts = {name: entry for group in yaml.safe_load(Path(twin_inventory).read_text())["all"]["children"].values()
             for name, entry in (group.get("hosts") or {}).items()}
    return hosts[host]["ansible_host"]


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
              background: bool = False, env: dict | None = None):
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(hosts), "-i", twin_inventory,
           str(PLAYBOOK), "-e", "llmfleet_report_dir=%s" % report] + list(extra)
    if background:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, env=ansible_env(env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=ansible_env(env), capture_output=True,
                          text=True, timeout=900, check=False)
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
    # the host's dockerd through its socket: no twin CLI to start, as polls call this often
    out = fleet.find_host(host).docker(["ps", "-a", "--format", "{{.Names}} {{.ID}} {{.State}} {{.Status}}"]).stdout
    containers = {}
    for line in out.splitlines():
        name, cid, running, status = line.split(" ", 3)
        containers[name] = (cid, running, "(healthy)" in status)
    return {"files": files, "containers": containers}


def wait_healthy(host: str) -> None:
    """Until docker's healthcheck calls every container of the host healthy (every few seconds)."""
    wait_for(lambda: all(running == "running" and healthy
                         for _cid, running, healthy in state(host)["containers"].values()),
             what="docker's healthcheck to call every container on %s healthy" % host, interval=DOCKER_HEALTH_POLL_S)


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


OPERATOR = "llmfleet-op"


@contextlib.contextmanager
def operator_account(tmp_path: Path):
    """Seed 001's operator: a non-root account that SSHes to the GPU hosts and becomes root there
    (passwordless sudo), on a controller where sudo asks for a password. Twin hosts share this
    machine's accounts, so the account is made here (and removed after, if this made it).
    Yields the environment for ansible-playbook: ansible skips become between equal users, so
    BECOME_ALLOW_SAME_USER makes a controller task with become meet that sudo, as it would on
    the operator's own workstation."""
    need_root_and("useradd", "userdel", "sudo")
    try:
        pwd.getpwnam(OPERATOR)
        made = False
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", OPERATOR], check=True)
        subprocess.run(["usermod", "--password", "*", OPERATOR], check=True)  # no password, not locked
        made = True
    sudoers = Path("/etc/sudoers.d") / OPERATOR
    sudoers.write_text("%s ALL=(ALL) NOPASSWD: ALL\n" % OPERATOR)
    os.chmod(sudoers, 0o440)
    controller_bin = tmp_path / "controller-bin"
    controller_bin.mkdir()
    (controller_bin / "sudo").write_text('#!/bin/sh\necho "sudo: a password is required" >&2\nexit 1\n')
    os.chmod(controller_bin / "sudo", 0o755)
    try:
        yield {"PATH": "%s:%s" % (controller_bin, ansible_env()["PATH"]),
               "ANSIBLE_BECOME_ALLOW_SAME_USER": "true"}
    finally:
        sudoers.unlink()
        if made:
            # its SSH sessions on the twin hosts outlive the run (ControlPersist)
            subprocess.run(["pkill", "-KILL", "-u", OPERATOR], check=False)
            wait_for(lambda: subprocess.run(["userdel", "--remove", OPERATOR], check=False,
                                            capture_output=True).returncode == 0,
                     timeout=30, what="userdel " + OPERATOR)
