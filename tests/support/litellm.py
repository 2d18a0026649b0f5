"""A real LiteLLM proxy for tests (litellm[proxy]==1.108.7 in .build/litellm-venv, built by
scripts/bootstrap-litellm), on a free loopback port, started from a config file.

    proxy = LiteLLMProxy(litellm_bin(), config_path, master_key)   # ready when it returns
    ...
    stop(proxy.proc)

RestartableLiteLLM is one a window may restart (its ``restart_argv``), as a service would be.
Each proxy is the ``litellm`` command's own entry point, forked by the test run's launcher
(litellm_launcher.py), which did the proxy's imports once.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.litellm_restart import ask, stopped
from support.process import bootstrapped

READY_TIMEOUT_S = 120
LAUNCHER = Path(__file__).resolve().with_name("litellm_launcher.py")
# what every proxy runs with: the model cost map shipped in the package, never one fetched, and
# its output unbuffered, whole in its log when a test shows it
PROXY_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(ready, what: str, proc: subprocess.Popen, log: Path, timeout=READY_TIMEOUT_S):
    """Poll ``ready()`` until true; fail with the log when ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("%s did not become ready; log:\n%s"
                        % (what, log.read_text(errors="replace")[-3000:]))
        time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def litellm_bin() -> Path:
    """The pinned proxy; scripts/bootstrap-litellm builds it once (~10 s) and is instant after."""
    return bootstrapped("bootstrap-litellm", "the litellm tests need the pinned proxy", timeout=900)


class Launcher:
    """The test run's litellm_launcher.py, on the python of ``binary``'s venv, answering on a
    socket in a private directory; started with the run's first proxy, it ends with the run."""

    _running: dict = {}

    @classmethod
    def of(cls, binary: Path) -> "Launcher":
        if binary not in cls._running or cls._running[binary].proc.poll() is not None:
            cls._running[binary] = cls(binary)
        return cls._running[binary]

    def __init__(self, binary: Path):
        self.work = Path(tempfile.mkdtemp(prefix="litellm-launcher-"))
        self.socket, log = str(self.work / "socket"), self.work / "launcher.log"
        with open(log, "w") as out:
            # -P: not this folder first on its path, where litellm.py is this module
            self.proc = subprocess.Popen([str(binary.parent / "python"), "-P", str(LAUNCHER), self.socket, str(os.getpid())],
                                         stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, **PROXY_ENV))
        atexit.register(self.close)
        wait_until(lambda: ask(self.socket, {"poll": 0}), "the LiteLLM launcher", self.proc, log)

    def close(self) -> None:
        stop(self.proc)
        shutil.rmtree(self.work, ignore_errors=True)

    def start(self, argv: list, log: Path) -> "LaunchedProxy":
        return LaunchedProxy(self, ask(self.socket, {"argv": argv, "log": str(log)})["pid"])

    def returncode(self, pid: int):
        return ask(self.socket, {"poll": pid})["returncode"]


class LaunchedProxy:
    """A proxy the launcher forked, answering what ``stop`` and ``wait_until`` ask of a Popen."""

    def __init__(self, launcher: Launcher, pid: int):
        self.launcher, self.pid, self.returncode = launcher, pid, None

    def poll(self):
        if self.returncode is None:
            self.returncode = self.launcher.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["litellm", str(self.pid)], timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Proxy:
    """What a test asks of a running proxy at ``url`` with its ``master_key``."""
    url: str
    master_key: str

    def post(self, path: str, body: dict) -> tuple[int, str]:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     "Authorization": "Bearer " + self.master_key})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()


class LiteLLMProxy(_Proxy):
    """A LiteLLM proxy on a free loopback port, started from a config file."""

    def __init__(self, binary: Path, config_path: Path, master_key: str):
        self.config_path = config_path
        self.master_key = master_key
        self.url = "http://127.0.0.1:%d" % free_port()
        log = config_path.with_suffix(".log")
        log.write_text("")
        self.proc = Launcher.of(binary).start(
            ["--config", str(config_path), "--host", "127.0.0.1", "--port", self.url.rsplit(":", 1)[1]], log)
        try:
            wait_until(lambda: urllib.request.urlopen(self.url + "/health/readiness", timeout=2),
                       "LiteLLM", self.proc, log)
        except BaseException:
            stop(self.proc)
            raise


RESTART = Path(__file__).resolve().with_name("litellm_restart.py")


class RestartableLiteLLM(_Proxy):
    """A LiteLLM proxy in its own session, restarted by ``restart_argv`` (what a window runs as
    seat_rebalance_gateway_restart) on the same port and config; ``close()`` stops whichever
    process serves then."""

    def __init__(self, binary: Path, config_path: Path, master_key: str):
        self.config_path, self.master_key = config_path, master_key
        self.url = "http://127.0.0.1:%d" % free_port()
        self.log = config_path.with_suffix(".log")
        self.pidfile = config_path.with_suffix(".pid")
        state = config_path.with_suffix(".restart.json")
        launcher = Launcher.of(binary)
        argv = ["--config", str(config_path), "--host", "127.0.0.1", "--port", self.url.rsplit(":", 1)[1]]
        state.write_text(json.dumps({"pidfile": str(self.pidfile), "log": str(self.log), "argv": argv,
                                     "launcher": launcher.socket}))
        self.restart_argv = [sys.executable, str(RESTART), str(state)]
        self.log.write_text("")
        proc = launcher.start(argv, self.log)
        self.pidfile.write_text(str(proc.pid))
        try:
            wait_until(lambda: urllib.request.urlopen(self.url + "/health/readiness", timeout=2),
                       "LiteLLM", proc, self.log)
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return int(self.pidfile.read_text())

    def close(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if stopped(self.pid):
                    return
                time.sleep(0.1)
