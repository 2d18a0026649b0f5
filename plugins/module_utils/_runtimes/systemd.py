# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The systemd runtime: a unit per seat that runs a serve script, which runs the seat's image
(by digest, as a pinned seat should) in the foreground with ``docker run``: systemd sees the
seat exit and restarts it, and the journal holds its log. Three files in the project directory:

- ``seat.env``, the unit's ``EnvironmentFile``: what a window changes and the seat's secrets
  (the same variables as compose's ``.env``, plus ``SEAT_CONTAINER``);
- ``serve.sh``: the ``docker run`` line, every value single-quoted or a ``"${NAME:?}"``
  reference to ``seat.env``, so no model name or argument can break it and no secret is on a
  command line (a secret reaches the container as ``-e NAME``, from the script's environment);
- ``llmfleet-seat-<name>.service``: the unit, linked into systemd with ``systemctl link``.

The unit's policy is the one a vLLM seat needs, not a choice: a worker fault makes vLLM's API
server exit 0, so only ``Restart=always`` brings it back; ``StartLimitIntervalSec=0`` keeps
retrying a seat that keeps failing; ``OOMScoreAdjust=-500`` keeps the kernel's OOM killer off
the seat before the host's other processes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import threading
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._common import systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MANAGED_LABEL, SECRET_VAR_PREFIX
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seat_env import (
    Joined,
    Ref,
    container_state,
    env_text,
    header,
    health_code,
    networks,
    published,
    redact_env,
    secret_names,
    validated,
)

NAME = "systemd"
ENV_FILE = "seat.env"
SERVE_FILE = "serve.sh"
# the seat_files option that sets its variables file's mode (the script and unit keep theirs)
MODE_OPTIONS = {ENV_FILE: "env_mode"}
UNIT_PREFIX = "llmfleet-seat-"
RUNTIME_LABEL = "io.llmfleet.runtime"
# What start() last started, per unit: a digest of its three files.
STAMP_DIR = "/run/llmfleet-seats"
UNIT_DIR = "/etc/systemd/system"
STOP_SECONDS = 30
# How long serve.sh may take to have docker make and start the container.
CREATE_SECONDS = 120
# The unit's ExecStart/EnvironmentFile name the project directory: it must be a plain path.
_PROJECT_DIR_RE = lazy_regex(r"\A/[A-Za-z0-9._/-]+\Z")
_ENV_LINE_RE = lazy_regex(r"^([A-Z_][A-Z0-9_]*)='([^']*)'$", re.MULTILINE)
# Unit commands and daemon reloads from the boot's threads, one at a time.
_SYSTEMCTL_LOCK = threading.Lock()


def unit_name(name):
    return "%s%s.service" % (UNIT_PREFIX, name)


def files(name):
    """The seat's files and the mode each gets when it is created: the variables file may hold
    tokens, so only its owner reads it."""
    return {ENV_FILE: 0o600, SERVE_FILE: 0o755, unit_name(name): 0o644}


def redact(name, text, before=None):
    return redact_env(text, before) if name == ENV_FILE else text


def _word(value):
    """One shell word from a literal, a Ref or a Joined: literals single-quoted, references
    double-quoted so the shell expands them and nothing else."""
    if isinstance(value, Ref):
        return '"%s"' % value.text()
    if isinstance(value, Joined):
        merged = []
        for part in value.parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            elif part != "":
                merged.append(part)
        return "".join(_word(part) for part in merged)
    if isinstance(value, str):
        return shlex.quote(value)
    raise RenderError("cannot render %r (%s) into serve.sh" % (value, type(value).__name__))


def docker_run_args(seat):
    """The ``docker run`` arguments of a seat (Refs mark its variables), as compose.yaml would
    run it."""
    seat = validated(seat)
    engine, launch, name = engine_of(seat), seat["launch"], seat["name"]
    inside = engine.listen_port(seat, Ref)
    devices = [Ref("SEAT_GPU_%d" % index) for index in range(len(seat["gpus"]))]
    args = ["run", "--name", Ref("SEAT_CONTAINER"), "--pull", "never",
            "--label", "%s=%s" % (MANAGED_LABEL, name), "--label", "%s=%s" % (RUNTIME_LABEL, NAME),
            # docker's CSV form of one device list: "device=UUID,UUID"
            "--gpus", Joined(['"device='] + [part for ref in devices for part in (ref, ",")][:-1] + ['"']),
            # on the seat's bind address alone: docker's default would be every interface
            "--publish", published(seat, inside)]
    # networks that exist on the host (seat_spec refuses any other for a systemd seat)
    for network in networks(seat):
        args += ["--network", network["name"]]
    if engine.HOST_IPC:
        args += ["--ipc", "host"]
    for key, value in sorted((launch.get("environment") or {}).items()):
        args += ["--env", "%s=%s" % (key, value)]
    # the value comes from serve.sh's environment (seat.env), never from the command line
    for secret in secret_names(seat):
        args += ["--env", secret]
    # the engine's own: the script's environment (seat.env) holds them under the same names
    for variable, _value in engine.container_environment(seat, Ref):
        args += ["--env", variable]
    for volume in launch.get("volumes") or []:
        args += ["--volume", volume]
    # run by the container's /bin/sh: the code is one single-quoted word there
    code = health_code(seat, inside, quote='"')
    args += ["--health-cmd", Joined(["python3 -c '"] + code.parts + ["'"]),
             "--health-interval", launch.get("health_interval", "15s"), "--health-timeout", "10s",
             "--health-retries", "3", "--health-start-period", launch.get("health_start_period", "20m"),
             Ref("SEAT_IMAGE")]
    return args + (engine.command(seat, Ref) or [])


def render_serve(seat, host=None):
    args = docker_run_args(seat)
    words = [_word(arg) for arg in args]
    exports = ["%s=\"${%s%s:?}\"; export %s" % (secret, SECRET_VAR_PREFIX, secret, secret)
               for secret in secret_names(seat)]
    lines = ["#!/bin/sh", header(seat, host),
             "# %s runs this with %s as its environment: the seat's container"
             % (unit_name(seat["name"]), ENV_FILE),
             "# in the foreground, so systemd sees it exit and the journal gets its log.",
             "set -eu"] + exports
    lines.append("exec docker " + " \\\n  ".join(_join_flags(words)))
    return "\n".join(lines) + "\n"


def _join_flags(words):
    """One flag and its value per line, for a readable diff."""
    lines, index = [], 0
    while index < len(words):
        word = words[index]
        if word.startswith("--") and index + 1 < len(words) and not words[index + 1].startswith("'--"):
            lines.append("%s %s" % (word, words[index + 1]))
            index += 2
        else:
            lines.append(word)
            index += 1
    return lines


def _checked_project_dir(seat, project_dir):
    if not isinstance(project_dir, str) or not _PROJECT_DIR_RE.match(project_dir) or \
            os.path.basename(project_dir.rstrip("/")) != seat.get("name"):
        raise RenderError("seat %s: project directory: expected an absolute plain path (letters, digits, "
                          "'.', '_', '-', '/') ending in the seat's name, got %r" % (seat.get("name"), project_dir))
    return project_dir.rstrip("/")


def render_unit(seat, host, project_dir):
    restart = seat["launch"].get("restart", "always")
    return "\n".join([
        header(seat, host),
        "[Unit]",
        "Description=llmfleet.seats seat %s (%s)" % (seat["name"], seat["engine"]),
        "After=docker.service network-online.target",
        "Wants=network-online.target",
        "# A seat that keeps failing is retried for ever, not given up after five starts.",
        "StartLimitIntervalSec=0",
        "",
        "[Service]",
        "Type=exec",
        "EnvironmentFile=%s/%s" % (project_dir, ENV_FILE),
        "# The container a killed run left behind would keep its name taken.",
        "ExecStartPre=-docker rm --force ${SEAT_CONTAINER}",
        "ExecStart=%s/%s" % (project_dir, SERVE_FILE),
        "ExecStop=docker stop --time %d ${SEAT_CONTAINER}" % STOP_SECONDS,
        "# A worker fault makes vLLM's API server exit 0: on-failure would never fire.",
        "Restart=%s" % restart,
        "RestartSec=10",
        "OOMScoreAdjust=-500",
        "TimeoutStopSec=%d" % (STOP_SECONDS + 30),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]) + "\n"


def render(seat, host=None, secrets=None, project_dir=None):
    """The seat's three files: ``{"seat.env", "serve.sh", "llmfleet-seat-<name>.service"}``."""
    seat = validated(seat)
    project_dir = _checked_project_dir(seat, project_dir)
    container = seat.get("container") or engine_of(seat).container_name(seat["name"])
    return {ENV_FILE: env_text(seat, host, secrets, [("SEAT_CONTAINER", container)]),
            SERVE_FILE: render_serve(seat, host),
            unit_name(seat["name"]): render_unit(seat, host, project_dir)}


def _name(project_dir):
    return project_dir.rstrip("/").rsplit("/", 1)[-1]


def validate(project_dir, staged, _docker):
    """``sh -n`` on the serve script and ``systemd-analyze verify`` on the unit, pointed at the
    staged script and variables (``verify`` checks that what ExecStart names exists)."""
    rc, out, err = systemd.run("sh", ["-n", staged[SERVE_FILE]], timeout=30)
    if rc != 0:
        return "sh -n %s: %s" % (SERVE_FILE, (err or out).strip())
    unit = unit_name(_name(project_dir))
    check_dir = os.path.join(os.path.dirname(staged[unit]), "verify")
    os.makedirs(check_dir)
    with open(staged[unit], encoding="utf-8") as handle:
        text = handle.read()
    staged_dir = os.path.dirname(staged[SERVE_FILE])
    text = text.replace("=%s/" % project_dir.rstrip("/"), "=%s/" % staged_dir)
    with open(os.path.join(check_dir, unit), "w", encoding="utf-8") as handle:
        handle.write(text)
    rc, out, err = systemd.run("systemd-analyze", ["verify", "--man=no", os.path.join(check_dir, unit)], timeout=60)
    return None if rc == 0 else " ".join((err or out).replace(staged_dir, project_dir).split())[-800:]


# -- running a seat ------------------------------------------------------------------------------
def _paths(project_dir):
    name = _name(project_dir)
    return {file_name: os.path.join(project_dir, file_name) for file_name in files(name)}


def _has_files(project_dir):
    return all(os.path.isfile(path) for path in _paths(project_dir).values())


def _digest(project_dir):
    digest = hashlib.sha256()
    for _file_name, path in sorted(_paths(project_dir).items()):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def _stamp_path(unit):
    return os.path.join(STAMP_DIR, unit + ".sha256")


def _stamp(unit):
    try:
        with open(_stamp_path(unit), encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _variables(project_dir):
    with open(os.path.join(project_dir, ENV_FILE), encoding="utf-8") as handle:
        return dict(_ENV_LINE_RE.findall(handle.read()))


def _problem(rc, out, err):
    return None if rc == 0 else " ".join((err or out).split())[-800:] or "exit %d" % rc


def _unit_state(unit):
    return systemd.show(unit, ["ActiveState", "SubState", "Result", "NeedDaemonReload", "NRestarts",
                               "InvocationID", "LoadState"])


def start(project_dir, docker, wait_timeout=None, check_mode=False):
    """Link, enable and (re)start the seat's unit, unless it runs these very files already;
    with ``wait_timeout``, wait until its container is healthy (an exited container fails at
    once)."""
    if not _has_files(project_dir):
        return False, "%s has none of the seat's unit files (%s)" % (project_dir, ", ".join(files(_name(project_dir))))
    unit = unit_name(_name(project_dir))
    digest = _digest(project_dir)
    state = _unit_state(unit)
    current = state.get("ActiveState") == "active" and state.get("NeedDaemonReload") != "yes" \
        and _stamp(unit) == digest
    if check_mode or current:
        return not current, None
    with _SYSTEMCTL_LOCK:
        for args in (["link", os.path.join(project_dir, unit)], ["daemon-reload"], ["enable", unit]):
            problem = _problem(*systemd.systemctl(args))
            if problem:
                return True, "systemctl %s: %s" % (args[0], problem)
        os.makedirs(STAMP_DIR, 0o755, exist_ok=True)
        replace_file(_stamp_path(unit), digest + "\n", 0o644)
        problem = _problem(*systemd.systemctl(["restart", unit], timeout=STOP_SECONDS + 90))
    if problem:
        return True, "systemctl restart %s: %s" % (unit, problem)
    container = _variables(project_dir).get("SEAT_CONTAINER")
    problem = _wait_created(unit, container, docker)
    if problem or not wait_timeout:
        return True, problem
    return True, _wait_healthy(unit, container, docker, wait_timeout)


def _wait_created(unit, container, docker, timeout=CREATE_SECONDS):
    """None once the unit's serve script has its container running (systemd calls the unit
    started when serve.sh is exec'd, before docker has made the container); else why not."""
    deadline = time.monotonic() + timeout
    while True:
        inspect = docker.inspect_one(container) if container else None
        if inspect is not None and inspect.get("State", {}).get("Running"):
            return None
        state = _unit_state(unit)
        if state.get("ActiveState") not in ("active", "activating") or time.monotonic() >= deadline:
            return "%s is %s (%s) and container %s is %s" % (
                unit, state.get("ActiveState"), state.get("SubState"), container,
                (inspect or {}).get("State", {}).get("Status", "not made"))
        time.sleep(0.5)


def _wait_healthy(unit, container, docker, timeout):
    """None once the container's healthcheck says healthy; else why not."""
    deadline = time.monotonic() + timeout
    while True:
        inspect = docker.inspect_one(container) if container else None
        state = (inspect or {}).get("State", {})
        health = state.get("Health", {}).get("Status")
        if health == "healthy":
            return None
        if inspect is not None and not state.get("Running"):
            return "container %s exited (code %s) before it was healthy" % (container, state.get("ExitCode"))
        if health == "unhealthy":
            return "container %s is unhealthy" % container
        if time.monotonic() >= deadline:
            unit_state = _unit_state(unit)
            return "%s is %s (%s), container %s %s after %d s" % (
                unit, unit_state.get("ActiveState"), unit_state.get("SubState"), container,
                "is %s" % health if inspect else "does not exist", timeout)
        time.sleep(2)


def stop(project_dir, _docker, check_mode=False):
    """Stop the seat's unit, keeping its files and its link for a later start."""
    unit = unit_name(_name(project_dir))
    running = _unit_state(unit).get("ActiveState") in ("active", "activating", "reloading")
    if check_mode or not running:
        return running, None
    with _SYSTEMCTL_LOCK:
        return True, _problem(*systemd.systemctl(["stop", unit], timeout=STOP_SECONDS + 90))


def remove(project_dir, docker, check_mode=False):
    """Stop and disable the seat's unit (its link goes) and remove its container."""
    unit = unit_name(_name(project_dir))
    state = _unit_state(unit)
    linked = os.path.islink(os.path.join(UNIT_DIR, unit))
    container = _variables(project_dir).get("SEAT_CONTAINER") if _has_files(project_dir) else None
    exists = bool(container and docker.inspect_one(container))
    changed = linked or exists or state.get("ActiveState") not in ("inactive", None)
    if check_mode or not changed:
        return changed, None
    with _SYSTEMCTL_LOCK:
        problem = _problem(*systemd.systemctl(["disable", "--now", unit], timeout=STOP_SECONDS + 90)) \
            if state.get("LoadState") != "not-found" or linked else None
        if not problem and exists:
            problem = _problem(*docker.run(["rm", "--force", container]))
        if os.path.exists(_stamp_path(unit)):
            os.unlink(_stamp_path(unit))
        systemd.systemctl(["reset-failed", unit])
    return True, problem


def _seat_units():
    rc, out, err = systemd.systemctl(["list-unit-files", "--no-legend", "--no-pager", "--plain",
                                      UNIT_PREFIX + "*.service"], timeout=30)
    if rc not in (0, 1):  # 1: no unit matches
        raise systemd.SystemdError("systemctl list-unit-files failed: %s" % (err or out).strip())
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def states(docker):
    """``{seat: state}`` for every seat unit on the host: its container's state while the unit
    is active, else the unit's (``restarting: auto-restart``, ``exited: unit failed
    (exit-code)``, ``exited: unit inactive``). A host whose PID 1 is not systemd has none."""
    if not systemd.booted():
        return {}
    containers = docker.labelled(MANAGED_LABEL, ["State", "Status"])
    found = {}
    for unit in _seat_units():
        seat = unit[len(UNIT_PREFIX):-len(".service")]
        state = _unit_state(unit)
        active = state.get("ActiveState")
        if active == "active":
            found[seat] = container_state(containers[seat]) if seat in containers else "running"
        elif active in ("activating", "reloading"):
            found[seat] = "restarting: %s" % state.get("SubState")
        elif active == "failed":
            found[seat] = "exited: unit failed (%s)" % state.get("Result")
        else:
            found[seat] = "exited: unit %s" % active
    return found


def log(seat, _docker):
    """The journal of the seat's unit since its last start: what serve.sh and the container
    wrote."""
    invocation = _unit_state(unit_name(seat["name"])).get("InvocationID")
    return systemd.journal(invocation) if invocation else ""
