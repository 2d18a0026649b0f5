# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The one way the collection runs a program on a host: an argument list, never a shell line,
nothing on its standard input, and a bound on how long it may take. A program that cannot be
started or does not finish in time becomes one CommandError line naming it and why, never a
traceback. ``docker`` and ``systemd`` say what their tools' answers mean; the cards read
nvidia-smi through it."""

from __future__ import annotations

import os
import select
import subprocess
import time

# How long a killed program gets to go away. One stuck in the kernel (a wedged GPU driver
# holds nvidia-smi in uninterruptible sleep) cannot be killed: it is left behind rather than
# waited on forever.
KILL_GRACE_S = 5


class CommandError(Exception):
    """A program could not be started or did not finish in time; the message names it and why."""


class CommandTimeout(CommandError):
    """A program ran past its time and was killed."""


def _text(data):
    return (data or b"").decode("utf-8", errors="replace")


def name_of(argv):
    """How a message names a command: the program and its first argument without a value
    (``docker logs``, ``nvidia-smi --query-gpu``)."""
    return " ".join([os.path.basename(argv[0])] + [arg.split("=", 1)[0] for arg in argv[1:2]])


def _start(argv, env, stderr):
    try:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    except OSError as exc:
        raise CommandError("cannot run %s: %s" % (argv[0], exc.strerror or exc)) from None


def _stop(proc):
    """Kill ``proc`` and reap it, unless the kernel will not let it go."""
    proc.kill()
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (proc.stdout, proc.stderr):
        if pipe:
            pipe.close()


def _timed_out(argv, timeout, proc):
    stuck = "" if proc.returncode is not None else "; it did not exit when killed (stuck in the kernel?)"
    return CommandTimeout("%s did not finish within %ss and was killed%s" % (name_of(argv), timeout, stuck))


def run(argv, timeout, env=None, merge_output=False):
    """``(rc, stdout, stderr)`` of the program ``argv`` (text, undecodable bytes replaced),
    killed after ``timeout`` seconds. ``env`` replaces the environment when given. With
    ``merge_output`` stderr is folded into stdout in the order it was written (stderr is "").
    CommandError when it cannot be started, CommandTimeout when it ran too long."""
    argv = [str(arg) for arg in argv]
    proc = _start(argv, env, subprocess.STDOUT if merge_output else subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise _timed_out(argv, timeout, proc) from None
    except BaseException:
        _stop(proc)
        raise
    return proc.returncode, _text(out), _text(err)


def head(argv, limit, timeout, env=None):
    """``(rc, output)``: the first ``limit`` bytes (at most) of what ``argv`` writes, stdout and
    stderr in the order it wrote them, read for at most ``timeout`` seconds; the program is
    then killed, and the rest is never read however long it is. ``rc`` is its exit status, or
    None when it was stopped once enough was read or the time was up. CommandError when it
    cannot be started."""
    argv = [str(arg) for arg in argv]
    proc = _start(argv, env, subprocess.STDOUT)
    chunks, size, deadline = [], 0, time.monotonic() + timeout
    try:
        while size < limit:
            ready, _w, _x = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break  # what came within the time is what there is to read
            chunk = os.read(proc.stdout.fileno(), min(1 << 16, limit - size))
            if not chunk:  # it closed its output: let it exit with its own status
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        stopped = proc.poll() is None
        if stopped:
            _stop(proc)
        else:
            proc.stdout.close()
    return (None if stopped else proc.returncode), _text(b"".join(chunks))
