# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The one way the collection reaches systemd: ``systemctl``, ``journalctl`` and
``systemd-analyze`` on the host, run through ``command``: argument lists, never shell lines.
Used by the systemd runtime."""

from __future__ import annotations

import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import CommandError, CommandTimeout
from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import run as run_command

# sd_booted(3): the directory exists only while systemd is PID 1.
BOOTED_MARK = "/run/systemd/system"


class SystemdError(CommandError):
    """A systemd command could not be run, or did not answer; the message says which and why."""


def booted():
    """Whether this host's PID 1 is systemd."""
    return os.path.isdir(BOOTED_MARK)


def run(command, args, timeout=120):
    """``(rc, stdout, stderr)`` of ``COMMAND ARGS`` (systemctl, journalctl, systemd-analyze)."""
    try:
        return run_command([command] + list(args), timeout)
    except CommandTimeout as exc:
        raise SystemdError(str(exc)) from None
    except CommandError as exc:
        raise SystemdError("%s (is this a systemd host?)" % exc) from None


def systemctl(args, timeout=120):
    return run("systemctl", args, timeout)


def show(unit, properties):
    """``{property: value}`` of one unit (``systemctl show``)."""
    rc, out, err = systemctl(["show", "--property", ",".join(properties), "--", unit], timeout=30)
    if rc != 0:
        raise SystemdError("systemctl show %s failed: %s" % (unit, (err or out).strip()))
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def journal(invocation, timeout=60):
    """The journal of one run of a unit (its InvocationID), as the service wrote it."""
    rc, out, err = run("journalctl", ["--no-pager", "--output", "cat", "_SYSTEMD_INVOCATION_ID=" + invocation],
                       timeout)
    if rc != 0:
        raise SystemdError("journalctl failed (rc=%d): %s" % (rc, (err or out).strip()[-500:]))
    return out
