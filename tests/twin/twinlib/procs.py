"""Processes, namespaces and commands: the small system helpers the twin is built from."""

from __future__ import annotations

import os
import signal
import subprocess
import time


class TwinError(RuntimeError):
    """A twin operation failed; the message says what and what to do."""


class CommandTimeout(TwinError):
    """A command did not finish in its time."""


def run(cmd: list, check: bool = True, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run a command, text in and out; a failure raises TwinError with its stderr, one that
    does not finish in ``timeout`` seconds CommandTimeout."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              **kwargs)
    except subprocess.TimeoutExpired:
        raise CommandTimeout("`%s` did not finish within %.0f s" % (" ".join(cmd), timeout)) from None
    if check and proc.returncode != 0:
        raise TwinError("`%s` failed (rc=%d): %s"
                        % (" ".join(cmd), proc.returncode, (proc.stderr or proc.stdout).strip()))
    return proc


def ns_inode(path: str) -> tuple | None:
    """The identity of the namespace behind an nsfs path (/run/netns/X, /proc/PID/ns/mnt)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _all_pids() -> list:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _parent_and_state(pid: int) -> tuple:
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0]
    except (OSError, IndexError, ValueError):
        return None, None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with the pid, who it is, since a pid
    may be reused once its process is gone."""
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    """True while the process exists and is not a zombie."""
    if not pid:
        return False
    return _parent_and_state(pid)[1] not in (None, "Z")


def pids_in_namespaces(mnt_inode: tuple | None, net_inode: tuple | None) -> set:
    """Every process living in this mount or network namespace, plus all their descendants
    (containers have namespaces of their own but descend from the host's containerd shims)."""
    members, children = set(), {}
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        parent = _parent_and_state(pid)[0]
        children.setdefault(parent, []).append(pid)
        if (mnt_inode and ns_inode("/proc/%d/ns/mnt" % pid) == mnt_inode) or \
                (net_inode and ns_inode("/proc/%d/ns/net" % pid) == net_inode):
            members.add(pid)
    todo = list(members)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in members:
                members.add(child)
                todo.append(child)
    return members


def terminate(pids: set, grace: float) -> None:
    """SIGTERM, then SIGKILL whatever is still there after `grace` seconds; wait until gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.05)
        pids = {p for p in pids if alive(p)}
        if not pids:
            return
    raise TwinError("processes %s survived SIGKILL" % sorted(pids))


def is_mounted(path) -> bool:
    """Whether something is mounted on `path` (os.path.ismount misses a bind mount of a
    directory onto itself, which stays on the same device)."""
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return any(line.split()[4] == target for line in handle)


def wait_for(what: str, ready, timeout: float, interval: float = 0.1):
    """Poll `ready()` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = ready()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TwinError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)
