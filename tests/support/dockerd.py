"""A private Docker engine for tests, images without a registry, and compose projects on it.

    with private_dockerd() as engine:               # its own socket, data-root, exec-root in /tmp
        image = tiny_image(engine, "llmfleet-test/sleep:1", ["/bin/sleep"])
        engine.compose(project_dir, "up", "-d")     # compose v2 against this engine
        pid = engine.container_pid("fv-seat-a-1")   # host PID (docker inspect State.Pid)

Nothing is pulled (no registry is reachable): images come from host binaries and their shared
libraries, packed as a root filesystem and loaded with ``docker import``. Teardown removes the
containers, stops dockerd, unmounts what it left and deletes its directories.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from support.need import need

DOCKERD_FLAGS = ("--storage-driver=overlay2", "--iptables=false", "--ip6tables=false", "--bridge=none")


class DockerEngine:
    """A running private dockerd; ``env`` points the docker CLI and SDK at it (DOCKER_HOST)."""

    def __init__(self, base: Path):
        self.base = base
        self.socket = base / "docker.sock"
        self.host = "unix://%s" % self.socket
        self.env = dict(os.environ, DOCKER_HOST=self.host)
        self.log = base / "dockerd.log"
        self.process: subprocess.Popen | None = None

    def docker(self, *args: str, input: str | bytes | None = None, check: bool = True,
               text: bool = True) -> subprocess.CompletedProcess:
        """Run the docker CLI against this engine."""
        proc = subprocess.run(["docker"] + list(args), env=self.env, input=input, text=text,
                              capture_output=True, timeout=120, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError("docker %s failed (%d): %s" % (" ".join(args), proc.returncode,
                                                              proc.stderr))
        return proc

    def compose(self, project_dir: Path, *args: str, project: str | None = None) -> subprocess.CompletedProcess:
        """``docker compose`` in ``project_dir`` (its compose.yaml) against this engine."""
        extra = ["-p", project] if project else []
        return self.docker("compose", "--project-directory", str(project_dir), *extra, *args)

    def inspect(self, container: str) -> dict:
        return json.loads(self.docker("inspect", "--type", "container", container).stdout)[0]

    def container_pid(self, container: str) -> int:
        """The host PID of a running container's first process (``State.Pid``)."""
        return int(self.inspect(container)["State"]["Pid"])

    def start(self, timeout: float = 30.0) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        command = ["dockerd", "--host", self.host, "--data-root", str(self.base / "data"),
                   "--exec-root", str(self.base / "exec"), "--pidfile", str(self.base / "docker.pid"),
                   *DOCKERD_FLAGS]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("dockerd exited (%d):\n%s" % (self.process.returncode, self.log.read_text()))
            if self.socket.exists() and self.docker("version", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("dockerd did not answer within %.0f s:\n%s" % (timeout, self.log.read_text()))

    def stop(self) -> None:
        """Remove every container, stop dockerd (TERM, then KILL), unmount and delete its files."""
        if self.process is not None and self.process.poll() is None:
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        _unmount_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)


def _unmount_below(base: Path) -> None:
    """Lazily unmount whatever dockerd left mounted under ``base`` (overlays, netns files)."""
    prefix = str(base) + "/"
    with open("/proc/self/mounts") as handle:
        points = [line.split()[1] for line in handle if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@contextlib.contextmanager
def private_dockerd():
    """A dockerd of its own under a short /tmp directory (unix socket paths are limited to
    108 bytes); stopped and removed on exit, whatever happened."""
    engine = DockerEngine(Path(tempfile.mkdtemp(prefix="llmfleet-dockerd-", dir="/tmp")))
    try:
        engine.start()
        yield engine
    finally:
        engine.stop()


def _shared_libraries(executable: str) -> list[str]:
    """The shared libraries ``ldd`` lists for an executable, the dynamic loader included."""
    out = subprocess.run(["ldd", executable], capture_output=True, text=True, check=False).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts else "")
        if path.startswith("/"):
            found.append(path)
    return found


def rootfs_tar(executables: list[str], extra_paths: list[str] = ()) -> bytes:
    """A root filesystem (tar) holding host ``executables``, their shared libraries, and
    ``extra_paths`` (files or whole directories, e.g. a Python standard library)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        added = set()
        for path in list(executables) + [lib for exe in executables for lib in _shared_libraries(exe)] \
                + list(extra_paths):
            real = os.path.realpath(path)
            if path in added:
                continue
            added.add(path)
            tar.add(real, arcname=path.lstrip("/"), recursive=True)
    return buffer.getvalue()


def tiny_image(engine: DockerEngine, tag: str, executables: list[str], extra_paths: list[str] = ()) -> str:
    """Import a local image ``tag`` made of host binaries (no registry); returns the tag."""
    engine.docker("import", "-", tag, input=rootfs_tar(executables, extra_paths), text=False)
    return tag


SLEEP_IMAGE = "llmfleet-test/sleep:1"
# Two compose seats that only sleep, as GPU processes name them: gen-small is one of the
# collection's (its label), coder a service started by hand.
SLEEPING_SEATS = """\
services:
  gen-small:
    image: %(image)s
    command: ["/bin/sleep", "3600"]
    network_mode: none
    labels: {io.llmfleet.seat: gen-small}
  coder:
    image: %(image)s
    command: ["/bin/sleep", "3600"]
    network_mode: none
""" % {"image": SLEEP_IMAGE}


def sleeping_seats(engine: DockerEngine, project_dir: Path) -> dict:
    """SLEEPING_SEATS up as compose project "fv" in ``project_dir`` (an existing directory),
    on SLEEP_IMAGE: ``{container name: its host PID}``."""
    need(engine.docker("compose", "version", check=False).returncode == 0,
         "docker compose v2 is missing: run `sudo scripts/install-system-deps`")
    tiny_image(engine, SLEEP_IMAGE, ["/bin/sleep"])
    (project_dir / "compose.yaml").write_text(SLEEPING_SEATS)
    engine.compose(project_dir, "up", "-d", project="fv")
    return {name: engine.container_pid(name) for name in ("fv-gen-small-1", "fv-coder-1")}
