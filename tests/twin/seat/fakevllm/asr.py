"""`asr-seat`: a fixed-size GPU tenant, like the fleet's parakeet ASR seat.

It takes its whole memory cap on one GPU at start (NVIDIA_VISIBLE_DEVICES, through the simulated
driver), then serves GET /health (503 while loading, 200 after) and an OpenAI-style
POST /v1/audio/transcriptions that answers with a trivial transcript. A cap that does not fit
fails as torch does, and the process exits 1; memory is released when it exits.

    asr-seat [--host H] [--port 8000] [--memory 3840MiB] [--model nvidia/parakeet-tdt-0.6b-v2]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import signal
import sys
import threading
import time

from .engine import TORCH_OOM, torch_size
from .gpu import MIB, Driver, NoDevice, OutOfMemory
from .logs import stderr, stdout

# The units the collection's inventories use for memory_cap_bytes (binary and SI).
_UNITS = {"": 1, "b": 1, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9}


def memory_size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError("expected bytes or a size like 3840MiB, got %r" % text)
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def log(message: str) -> None:
    stdout("[NeMo I %s asr_seat:%d] %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), os.getpid(), message))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args):
        pass

    def _send(self, status: int, body=None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        if body is not None:
            self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(data)
        client = "%s:%d" % self.client_address[:2]
        stdout('INFO:     %s - "%s %s HTTP/1.1" %d' % (client, self.command, self.path, status))

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/health":
            self._send(200 if self.server.ready else 503, {"status": "ok" if self.server.ready else "loading"})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.split("?", 1)[0] != "/v1/audio/transcriptions":
            self._send(404, {"detail": "Not Found"})
        elif not self.server.ready:
            self._send(503, {"detail": "model is loading"})
        elif not body:
            self._send(400, {"detail": "expected an audio file (multipart field 'file')"})
        else:
            self._send(200, {"text": "transcribed %d bytes of audio with %s" % (len(body), self.server.model)})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="asr-seat")
    parser.add_argument("--host", default="")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--memory", type=memory_size, default=memory_size(os.environ.get("FAKE_ASR_MEMORY", "3840MiB")))
    parser.add_argument("--model", default="nvidia/parakeet-tdt-0.6b-v2")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    httpd = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    httpd.daemon_threads = True
    httpd.ready = False
    httpd.model = args.model
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    log("Loading %s (%s on the GPU)" % (args.model, torch_size(args.memory)))
    try:
        driver = Driver()
        devices = driver.devices()
        if not devices:
            raise NoDevice("no GPU visible")
        device = devices[0]
        driver.alloc(device["uuid"], -(-args.memory // MIB), "asr")
    except NoDevice:
        stderr("RuntimeError: No CUDA GPUs are available")
        return 1
    except OutOfMemory as oom:
        stderr(TORCH_OOM % (torch_size(args.memory), 0, torch_size(device["total_mib"] * MIB),
                            torch_size(oom.free_mib * MIB), "0 bytes", "0 bytes", "0 bytes"))
        return 1
    time.sleep(float(os.environ.get("FAKE_ASR_BOOT_DELAY_S") or 0))
    httpd.ready = True
    log("Model loaded; serving on port %d" % args.port)
    stop.wait()
    httpd.shutdown()
    driver.close()
    return 0
