"""The simulated driver's cards in DCGM exporter's exposition (docs/calibration.md): what an
operator's monitoring scrapes from a real GPU host, served from the driver's state.json.

Each GPU's framebuffer in MiB, as dcgm-exporter names and labels it:
DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE and DCGM_FI_DEV_FB_RESERVED, labelled gpu (the index),
UUID, device (nvidiaN), modelName and Hostname. Used is what the driver's holders and the
background hold; free is the rest after the reserved memory.

Run: python3 dcgm_exporter.py --state state.json --port N [--hostname NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRICS = (("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
           ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
           ("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB)."))


def exposition(state: dict, hostname: str) -> str:
    lines = []
    for name, help_text in METRICS:
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name]
        for gpu in state["gpus"]:
            used = gpu["background_used_mib"] + sum(p["used_mib"] for p in gpu.get("processes") or [])
            reserved = gpu["memory_reserved_mib"]
            value = {"DCGM_FI_DEV_FB_USED": used, "DCGM_FI_DEV_FB_RESERVED": reserved,
                     "DCGM_FI_DEV_FB_FREE": gpu["memory_total_mib"] - reserved - used}[name]
            lines.append('%s{gpu="%d",UUID="%s",device="nvidia%d",modelName="%s",Hostname="%s"} %d' % (
                name, gpu["index"], gpu["uuid"], gpu["index"], gpu["name"], hostname, value))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--state", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hostname", default="twin")
    args = parser.parse_args(argv)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args):
            pass

        def do_GET(self):
            if self.path != "/metrics":
                self.send_error(404)
                return
            with open(args.state, encoding="utf-8") as handle:
                body = exposition(json.load(handle), args.hostname).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print("dcgm_exporter: state %s on port %d" % (args.state, args.port), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
