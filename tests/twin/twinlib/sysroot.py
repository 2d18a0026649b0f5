"""The root filesystem of a systemd twin host: Debian 12 from Debian's own packages (mmdebstrap),
with systemd as PID 1, sshd, sudo and python3. It is built once per recipe by
`tests/twin/twin build-root` (scripts/install-system-deps runs it; it reaches Debian's archive,
so nothing else does) and kept in CACHE, named by a digest of the recipe.

On a twin host it runs as a container of the host's own dockerd, in the host's network
namespace, with what a GPU host has mounted from the host: its /srv, its docker socket (the
seats' containers run beside it, on the host's engine), the simulated GPU's socket and NVML
library, and the checkout's Python for Ansible's modules.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from .procs import TwinError

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "openssh-sftp-server", "sudo",
            "python3", "iproute2", "procps")
# Docs and translations are a third of the root and nothing reads them.
DPKG_OPTIONS = ("path-exclude=/usr/share/doc/*", "path-exclude=/usr/share/man/*",
                "path-exclude=/usr/share/locale/*")
CACHE = Path("/var/cache/llmfleet-twin")
IMAGE = "llmfleet/twin-systemd:%s"
# The capabilities this sandbox grants (CAP_SYS_RESOURCE is not among them, so --privileged
# fails to start a container); systemd needs the rest, and a writable cgroup tree.
RUN_OPTIONS = ("--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
               "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
               "--cgroupns", "host", "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
               "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
               "--stop-signal", "SIGRTMIN+3", "--network", "host")


def recipe_digest() -> str:
    recipe = "\n".join([SUITE, MIRROR, " ".join(PACKAGES), " ".join(DPKG_OPTIONS),
                        Path(__file__).read_text()])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def root_tarball() -> Path:
    return CACHE / ("systemd-root-%s.tar" % recipe_digest())


def build_root() -> Path:
    """Build the tarball unless this recipe's is there already; its path."""
    out = root_tarball()
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = out.with_name("%s.%d.partial" % (out.name, os.getpid()))
    command = ["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet",
               "--include=" + ",".join(PACKAGES)]
    command += ["--dpkgopt=" + option for option in DPKG_OPTIONS]
    proc = subprocess.run(command + [SUITE, str(partial), MIRROR], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise TwinError("mmdebstrap could not build the systemd host's root:\n%s"
                        % "\n".join((proc.stderr or proc.stdout).splitlines()[-15:]))
    partial.rename(out)
    for stale in CACHE.glob("systemd-root-*.tar"):
        if stale != out:
            stale.unlink()
    return out


def required_root() -> Path:
    out = root_tarball()
    if not out.exists():
        raise TwinError("no root for a systemd host at %s: run `tests/twin/twin build-root` (or "
                        "scripts/install-system-deps) first" % out)
    return out
