"""A real LiteLLM proxy for tests (litellm[proxy]==1.108.7 in .build/litellm-venv, built by
scripts/bootstrap-litellm), on a free loopback port, started from a config file.

    proxy = LiteLLMProxy(litellm_bin(), config_path, master_key)   # ready when it returns
    ...
    stop(proxy.proc)

RestartableLiteLLM is one a window may restart (its ``restart_argv``), as a service would be.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.litellm_restart import stopped
from support.process import bootstrapped

READY_TIMEOUT_S = 120


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
    """The pinned proxy; scripts/bootstrap-litellm builds it once (~55 s) and is instant after."""
    return bootstrapped("bootstrap-litellm", "the litellm tests need the pinned proxy", timeout=900)


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
        with open(log, "w") as out:
            self.proc = subprocess.Popen(
                [str(binary), "--config", str(config_path), "--host", "127.0.0.1",
                 "--port", self.url.rsplit(":", 1)[1]], stdout=out, stderr=subprocess.STDOUT,
                env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
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
        state.write_text(json.dumps({
            "pidfile": str(self.pidfile), "log": str(self.log), "env": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            "argv": [str(binary), "--config", str(config_path), "--host", "127.0.0.1",
                     "--port", self.url.rsplit(":", 1)[1]]}))
        self.restart_argv = [sys.executable, str(RESTART), str(state)]
        with open(self.log, "w") as out:
            proc = subprocess.Popen(json.loads(state.read_text())["argv"], stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
        self.pidfile.write_text(str(proc.pid))
        self.first = proc   # this process's child until a restart replaces it: reaped here
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
                self.first.poll()
                if stopped(self.pid):
                    return
                time.sleep(0.1)
