"""Waiting on an event a test can observe (a seat's state, a line in a log, the stand-in's own
state) instead of sleeping for a time the machine may not keep."""

from __future__ import annotations

import time

# A container turns healthy on its healthcheck's interval (the collection's 15 s on the twin's
# fleets): a wait on docker's verdict that asked it ten times a second would only take CPU from
# the lanes beside it, and once a second loses at most a second of the interval.
DOCKER_HEALTH_POLL_S = 1.0
# A wait on what docker says of a container (recreated, running, restarted) asks it through a
# docker process and the host's dockerd, 15 ms of CPU or more each time: twice a second, for
# states that last seconds (a stand-in's boot delay, systemd's restart).
DOCKER_STATE_POLL_S = 0.5


def wait_for(condition, timeout=120, what="condition", interval=0.1):
    """Return once ``condition()`` is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(interval)
