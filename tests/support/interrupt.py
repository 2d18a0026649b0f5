"""SIGTERM ends a test run the way Ctrl-C does: pytest then tears down every fixture (the twins,
engines and proxies the tests started), where SIGTERM's default would leave them behind.
`timeout`, CI runners and `scripts/test` stop a run with SIGTERM. tests/conftest.py uses this
hook; a pytest of its own loads it with ``-p support.interrupt``."""

from __future__ import annotations

import signal


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt("SIGTERM")


def pytest_configure(config):  # noqa: ARG001 (pytest's hook signature)
    signal.signal(signal.SIGTERM, _interrupt)
