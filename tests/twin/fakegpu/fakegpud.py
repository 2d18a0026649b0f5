"""The simulated GPU driver of one twin host (CONTRIBUTING.md, "The simulated GPU driver").

It owns the host's state.json and answers seats on a unix socket, one JSON object per line each
way. Like the real driver it sees host PIDs (SO_PEERCRED, whatever PID namespace the caller is
in) and frees everything a connection allocated when that connection closes, so a seat that
crashes or is killed gives its memory back. After every change it rewrites state.json
atomically; the fake NVML and nvidia-smi only read that file.

Requests (contract):          {"op": "list"} | {"op": "mem_get_info", "uuid": U}
                              {"op": "alloc", "uuid": U, "mib": N, "tag": T} | {"op": "free", "uuid": U, "mib": N}
Twin extensions (docs/twin.md): {"op": "set_background", "uuid": U, "mib": N}   memory nobody owns
                              {"op": "set_faults", "faults": {...}}            state.json's faults
Host memory (the twin host's RAM): {"op": "pin", "mib": N} | {"op": "host_info"}

Pinned host memory is the host's, not a GPU's: a seat that pins a pool (cudaHostAlloc) takes it
from the host's RAM (state.json's "host"), and gets it back when its connection closes. The
driver keeps the host's /proc/meminfo (--meminfo, bind-mounted over it inside the host) at
MemTotal = the host's RAM and MemAvailable = what nobody pinned, less what the system uses. A pin
that the RAM cannot hold takes the host down as the kernel's OOM killer does: every process
holding the driver is killed.

The faults the driver itself acts on: "gpu_lost": [index, ...] refuses every request on those
GPUs; "slow_context_s": {"index": seconds} makes creating a CUDA context there (an alloc tagged
"cuda_context") take that long, as a card that just came back from a reset does; the wait ends
early when the faults change.

Run: python3 fakegpud.py --initial gpus.json [--state PATH] [--socket PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import time

MAX_LINE = 65536
OUT_OF_MEMORY = "out of memory"
# What the real driver reports once a card has dropped out (Xid 79).
GPU_LOST = "GPU has fallen off the bus"
# The tag a seat's first allocation on a GPU carries: its CUDA context.
CONTEXT_TAG = "cuda_context"
# What the host's own system (kernel, daemons) keeps of its RAM.
SYSTEM_MIB = 2048
HOST_OOM = "host out of memory: pinned memory exhausted the host's RAM"


class Driver:
    """The GPUs of one host and who holds what on them. Thread-safe; every change is written."""

    def __init__(self, state: dict, state_path: str, meminfo_path: str | None = None):
        self._state = state
        self._state_path = state_path
        self._meminfo_path = meminfo_path
        self._state.setdefault("host", {"memory_mib": None, "pinned_mib": 0})
        self._gpus = {gpu["uuid"]: gpu for gpu in state["gpus"]}
        self._lock = threading.Lock()
        self._faults_changed = threading.Condition(self._lock)
        # connection id -> {"pid": host pid, "name": process name, "mib": {uuid: MiB}}
        self._holders: dict = {}
        self._write_locked()

    # -- bookkeeping (call with the lock held) --
    def _used_mib(self, uuid: str) -> int:
        gpu = self._gpus[uuid]
        return gpu["background_used_mib"] + sum(h["mib"].get(uuid, 0)
                                                for h in self._holders.values())

    def _free_mib(self, uuid: str) -> int:
        gpu = self._gpus[uuid]
        return gpu["memory_total_mib"] - gpu["memory_reserved_mib"] - self._used_mib(uuid)

    def _write_locked(self) -> None:
        for uuid, gpu in self._gpus.items():
            per_pid: dict = {}
            for holder in self._holders.values():
                mib = holder["mib"].get(uuid, 0)
                if mib:
                    entry = per_pid.setdefault(holder["pid"], {"pid": holder["pid"], "used_mib": 0,
                                                               "name": holder["name"]})
                    entry["used_mib"] += mib
            gpu["processes"] = sorted(per_pid.values(), key=lambda p: p["pid"])
        self._state["host"]["pinned_mib"] = sum(h["pinned_mib"] for h in self._holders.values())
        self._write_meminfo()
        tmp = "%s.%d.tmp" % (self._state_path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(self._state, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, self._state_path)

    def _write_meminfo(self) -> None:
        """/proc/meminfo's figures for the host, written in place (a bind mount keeps the inode)."""
        total = self._state["host"]["memory_mib"]
        if not self._meminfo_path or not total:
            return
        available = max(total - SYSTEM_MIB - self._state["host"]["pinned_mib"], 0)
        text = "".join("%-16s%8d kB\n" % (key + ":", mib * 1024) for key, mib in (
            ("MemTotal", total), ("MemFree", available), ("MemAvailable", available), ("Buffers", 0),
            ("Cached", 0), ("SwapTotal", 0), ("SwapFree", 0), ("Mlocked", self._state["host"]["pinned_mib"])))
        with open(self._meminfo_path, "r+" if os.path.exists(self._meminfo_path) else "w",
                  encoding="ascii") as handle:
            handle.truncate(0)
            handle.write(text)

    def _lost(self, uuid: str) -> bool:
        return self._gpus[uuid]["index"] in self._state["faults"].get("gpu_lost", [])

    # -- the protocol --
    def connect(self, conn_id: int, pid: int) -> None:
        with self._lock:
            self._holders[conn_id] = {"pid": pid, "name": process_name(pid), "mib": {}, "pinned_mib": 0}

    def disconnect(self, conn_id: int) -> None:
        with self._lock:
            holder = self._holders.pop(conn_id, None)
            if holder and (any(holder["mib"].values()) or holder["pinned_mib"]):
                self._write_locked()

    def handle(self, conn_id: int, request: object) -> dict:
        if not isinstance(request, dict):
            return {"ok": False, "error": "bad request: expected a JSON object"}
        op = request.get("op")
        handler = {"list": self._list, "mem_get_info": self._mem_get_info, "alloc": self._alloc,
                   "free": self._free, "set_background": self._set_background,
                   "set_faults": self._set_faults, "pin": self._pin, "host_info": self._host_info}.get(op)
        if handler is None:
            return {"ok": False, "error": "unknown op %r" % (op,)}
        with self._lock:
            try:
                if op == "alloc" and request.get("tag") == CONTEXT_TAG:
                    self._wait_for_slow_context(request)
                return handler(conn_id, request)
            except _Refused as refusal:
                return refusal.reply

    def _wait_for_slow_context(self, request: dict) -> None:
        """Hold a context creation for the GPU's slow_context_s (the lock is released meanwhile)."""
        started = time.monotonic()
        while True:
            index = str(self._gpus[self._device(request)]["index"])
            delay = self._state["faults"].get("slow_context_s", {}).get(index, 0)
            remaining = started + delay - time.monotonic()
            if remaining <= 0:
                return
            self._faults_changed.wait(remaining)

    def _device(self, request: dict) -> str:
        uuid = request.get("uuid")
        if uuid not in self._gpus:
            raise _Refused("unknown device %r (expected one of: %s)"
                           % (uuid, ", ".join(self._gpus)))
        if self._lost(uuid):
            raise _Refused(GPU_LOST)
        return uuid

    @staticmethod
    def _mib(request: dict, minimum: int = 1) -> int:
        mib = request.get("mib")
        if not (isinstance(mib, int) and not isinstance(mib, bool) and mib >= minimum):
            raise _Refused("bad request: mib must be an integer >= %d" % minimum)
        return mib

    def _list(self, _conn_id: int, _request: dict) -> dict:
        return {"ok": True, "gpus": [
            {"index": g["index"], "uuid": u, "name": g["name"], "total_mib": g["memory_total_mib"],
             "free_mib": self._free_mib(u)}
            for u, g in self._gpus.items() if not self._lost(u)]}

    def _mem_get_info(self, _conn_id: int, request: dict) -> dict:
        uuid = self._device(request)
        return {"ok": True, "free_mib": self._free_mib(uuid),
                "total_mib": self._gpus[uuid]["memory_total_mib"]}

    def _alloc(self, conn_id: int, request: dict) -> dict:
        uuid, mib = self._device(request), self._mib(request)
        free = self._free_mib(uuid)
        if mib > free:
            raise _Refused(OUT_OF_MEMORY, free_mib=free)
        held = self._holders[conn_id]["mib"]
        held[uuid] = held.get(uuid, 0) + mib
        self._write_locked()
        return {"ok": True, "used_mib": held[uuid]}

    def _free(self, conn_id: int, request: dict) -> dict:
        uuid, mib = self._device(request), self._mib(request)
        held = self._holders[conn_id]["mib"]
        if mib > held.get(uuid, 0):
            raise _Refused("cannot free %d MiB: this connection holds %d MiB on %s"
                           % (mib, held.get(uuid, 0), uuid))
        held[uuid] -= mib
        self._write_locked()
        return {"ok": True, "used_mib": held[uuid]}

    def _host_info(self, _conn_id: int, _request: dict) -> dict:
        return {"ok": True, **self._state["host"]}

    def _pin(self, conn_id: int, request: dict) -> dict:
        mib = self._mib(request)
        total = self._state["host"]["memory_mib"]
        if total and self._state["host"]["pinned_mib"] + mib > total - SYSTEM_MIB:
            victims = sorted({h["pid"] for h in self._holders.values()})
            print("fakegpud: %s (%d MiB asked, %d of %d MiB pinned): killing %s"
                  % (HOST_OOM, mib, self._state["host"]["pinned_mib"], total,
                     ", ".join("pid %d" % pid for pid in victims)), flush=True)
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            raise _Refused(HOST_OOM)
        self._holders[conn_id]["pinned_mib"] += mib
        self._write_locked()
        return {"ok": True, "pinned_mib": self._holders[conn_id]["pinned_mib"]}

    def _set_background(self, _conn_id: int, request: dict) -> dict:
        uuid, mib = self._device(request), self._mib(request, minimum=0)
        gpu = self._gpus[uuid]
        if mib > self._free_mib(uuid) + gpu["background_used_mib"]:
            raise _Refused(OUT_OF_MEMORY, free_mib=self._free_mib(uuid))
        gpu["background_used_mib"] = mib
        self._write_locked()
        return {"ok": True, "free_mib": self._free_mib(uuid)}

    def _set_faults(self, _conn_id: int, request: dict) -> dict:
        faults = request.get("faults")
        if not isinstance(faults, dict):
            raise _Refused("bad request: faults must be an object")
        slow = faults.get("slow_context_s", {})
        if not (isinstance(slow, dict) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in slow.values())):
            raise _Refused('bad request: slow_context_s must be {"<GPU index>": seconds >= 0}')
        self._state["faults"] = faults
        self._write_locked()
        self._faults_changed.notify_all()
        return {"ok": True}


class _Refused(Exception):
    """A request the driver turns down; `reply` is the answer the caller gets."""

    def __init__(self, error: str, **details):
        super().__init__(error)
        self.reply = {"ok": False, "error": error, **details}


def process_name(pid: int) -> str:
    """What nvidia-smi shows as the process name: the program the process runs."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv0 = handle.read().split(b"\0", 1)[0].decode(errors="replace")
        if argv0:
            return argv0
        with open("/proc/%d/comm" % pid, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "[unknown]"


def peer_pid(sock: socket.socket) -> int:
    """The caller's PID as this (host) PID namespace sees it, as the real driver reports it."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


class _Connection(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        driver: Driver = self.server.driver
        conn_id = id(self)
        driver.connect(conn_id, peer_pid(self.request))
        try:
            while True:
                line = self.rfile.readline(MAX_LINE)
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    reply = driver.handle(conn_id, json.loads(line))
                except ValueError as exc:
                    reply = {"ok": False, "error": "bad request: %s" % exc}
                self.wfile.write(json.dumps(reply).encode() + b"\n")
        except (ConnectionError, OSError):
            return
        finally:
            driver.disconnect(conn_id)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--initial", required=True,
                        help="the host's state.json without processes (the twin writes it)")
    parser.add_argument("--state", default=os.environ.get("FAKE_GPU_STATE",
                                                          "/run/fakegpu/state.json"))
    parser.add_argument("--socket", default=os.environ.get("FAKEGPU_SOCKET",
                                                           "/run/fakegpu/gpu.sock"))
    parser.add_argument("--meminfo", help="the host's /proc/meminfo to keep (bind-mounted over it)")
    args = parser.parse_args(argv)
    with open(args.initial, encoding="utf-8") as handle:
        state = json.load(handle)
    for path in (args.state, args.socket):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    driver = Driver(state, args.state, args.meminfo)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    # Listening under a temporary name, then renamed: whoever sees the socket can connect to it.
    listening = "%s.%d" % (args.socket, os.getpid())
    server = _Server(listening, _Connection)
    server.driver = driver
    # Seats in containers may run as any user; the real device nodes are world-usable too.
    os.chmod(listening, 0o666)
    os.rename(listening, args.socket)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print("fakegpud: %d GPU(s), socket %s, state %s"
          % (len(state["gpus"]), args.socket, args.state), flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        os.unlink(args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
