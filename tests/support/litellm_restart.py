"""Restart a test's LiteLLM proxy as an operator's ``systemctl restart litellm`` would: stop the
process its pid file names, start the same command again in its own session, record the new pid,
and return at once (the window waits for the gateway to answer, as it would for a service).

    python3 litellm_restart.py STATE.json     # {"pidfile", "argv", "log", "env"}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
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
    with open(state["log"], "a") as log:
        proc = subprocess.Popen(state["argv"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, **state["env"]))
    with open(state["pidfile"], "w", encoding="ascii") as handle:
        handle.write(str(proc.pid))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
