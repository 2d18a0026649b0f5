"""One twin host: a network namespace on the twin's bridge, a mount namespace of its own, and
the host's sshd, dockerd and simulated GPU driver running inside both.

Measured on the project's machines: processes enter a
host with `nsenter --net=... --mount=...` (`ip netns exec` remounts /sys and dockerd then fails
on the devices cgroup); the mount namespace is kept by a bind mount of its nsfs file
(`unshare --mount=FILE`), so the host exists without any process holding it open.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .procs import (CommandTimeout, TwinError, alive, is_mounted, ns_inode, pids_in_namespaces, run,
                    terminate, wait_for)
from .sysroot import RUN_OPTIONS


def _instance() -> int:
    """Which twin of this machine (LLMFLEET_TWIN_INSTANCE, 0-9, default 0): a twin's names and
    addresses are machine-wide, so side by side twins (two test runs) need distinct ones."""
    value = os.environ.get("LLMFLEET_TWIN_INSTANCE", "0") or "0"
    if value not in [str(n) for n in range(10)]:
        raise SystemExit("twin: LLMFLEET_TWIN_INSTANCE=%r: expected one digit, 0-9" % value)
    return int(value)


INSTANCE = _instance()
STATE_DIR = Path("/var/lib/llmfleet-twin" + ("-%d" % INSTANCE if INSTANCE else ""))
# Each host's dockerd keeps its images here between one `up` and the next (Host.images_dir): an
# import costs about 1.7 CPU-s, and the suite brings hosts up some forty times.
IMAGES_DIR = Path(str(STATE_DIR) + "-images")
# written by a `down` that left a host's image store with no container, network, volume or
# untagged image in it
CLEAN_MARK = "clean-after-down"
NS_DIR = STATE_DIR / "ns"
DRIVER_DIR = STATE_DIR / "driver"
LD_CACHE = DRIVER_DIR / "ld.so.cache"
NETNS_PREFIX = "llmtwin%s-" % (INSTANCE or "")
BRIDGE = "llmtwin%d" % INSTANCE
# A fixed address: a bridge otherwise takes its lowest port's MAC, so it changes when a host
# leaves, and the other hosts' ARP entries for the bridge go stale mid-teardown.
BRIDGE_MAC = "02:6c:6c:74:77:%02x" % (INSTANCE + 1)
VETH_PREFIX = "ltw%d-" % INSTANCE
# RFC 2544's benchmarking range: reserved, never routed, so these addresses exist only here.
SUBNET = "198.18.%d" % INSTANCE
BRIDGE_ADDRESS = SUBNET + ".1"
FAKEGPU_DIR = Path(__file__).resolve().parent.parent / "fakegpu"
# Daemons start with this environment and nothing of the caller's.
HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root", "LANG": "C.UTF-8"}
DOCKER_SOCKET = "/run/docker.sock"
GPU_STATE = "/run/fakegpu/state.json"
GPU_SOCKET = "/run/fakegpu/gpu.sock"


def driver_request(socket_path: str, request: dict) -> dict:
    """The simulated GPU driver's reply to one request (tests/twin/fakegpu: a JSON object a line)."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(socket_path)
        conn.sendall(json.dumps(request).encode() + b"\n")
        return json.loads(conn.makefile("rb").readline())


def bridge_up() -> None:
    if run(["ip", "link", "show", BRIDGE], check=False).returncode == 0:
        return
    run(["ip", "link", "add", BRIDGE, "address", BRIDGE_MAC, "type", "bridge"])
    run(["ip", "addr", "add", BRIDGE_ADDRESS + "/24", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])


def bridge_down() -> None:
    if run(["ip", "link", "show", BRIDGE], check=False).returncode == 0:
        run(["ip", "link", "del", BRIDGE])


def ns_dir_up() -> None:
    """nsfs files can only be bind-mounted below a private mount (as `ip netns` does too)."""
    NS_DIR.mkdir(parents=True, exist_ok=True)
    if not is_mounted(NS_DIR):
        run(["mount", "--bind", str(NS_DIR), str(NS_DIR)])
        run(["mount", "--make-private", str(NS_DIR)])


def leftover_netns() -> list:
    """Twin hosts' network namespaces on this machine, with or without a record."""
    names = run(["ip", "netns", "list"]).stdout.split("\n")
    return sorted(n.split()[0][len(NETNS_PREFIX):] for n in names
                  if n.startswith(NETNS_PREFIX))


SYSTEMD_CONTAINER = "llmfleet-twin-systemd"


class Host:
    """A twin host: its names and paths follow from its index and name; `pids` are its
    daemons' (fakegpud, dockerd, and sshd on a plain host) once started, as the twin's record
    keeps them. On a `systemd` host, sshd runs under systemd, in a container of the host's
    dockerd (twinlib/sysroot.py)."""

    def __init__(self, index: int, name: str, pids: dict | None = None, kind: str = "plain"):
        self.index, self.name, self.kind = index, name, kind
        self.address = "%s.%d" % (SUBNET, 11 + index)
        self.netns = NETNS_PREFIX + name
        self.veth = "%s%d" % (VETH_PREFIX, index)
        self.dir = STATE_DIR / "hosts" / name
        self.images_dir = IMAGES_DIR / name
        self.left_clean = False
        self.mntns = NS_DIR / (name + ".mnt")
        self.utsns = NS_DIR / (name + ".uts")
        self.pids = dict(pids or {})

    def record(self) -> dict:
        return {"index": self.index, "name": self.name, "address": self.address,
                "pids": self.pids, "kind": self.kind}

    # -- entering the host --
    def enter(self) -> list:
        return ["nsenter", "--net=/run/netns/" + self.netns, "--mount=%s" % self.mntns,
                "--uts=%s" % self.utsns, "--"]

    def path(self, inside: str) -> str:
        """A path in this host's mount view, reached from outside through one of its processes."""
        pid = next((p for p in self.pids.values() if alive(p)), None)
        if pid is None:
            raise TwinError("twin host %s has no running process" % self.name)
        return "/proc/%d/root%s" % (pid, inside)

    def docker(self, args: list, **kwargs) -> subprocess.CompletedProcess:
        return run(["docker", "-H", "unix://" + self.path(DOCKER_SOCKET)] + args, env=HOST_ENV,
                   **kwargs)

    # -- making it --
    def create(self, initial_gpu_state: dict, ssh_dir: Path, nvidia_smi: Path | None,
               shared: dict | None = None) -> None:
        """Make the host; ``shared`` maps paths of this machine to where the host sees them,
        read-only, below its /srv."""
        for sub in ("srv", "sbin", "etc-docker", "logs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._keep_images()
        (self.dir / "gpus.json").write_text(json.dumps(initial_gpu_state, indent=1) + "\n")
        # the host's own RAM figures; the driver keeps them (a bind mount needs the file first)
        (self.dir / "meminfo").touch()
        hook = self.dir / "sbin" / "nvidia-container-runtime-hook"
        hook.write_text("#!/bin/sh\n# Written by tests/twin/twin: dockerd registers its nvidia "
                        "device driver because this is on its PATH.\nexec %s %s \"$@\"\n"
                        % (sys.executable, FAKEGPU_DIR / "hook.py"))
        hook.chmod(0o755)
        if nvidia_smi:
            (self.dir / "sbin" / "nvidia-smi").symlink_to(nvidia_smi)
        self._write_sshd_config(ssh_dir)
        self._network()
        self._mounts(shared or {})

    def _keep_images(self) -> None:
        """The host's dockerd gets the images an orderly `down` left it; a store that was not
        left so (a run killed with containers in it, which dockerd would start again) goes."""
        mark = self.images_dir / CLEAN_MARK
        if self.images_dir.exists() and not mark.exists():
            shutil.rmtree(self.images_dir)
        (self.images_dir / "docker").mkdir(parents=True, exist_ok=True)
        if mark.exists():
            mark.unlink()

    def _network(self) -> None:
        run(["ip", "netns", "add", self.netns])
        run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0",
             "netns", self.netns])
        run(["ip", "link", "set", self.veth, "master", BRIDGE, "up"])
        run(["ip", "-n", self.netns, "addr", "add", self.address + "/24", "dev", "eth0"])
        run(["ip", "-n", self.netns, "link", "set", "eth0", "up"])
        run(["ip", "-n", self.netns, "link", "set", "lo", "up"])

    def _mounts(self, shared: dict) -> None:
        self.mntns.touch()
        self.utsns.touch()
        run(["unshare", "--mount=%s" % self.mntns, "--propagation", "private",
             "--uts=%s" % self.utsns, "hostname", self.name])
        # The new view starts as a copy of this one: drop its copies of other namespaces'
        # files, or they would keep other hosts' namespaces alive after `down`. Another twin
        # (a lane beside this one) may remove its own between the listing and the umount.
        script = """set -e
findmnt -rn -t nsfs -o TARGET | while read -r ns; do umount -l "$ns" 2>/dev/null || if mountpoint -q "$ns"; then exit 1; fi; done
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/sshd /run/fakegpu /run/lock
mount --bind {dir}/srv /srv
mount --bind {dir}/sbin /usr/local/sbin
# dockerd keeps its identity (key.json) and daemon.json there: one per host.
mkdir -p /etc/docker
mount --bind {dir}/etc-docker /etc/docker
if [ -f {cache} ]; then mount --bind {cache} /etc/ld.so.cache; fi
# The host's RAM as its simulated driver keeps it (what seats pin of it).
mount --bind {dir}/meminfo /proc/meminfo
# sshd runs every command through root's bash, which reads ~/.bashrc: the host's own, not this
# machine's (a pyenv set up there would cost every Ansible task a dozen processes).
if [ -f /root/.bashrc ]; then mount --bind {dir}/root-bashrc /root/.bashrc; fi
""".format(dir=self.dir, cache=LD_CACHE)
        for source, target in shared.items():
            if not target.startswith("/srv/"):
                raise TwinError("a path shared with host %s must be below its /srv, not %s" % (self.name, target))
            (self.dir / target[1:]).mkdir(parents=True, exist_ok=True)
            script += "mount --bind {source} {target}\nmount -o remount,bind,ro {target}\n".format(
                source=shlex.quote(source), target=shlex.quote(target))
        (self.dir / "root-bashrc").write_text(
            "# Written by tests/twin/twin: root's ~/.bashrc on host %s.\n" % self.name)
        run(["nsenter", "--mount=%s" % self.mntns, "--", "sh", "-c", script])

    def _write_sshd_config(self, ssh_dir: Path) -> None:
        key = self.dir / "ssh_host_ed25519_key"
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "root@" + self.name,
                 "-f", str(key)])
        (self.dir / "sshd_config").write_text("""# Written by tests/twin/twin for host {name}.
ListenAddress {address}
HostKey {key}
PidFile /run/sshd.pid
AuthorizedKeysFile {ssh_dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
# PAM would read the machine's /etc/environment and session modules; keys are enough here.
UsePAM no
PrintMotd no
AcceptEnv LANG LC_*
MaxStartups 50:30:100
MaxSessions 50
Subsystem sftp /usr/lib/openssh/sftp-server
""".format(name=self.name, address=self.address, key=key, ssh_dir=ssh_dir))

    def host_key(self) -> str:
        """The host's public key as known_hosts wants it: `ssh-ed25519 AAAA...`."""
        return " ".join((self.dir / "ssh_host_ed25519_key.pub").read_text().split()[:2])

    def _spawn(self, name: str, cmd: list) -> None:
        with open(self.dir / "logs" / (name + ".log"), "ab") as log:
            proc = subprocess.Popen(self.enter() + cmd, env=HOST_ENV, cwd="/",
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        # nsenter without --pid or --user execs the command: this is the daemon's own PID.
        self.pids[name] = proc.pid

    def start(self) -> None:
        self._spawn("fakegpud", [sys.executable, str(FAKEGPU_DIR / "fakegpud.py"),
                                 "--initial", str(self.dir / "gpus.json"),
                                 "--state", GPU_STATE, "--socket", GPU_SOCKET,
                                 "--meminfo", str(self.dir / "meminfo")])
        self._spawn("dockerd", ["dockerd", "--data-root", str(self.images_dir / "docker"),
                                "--storage-driver=overlay2", "--iptables=false",
                                "--ip6tables=false"])
        if self.kind == "plain":
            self._spawn("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", str(self.dir / "sshd_config")])

    def daemons(self) -> tuple:
        return ("fakegpud", "dockerd", "sshd") if self.kind == "plain" else ("fakegpud", "dockerd")

    def boot_systemd(self, root: Path, image: str, mounts: list) -> None:
        """Start the host's systemd: the root imported as an image of the host's dockerd and run
        with systemd as its PID 1, in the host's network, with `mounts` (in-host paths, each
        `(path, path inside, read-only)` each) and this host's sshd and its keys."""
        if self.docker(["image", "inspect", image], check=False, timeout=60).returncode != 0:
            self.docker(["import", "--change", 'CMD ["/lib/systemd/systemd"]',
                         "--change", "ENV container=docker", str(root), image], timeout=300)
        volumes = []
        for source, target, read_only in mounts + [(str(self.dir), str(self.dir), True),
                                                   (str(self.dir / "sshd_config"), "/etc/ssh/sshd_config", True)]:
            volumes += ["--volume", "%s:%s%s" % (source, target, ":ro" if read_only else "")]
        self.docker(["run", "--detach", "--name", SYSTEMD_CONTAINER, "--hostname", self.name]
                    + list(RUN_OPTIONS) + volumes + [image], timeout=120)

    def systemd_running(self) -> bool:
        """Whether the host's systemd has finished booting (`is-system-running` says
        running or degraded)."""
        try:
            proc = self.docker(["exec", SYSTEMD_CONTAINER, "systemctl", "is-system-running"],
                               check=False, timeout=20)
        except CommandTimeout:
            return False
        return proc.stdout.strip() in ("running", "degraded")

    def wait_ready(self, timeout: float = 60) -> None:
        def up(name: str, check) -> bool:
            if not alive(self.pids[name]):
                log = (self.dir / "logs" / (name + ".log")).read_text(errors="replace")
                raise TwinError("%s on twin host %s exited:\n%s"
                                % (name, self.name, "\n".join(log.splitlines()[-15:])))
            return check()

        wait_for("the GPU driver on " + self.name,
                 lambda: up("fakegpud", lambda: os.path.exists(self.path(GPU_SOCKET))), timeout)
        wait_for("dockerd on " + self.name, lambda: up("dockerd", self._docker_answers), timeout,
                 interval=0.2)
        if self.kind == "plain":
            wait_for("sshd on " + self.name, lambda: up("sshd", self._ssh_port_open), timeout)

    def wait_systemd(self, timeout: float = 120) -> None:
        wait_for("systemd on " + self.name, self.systemd_running, timeout, interval=0.5)
        wait_for("sshd on " + self.name, self._ssh_port_open, timeout)

    def _docker_answers(self) -> bool:
        # A dockerd still starting can accept the connection and answer nothing for a while
        # (seen on a busy machine): a probe that hangs is one more "not yet".
        try:
            return self.docker(["version"], check=False, timeout=10).returncode == 0
        except CommandTimeout:
            return False

    def _ssh_port_open(self) -> bool:
        try:
            with socket.create_connection((self.address, 22), timeout=1):
                return True
        except OSError:
            return False

    def import_images(self, wanted: dict, kept: tuple = ()) -> None:
        """Make the host's images ``wanted`` (tag: (tarball, entrypoint, env)), importing only
        those its store does not hold as made from the same tarball and settings; remove
        every other image but the tags in ``kept``."""
        record = self.images_dir / "images.json"
        try:
            made = json.loads(record.read_text())
        except (OSError, ValueError):
            made = {}
        if not isinstance(made, dict):
            made = {}
        listed = dict(line.split() for line in self.docker(
            ["images", "--no-trunc", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"], timeout=60).stdout.splitlines())
        for tag, (tarball, entrypoint, env) in wanted.items():
            source = json.dumps([tarball.name, entrypoint, env], sort_keys=True)
            if made.get(tag) == {"source": source, "id": listed.get(tag)}:
                continue
            changes = ["--change", "ENTRYPOINT %s" % json.dumps(entrypoint),
                       "--change", "WORKDIR /vllm-workspace"]
            for key, value in env.items():
                changes += ["--change", "ENV %s=%s" % (key, value)]
            self.docker(["import"] + changes + [str(tarball), tag], timeout=900)
            made[tag] = {"source": source, "id": self.image_ids([tag])[tag]}
        others = [tag for tag in listed if tag not in wanted and tag not in kept and "<none>" not in tag]
        if others:
            self.docker(["rmi", "--force"] + others, timeout=300)
        record.write_text(json.dumps({tag: made[tag] for tag in wanted}, indent=1) + "\n")

    # -- looking at it --
    def image_ids(self, tags: list) -> dict:
        proc = self.docker(["image", "inspect", "--format", "{{.Id}}"] + tags, timeout=60)
        return dict(zip(tags, proc.stdout.split()))

    def gpu_state(self) -> dict | None:
        try:
            with open(self.path(GPU_STATE), encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, KeyError, ValueError):
            return None

    def containers(self) -> list:
        proc = self.docker(["ps", "-a", "--no-trunc", "--format", "{{json .}}"], check=False,
                           timeout=20)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    # -- removing it --
    def stop(self) -> None:
        """End every process of the host: containers first, through their dockerd, then all
        that lives in the host's namespaces or descends from it. Works on half-made hosts."""
        if alive(self.pids.get("dockerd")):
            ids = self.docker(["ps", "-aq"], check=False, timeout=30).stdout.split()
            if ids:
                self.docker(["rm", "-f"] + ids, check=False, timeout=120)
            # its images are kept only with what a fresh dockerd holds besides them: no container,
            # network, volume or untagged image of the tests
            self.left_clean = all(self.docker(args, check=False, timeout=120).returncode == 0 for args in (
                ["network", "prune", "--force"], ["volume", "prune", "--force"],
                ["image", "prune", "--force"])) and not self.docker(
                ["ps", "-aq"], check=False, timeout=30).stdout.split()
        mnt = ns_inode(str(self.mntns)) if is_mounted(self.mntns) else None
        terminate(pids_in_namespaces(mnt, ns_inode("/run/netns/" + self.netns)), grace=10)

    def remove(self) -> None:
        """Remove the stopped host's namespaces and files."""
        for ns_file in (self.mntns, self.utsns):
            if is_mounted(ns_file):
                run(["umount", str(ns_file)])
            if ns_file.exists():
                ns_file.unlink()
        if ns_inode("/run/netns/" + self.netns):
            # Closed connections linger in FIN-WAIT and would keep the namespace (and its veth)
            # for a minute; destroy them so the namespace goes now.
            run(["nsenter", "--net=/run/netns/" + self.netns, "ss", "-K", "-a"], check=False)
            run(["ip", "netns", "del", self.netns])
        if self.dir.exists():
            shutil.rmtree(self.dir)
        if self.left_clean:
            (self.images_dir / CLEAN_MARK).touch()
