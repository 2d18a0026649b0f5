"""Starts the tests' LiteLLM proxies with their imports already done.

A proxy's start is about 6 CPU-seconds of imports (LiteLLM's types and routes), and a test run
starts one more than a dozen times on two cores. This program, run by the LiteLLM venv's python,
imports the proxy once; then, for each request on its Unix socket, it forks a child that runs
the ``litellm`` command's own entry point with the request's arguments, in a session of its own
with its output appended to the request's log: the proxy the command starts, ready in under a
second. It reaps its children, says how each ended, and ends with the process that started it.

    python litellm_launcher.py SOCKET PARENT_PID
    {"argv": [...], "log": PATH}  ->  {"pid": N}         a proxy started
    {"poll": N}                   ->  {"returncode": R}  null while N runs

The environment its proxies run with is the launcher's own (LiteLLM reads some of it at import).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import traceback

from litellm.proxy import proxy_cli, proxy_server  # noqa: F401  # pylint: disable=unused-import  # imported once, for every proxy

PR_SET_PDEATHSIG = 1
ended = {}  # pid -> its exit status as subprocess reports one (-N: killed by signal N)


def reap(_signum, _frame) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ended[pid] = os.waitstatus_to_exitcode(status)


def run_proxy(listener: socket.socket, connection: socket.socket, request: dict) -> None:
    """The child: the ``litellm`` command with the request's arguments; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        listener.close()
        connection.close()
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        sys.argv = ["litellm"] + request["argv"]
        proxy_cli.run_server.main(args=request["argv"], prog_name="litellm")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # pylint: disable=broad-except  # the proxy's own failure, for its log
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # pylint: disable=protected-access


def answer(listener: socket.socket, connection: socket.socket) -> None:
    with connection.makefile("rwb") as stream:
        request = json.loads(stream.readline())
        if "poll" in request:
            reply = {"returncode": ended.get(request["poll"])}
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                run_proxy(listener, connection, request)
            reply = {"pid": pid}
        stream.write(json.dumps(reply).encode() + b"\n")


def main(path: str, parent: int) -> int:
    # ends with the test run that started it (its proxies run on until the tests stop them)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the line above
        return 1
    signal.signal(signal.SIGCHLD, reap)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    while True:
        connection = listener.accept()[0]
        with connection:
            answer(listener, connection)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
