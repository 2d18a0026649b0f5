"""Waiting on an event a test can observe (a seat's state, a line in a log, the stand-in's own
state) instead of sleeping for a time the machine may not keep."""

from __future__ import annotations

import time


def wait_for(condition, timeout=120, what="condition", interval=0.1):
    """Return once ``condition()`` is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(interval)
