"""A command run to its end in a process group of its own: when the test gives up on it (its
timeout, or the test run itself being stopped), the whole group gets SIGTERM, which the
command's own traps clean up on (scripts/demo takes its twin down), then SIGKILL after a grace
period. subprocess.run's timeout kills only the direct child and orphans the rest."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT


def run_in_group(cmd: list, timeout: float, grace: float = 180, **kwargs) -> subprocess.CompletedProcess:
    """Like ``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)``."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            stop_group(proc, grace)
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the process group led by ``proc``, SIGKILL it if it outlives ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.communicate(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def bootstrapped(script: str, needed_by: str, timeout: float = 1800) -> Path:
    """The path ``scripts/<script>`` prints last: what it built once (it is instant after, and
    waits for a build under way); the test fails with its output when it cannot build."""
    proc = subprocess.run([str(REPO_ROOT / "scripts" / script)], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        pytest.fail("scripts/%s failed; %s:\n%s%s" % (script, needed_by, proc.stdout[-2000:], proc.stderr[-2000:]))
    return Path(proc.stdout.strip().splitlines()[-1])
