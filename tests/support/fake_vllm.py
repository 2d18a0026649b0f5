"""The twin's vLLM stand-in (tests/twin/seat/vllm) and its simulated GPU driver
(tests/twin/fakegpu/fakegpud.py) as host processes, for the tests that drive them directly."""

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

from conftest import REPO_ROOT
from twinlib.host import driver_request

VLLM = REPO_ROOT / "tests" / "twin" / "seat" / "vllm"
DRIVER = REPO_ROOT / "tests" / "twin" / "fakegpu" / "fakegpud.py"
TOTAL_MIB = 97887      # RTX PRO 6000 Blackwell Max-Q (fv-ml1)
GPU0, GPU1 = "GPU-5a1c0c6e-0000-4000-8000-000000000000", "GPU-5a1c0c6e-0000-4000-8000-000000000001"


class GpuDriver:
    """The twin's simulated driver, on a private socket, with two 97,887 MiB GPUs."""

    def __init__(self, tmp: Path):
        self.socket = str(tmp / "gpu.sock")
        self.state = tmp / "state.json"
        initial = tmp / "initial.json"
        initial.write_text(json.dumps({
            "schema": 1, "driver_version": "580.95.05", "nvml_version": "13.580.95.05",
            "cuda_driver_version": 13000, "faults": {},
            "gpus": [{"index": i, "uuid": uuid, "name": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                      "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i), "serial": str(i),
                      "memory_total_mib": TOTAL_MIB, "memory_reserved_mib": 0, "background_used_mib": 0,
                      "mig_mode": False, "processes": []} for i, uuid in enumerate((GPU0, GPU1))]}))
        self.proc = subprocess.Popen([sys.executable, str(DRIVER), "--initial", str(initial),
                                      "--state", str(self.state), "--socket", self.socket],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            assert self.proc.poll() is None, self.proc.stdout.read()
            assert time.monotonic() < deadline, "the GPU driver did not create its socket"
            time.sleep(0.02)

    def call(self, request: dict) -> dict:
        return driver_request(self.socket, request)

    def processes(self, uuid: str) -> list:
        state = json.loads(self.state.read_text())
        return next(g for g in state["gpus"] if g["uuid"] == uuid)["processes"]

    def used_by(self, pid: int, uuid: str) -> int:
        return sum(p["used_mib"] for p in self.processes(uuid) if p["pid"] == pid)

    def free_mib(self, uuid: str) -> int:
        return self.call({"op": "mem_get_info", "uuid": uuid})["free_mib"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Seat:
    """One `vllm serve` process; output goes to a file so nothing blocks."""

    def __init__(self, program, args, env, log_path: Path):
        self.port = int(args[args.index("--port") + 1]) if "--port" in args else None
        self.url = "http://127.0.0.1:%s" % self.port
        self.log_path = log_path
        self.log_file = open(log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, str(program)] + args, env=env,
                                     stdout=self.log_file, stderr=subprocess.STDOUT)

    @property
    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def http(self, path, body=None, method=None, headers=None, timeout=30):
        """(status, parsed JSON or text) of one request."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=dict(
            {"content-type": "application/json"} if data else {}, **(headers or {})))
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw, kind = response.status, response.read(), response.headers.get("content-type", "")
        except urllib.error.HTTPError as exc:
            status, raw, kind = exc.code, exc.read(), exc.headers.get("content-type", "")
        text = raw.decode()
        return status, json.loads(text) if "json" in kind and text else text

    def chat(self, messages, **fields):
        return self.http("/v1/chat/completions", dict({"messages": messages}, **fields))

    def stream(self, messages, **fields):
        """The SSE events of a streamed chat completion (each data: payload, parsed)."""
        status, text = self.chat(messages, stream=True, **fields)
        assert status == 200, text
        events = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]", events[-3:]
        return [json.loads(e) for e in events[:-1]]

    def wait_health(self, status=200, timeout=30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None or status != 200, "seat exited %s:\n%s" % (
                self.proc.returncode, self.output)
            try:
                if self.http("/health", timeout=2)[0] == status:
                    return
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                pass
            time.sleep(0.05)
        raise AssertionError("no /health %d within %ss:\n%s" % (status, timeout, self.output))

    def wait_exit(self, timeout=30) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("seat still running after %ss:\n%s" % (timeout, self.output))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
