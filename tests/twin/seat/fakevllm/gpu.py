"""The seat's side of the simulated GPU driver (CONTRIBUTING.md, "The simulated GPU driver").

A unix stream socket, `$FAKEGPU_SOCKET` else /run/fakegpu/gpu.sock, one JSON object per line
each way. The driver knows this process by its PID and frees what this connection holds when it
closes, so a process that dies gives its memory back, as on a real GPU. Devices are picked from
NVIDIA_VISIBLE_DEVICES (UUIDs or indices, comma-separated, or `all`), in that order, as CUDA
numbers them.
"""

from __future__ import annotations

import json
import os
import socket
import threading

MIB = 2 ** 20
DEFAULT_SOCKET = "/run/fakegpu/gpu.sock"


class NoDevice(Exception):
    """No driver, or no device visible to this process."""


class OutOfMemory(Exception):
    def __init__(self, requested_mib: int, free_mib: int):
        super().__init__("out of memory")
        self.requested_mib = requested_mib
        self.free_mib = free_mib


class DriverError(Exception):
    """Any other refusal (a lost GPU: "GPU has fallen off the bus")."""


def socket_path() -> str:
    return os.environ.get("FAKEGPU_SOCKET") or DEFAULT_SOCKET


class Driver:
    """One connection to the driver; thread-safe."""

    def __init__(self):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(socket_path())
        except OSError as exc:
            self._sock.close()
            raise NoDevice("no GPU driver at %s: %s" % (socket_path(), exc))
        self._reader = self._sock.makefile("rb")
        self._lock = threading.Lock()

    def call(self, request: dict) -> dict:
        with self._lock:
            try:
                self._sock.sendall(json.dumps(request).encode() + b"\n")
                line = self._reader.readline()
            except OSError as exc:
                raise DriverError("lost the GPU driver: %s" % exc)
        if not line:
            raise DriverError("lost the GPU driver: connection closed")
        return json.loads(line)

    def devices(self) -> list:
        """The GPUs this process sees, in CUDA order."""
        gpus = self.call({"op": "list"}).get("gpus", [])
        visible = os.environ.get("NVIDIA_VISIBLE_DEVICES")
        if visible is None or visible.strip() == "all":
            return gpus
        chosen = []
        for token in (t.strip() for t in visible.split(",")):
            if token in ("", "none", "void"):
                continue
            match = [g for g in gpus if token in (g["uuid"], str(g["index"]))]
            chosen += [g for g in match if g not in chosen]
        return chosen

    def mem_get_info(self, uuid: str):
        """(free, total) in bytes, as cudaMemGetInfo."""
        reply = self.call({"op": "mem_get_info", "uuid": uuid})
        if not reply.get("ok"):
            raise DriverError(reply.get("error", "driver error"))
        return reply["free_mib"] * MIB, reply["total_mib"] * MIB

    def alloc(self, uuid: str, mib: int, tag: str) -> None:
        if mib <= 0:
            return
        reply = self.call({"op": "alloc", "uuid": uuid, "mib": int(mib), "tag": tag})
        if reply.get("ok"):
            return
        if reply.get("error") == "out of memory":
            raise OutOfMemory(mib, reply.get("free_mib", 0))
        raise DriverError(reply.get("error", "driver error"))

    def free(self, uuid: str, mib: int) -> None:
        if mib > 0:
            reply = self.call({"op": "free", "uuid": uuid, "mib": int(mib)})
            if not reply.get("ok"):
                raise DriverError(reply.get("error", "driver error"))

    def pin(self, mib: int) -> None:
        """Pinned host memory (cudaHostAlloc): the host's RAM, held until this connection
        closes. A pin the host cannot hold kills it (and this process with it)."""
        if mib > 0:
            reply = self.call({"op": "pin", "mib": int(mib)})
            if not reply.get("ok"):
                raise DriverError(reply.get("error", "driver error"))

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def mib_of(num_bytes: int) -> int:
    return -(-num_bytes // MIB)
