"""Restart a test's LiteLLM proxy as an operator's ``systemctl restart litellm`` would: stop the
process its pid file names, start the same command again in its own session (through the test
run's launcher, tests/support/litellm_launcher.py), record the new pid, and return at once (the
window waits for the gateway to answer, as it would for a service).

    python3 litellm_restart.py STATE.json     # {"pidfile", "argv", "log", "launcher"}
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time


def stopped(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie nobody reaped yet has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def ask(launcher: str, request: dict) -> dict:
    """The launcher's answer to one request."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(launcher)
        with connection.makefile("rwb") as stream:
            stream.write(json.dumps(request).encode() + b"\n")
            stream.flush()
            return json.loads(stream.readline())


def main(state_path: str) -> int:
    with open(state_path, encoding="utf-8") as handle:
        state = json.load(handle)
    with open(state["pidfile"], encoding="ascii") as handle:
        pid = int(handle.read())
    try:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while not stopped(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not stopped(pid):
            os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, FileNotFoundError):
        pass
    pid = ask(state["launcher"], {"argv": state["argv"], "log": state["log"]})["pid"]
    with open(state["pidfile"], "w", encoding="ascii") as handle:
        handle.write(str(pid))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
