"""What a test does when it cannot get what it needs (CONTRIBUTING.md, Tests)."""

from __future__ import annotations

import os
import shutil

import pytest


def need(condition: bool, reason: str) -> None:
    """Fail with ``reason`` in CI (``CI=1``), where everything must be present; skip elsewhere."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail("CI cannot run this test: " + reason, pytrace=False)
    pytest.skip(reason)


def need_root_and(*programs: str) -> None:
    """Root (a private dockerd, reading every /proc entry) and these programs on PATH."""
    need(os.geteuid() == 0, "needs root (run as root, as CI does)")
    missing = [program for program in programs if shutil.which(program) is None]
    need(not missing, "missing %s: run `sudo scripts/install-system-deps`" % ", ".join(missing))
