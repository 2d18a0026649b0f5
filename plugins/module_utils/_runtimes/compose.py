# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The compose runtime: one docker compose project per seat, a ``.env`` with the numbers a
maintenance window changes and a ``compose.yaml`` with the structure that refers to them. What
the seat runs (its command, its variables, the port it listens on) is its engine's.

Rendering is deterministic (no timestamps): the same seat renders to the same bytes, so a
second run changes nothing. Every value is quoted, so no model name or argument can break
either file: ``.env`` values are single-quoted (literal for compose), compose strings are
double-quoted with ``$`` escaped, and the only interpolations are the ``${SEAT_*:?}``
references this module writes itself. The seat is started, stopped and removed with
``docker compose`` through the Docker runner.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    CONTROL_RE,
    HEALTH_PATH_EXPECTED,
    HEALTH_PATH_RE,
    MANAGED_LABEL,
    REDACTED,
    SECRET_VAR_PREFIX,
    SEAT_NAME_EXPECTED,
    SEAT_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError

NAME = "compose"
ENV_FILE = ".env"
COMPOSE_FILE = "compose.yaml"
FILES = (ENV_FILE, COMPOSE_FILE)
# The .env holds what a window changes, and may hold tokens: only its owner reads it.
MODES = {ENV_FILE: 0o600, COMPOSE_FILE: 0o644}
PROJECT_LABEL = "com.docker.compose.project"
# docker ps's Status ends in the healthcheck's verdict, when the container has one:
# "Up 5 seconds (health: starting)", "Up 2 minutes (healthy)", "Up 1 second (unhealthy)".
_HEALTH = re.compile(r"\((healthy|unhealthy|health: starting)\)\s*$")

_PLAIN_KEY_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_.-]*\Z")


class Ref:
    """A reference to a ``.env`` variable inside compose.yaml: ``${NAME:?}``, so compose refuses
    to start ("required variable NAME is missing a value") rather than run with an empty one."""

    def __init__(self, name):
        self.name = name

    def text(self):
        return "${%s:?}" % self.name


def _fail(seat, field, expected, got):
    raise RenderError("seat %s: %s: expected %s, got %r" % (seat.get("name", "?"), field, expected, got))


def _validated(seat):
    """A plan seat (seat_plan's ``plan.seats[]``) that renders safely."""
    if not isinstance(seat, dict):
        raise RenderError("seat: expected a plan seat (a dict), got %r" % (seat,))
    name = seat.get("name")
    if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
        _fail(seat, "name", SEAT_NAME_EXPECTED + " (a compose project name)", name)
    if not isinstance(seat.get("engine"), str) or seat["engine"] not in ENGINES:
        _fail(seat, "engine", " or ".join(repr(engine) for engine in ENGINES), seat.get("engine"))
    port = seat.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port <= 65535:
        _fail(seat, "port", "a TCP port (1-65535)", port)
    gpus = seat.get("gpus")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, str) and g for g in gpus):
        _fail(seat, "gpus", "a non-empty list of GPU UUIDs", gpus)
    launch = seat.get("launch")
    if not isinstance(launch, dict):
        _fail(seat, "launch", "the plan seat's launch inputs (a dict)", launch)
    if not isinstance(launch.get("image"), str) or not launch["image"]:
        _fail(seat, "launch.image", "a non-empty string", launch.get("image"))
    environment = launch.get("environment") or {}
    if not isinstance(environment, dict) or not all(
            isinstance(k, str) and _PLAIN_KEY_RE.match(k) and isinstance(v, str) and not CONTROL_RE.search(v)
            for k, v in environment.items()):
        _fail(seat, "launch.environment", "{NAME: text} (the plan's normal form)", environment)
    for field in ("volumes", "command"):
        items = launch.get(field) or []
        if not isinstance(items, list) or not all(isinstance(i, str) and not CONTROL_RE.search(i) for i in items):
            _fail(seat, "launch.%s" % field, "a list of strings", items)
    for field in ("health_interval", "health_start_period"):
        if not isinstance(launch.get(field, "1s"), str):
            _fail(seat, "launch.%s" % field, "a docker duration", launch.get(field))
    if not isinstance(seat.get("container", ""), str):
        _fail(seat, "container", "a container name", seat.get("container"))
    # it becomes a string literal in the healthcheck's code
    health_path = seat.get("health_path", "/health")
    if not isinstance(health_path, str) or not HEALTH_PATH_RE.match(health_path):
        _fail(seat, "health_path", HEALTH_PATH_EXPECTED, health_path)
    engine_of(seat).check_plan_seat(seat, lambda field, expected, got: _fail(seat, field, expected, got))
    return seat


def _secret_names(seat):
    names = seat["launch"].get("secret_environment") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and _PLAIN_KEY_RE.match(n) for n in names):
        _fail(seat, "launch.secret_environment", "a list of variable names", names)
    return names


def seat_env(seat, secrets=None):
    """The ``.env`` variables of a seat, in file order: what a maintenance window changes, then
    its secrets (``secrets``: name -> value)."""
    seat = _validated(seat)
    env = [("SEAT_IMAGE", seat["launch"]["image"]), ("SEAT_PORT", str(seat["port"]))]
    for index, uuid in enumerate(seat["gpus"]):
        env.append(("SEAT_GPU_%d" % index, uuid))
    env += engine_of(seat).environment(seat)
    secrets = secrets or {}
    for name in _secret_names(seat):
        if not isinstance(secrets.get(name), str):
            raise RenderError("seat %s: secret_environment.%s: expected its value (text) in the secrets "
                              "given to the render, got %s" % (seat["name"], name, "none" if name not in secrets
                                                               else "a value of type %s" % type(secrets[name]).__name__))
        env.append((SECRET_VAR_PREFIX + name, secrets[name]))
    for key, value in env:
        if "'" in value or CONTROL_RE.search(value):
            raise RenderError("seat %s: %s: a .env value cannot carry a single quote or a control "
                              "character safely, got %s" % (seat["name"], key, REDACTED if key.startswith(
                                  SECRET_VAR_PREFIX) else repr(value)))
    return env


def render_env(seat, host=None, secrets=None):
    """The ``.env`` file's text. Values are single-quoted: compose reads them literally."""
    env = seat_env(seat, secrets)
    lines = [_header(seat, host)] + ["%s='%s'" % (key, value) for key, value in env]
    return "\n".join(lines) + "\n"


_SECRET_LINE_RE = re.compile(r"^(%s[A-Za-z0-9_]+)=(.*)$" % SECRET_VAR_PREFIX, re.MULTILINE)
SECRET_CHANGED = "<secret changed>"


def redact(name, text, before=None):
    """A file's text as a diff may show it: every secret in the .env replaced by <secret>, or by
    <secret changed> where it differs from ``before`` (the text it replaces)."""
    if name != ENV_FILE:
        return text
    old = dict(_SECRET_LINE_RE.findall(before)) if before is not None else {}

    def shown(match):
        changed = before is not None and old.get(match.group(1)) != match.group(2)
        return "%s='%s'" % (match.group(1), SECRET_CHANGED if changed else REDACTED)
    return _SECRET_LINE_RE.sub(shown, text)


def seat_compose(seat):
    """The compose project of one seat as plain data (Refs mark ``.env`` interpolations)."""
    seat = _validated(seat)
    engine, launch, name = engine_of(seat), seat["launch"], seat["name"]
    port = Ref("SEAT_PORT")
    inside = engine.listen_port(seat, Ref)
    service = {
        "image": Ref("SEAT_IMAGE"),
        "container_name": seat.get("container") or engine.container_name(name),
        # A worker fault makes vLLM's API server exit 0, so on-failure never fires.
        "restart": "always",
        "labels": {MANAGED_LABEL: name},
        "ports": [_Joined([port, ":", inside])],
    }
    if engine.HOST_IPC:
        service["ipc"] = "host"
    command = engine.command(seat, Ref)
    if command:
        service["command"] = command
    environment = {str(k): str(v) for k, v in (launch.get("environment") or {}).items()}
    # A secret reaches the container from the 0600 .env; compose.yaml names only its variable.
    environment.update({name: Ref(SECRET_VAR_PREFIX + name) for name in _secret_names(seat)})
    if environment:
        service["environment"] = dict(sorted(environment.items()))
    if launch.get("volumes"):
        service["volumes"] = list(launch["volumes"])
    service["healthcheck"] = {
        # python3 is in vLLM's image (curl is not in every image).
        "test": ["CMD", "python3", "-c", _Joined([
            "import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', ", inside,
            ", timeout=5); c.request('GET', %r); sys.exit(c.getresponse().status != 200)"
            % seat.get("health_path", "/health")])],
        "interval": launch.get("health_interval", "15s"),
        "timeout": "10s",
        "retries": 3,
        "start_period": launch.get("health_start_period", "20m"),
    }
    service["deploy"] = {"resources": {"reservations": {"devices": [{
        "driver": "nvidia",
        "device_ids": [Ref("SEAT_GPU_%d" % i) for i in range(len(seat["gpus"]))],
        "capabilities": ["gpu"],
    }]}}}
    return {"name": name, "services": {name: service}}


def render_compose(seat, host=None):
    """The ``compose.yaml`` file's text."""
    return _header(seat, host) + "\n" + _yaml(seat_compose(seat), 0) + "\n"


def render(seat, host=None, secrets=None):
    """Both files of a seat: ``{".env": text, "compose.yaml": text}``."""
    return {ENV_FILE: render_env(seat, host, secrets), COMPOSE_FILE: render_compose(seat, host)}


def validate(project_dir, staged, docker):
    """``docker compose config`` on the new pair, staged beside the real files (so relative
    paths resolve as they will); the reason compose gives, or None when it accepts them."""
    rc, out, err = docker.run(["compose", "--project-directory", project_dir,
                               "-f", staged[COMPOSE_FILE], "--env-file", staged[ENV_FILE],
                               "config", "--quiet"])
    return None if rc == 0 else (err or out).strip()


class _Joined:
    """A compose string made of literal parts and Refs, e.g. ``${SEAT_PORT}:${SEAT_PORT}``."""

    def __init__(self, parts):
        self.parts = parts


def _header(seat, host):
    where = " on %s" % host if host else ""
    return ("# Managed by llmfleet.seats: seat %s%s. Rendered from the inventory; edits here are\n"
            "# overwritten by the next rebalance (earlier versions: *.bak-YYYYMMDD-<tag>)."
            % (seat.get("name"), where))


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Ref):
        return json.dumps(value.text())
    if isinstance(value, _Joined):
        return json.dumps("".join(p.text() if isinstance(p, Ref) else p.replace("$", "$$")
                                  for p in value.parts))
    if isinstance(value, str):
        # Compose interpolates "$"; "$$" is its escape for a literal dollar.
        return json.dumps(value.replace("$", "$$"))
    raise RenderError("cannot render %r (%s) into compose.yaml" % (value, type(value).__name__))


def _key(key):
    return key if _PLAIN_KEY_RE.match(key) else json.dumps(key)


def _yaml(value, indent):
    """A small YAML emitter for dict/list/scalars; every string double-quoted (JSON-escaped)."""
    pad = "  " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append("%s%s:" % (pad, _key(key)))
                lines.append(_yaml(item, indent + 1))
            else:
                lines.append("%s%s: %s" % (pad, _key(key), _empty_or_scalar(item)))
    else:
        for item in value:
            if isinstance(item, dict) and item:
                first, *rest = _yaml(item, indent + 1).split("\n")
                lines.append("%s- %s" % (pad, first.lstrip()))
                lines.extend(rest)
            else:
                lines.append("%s- %s" % (pad, _empty_or_scalar(item)))
    return "\n".join(lines)


def _empty_or_scalar(value):
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


# -- running a seat ------------------------------------------------------------------------------
def _compose(project_dir, docker, args, timeout=None):
    return docker.run(["compose", "--project-directory", project_dir,
                       "-f", os.path.join(project_dir, COMPOSE_FILE)] + list(args), timeout=timeout)


def _containers(project_dir, docker):
    """``{container id: state}`` of the project's containers (none when it has no files)."""
    if not _has_files(project_dir):
        return {}
    rc, out, _err = _compose(project_dir, docker, ["ps", "--all", "--format", "{{.ID}} {{.State}}"])
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line) if rc == 0 else {}


def _has_files(project_dir):
    return os.path.isfile(os.path.join(project_dir, COMPOSE_FILE))


def _problem(rc, out, err):
    return None if rc == 0 else " ".join((err or out).split())[-800:] or "exit %d" % rc


def start(project_dir, docker, wait_timeout=None, check_mode=False):
    """Create or recreate the seat's container from its files and start it; with
    ``wait_timeout``, until it is healthy (compose --wait: an exited or unhealthy container
    fails at once)."""
    before = _containers(project_dir, docker)
    if check_mode:
        return not before or any(state != "running" for state in before.values()), None
    args = ["up", "--detach", "--remove-orphans"]
    if wait_timeout:
        args += ["--wait", "--wait-timeout", str(wait_timeout)]
    problem = _problem(*_compose(project_dir, docker, args, timeout=(wait_timeout or 0) + 600))
    return _containers(project_dir, docker) != before, problem


def stop(project_dir, docker, check_mode=False):
    """Stop the seat's container, keeping it (and its files) for a later start."""
    before = _containers(project_dir, docker)
    running = any(state == "running" for state in before.values())
    if check_mode or not running:
        return running, None
    problem = _problem(*_compose(project_dir, docker, ["stop"], timeout=600))
    return _containers(project_dir, docker) != before, problem


def remove(project_dir, docker, check_mode=False):
    """Remove the seat's container and network. Without its files, the containers compose
    labelled with its project (the directory's name) go."""
    name = project_dir.rstrip("/").rsplit("/", 1)[-1]
    if _has_files(project_dir):
        before = _containers(project_dir, docker)
        if check_mode or not before:
            return bool(before), None
        problem = _problem(*_compose(project_dir, docker, ["down", "--remove-orphans"], timeout=600))
        return _containers(project_dir, docker) != before, problem
    rc, out, err = docker.run(["ps", "--all", "--quiet", "--filter", "label=%s=%s" % (PROJECT_LABEL, name)])
    ids = out.split() if rc == 0 else []
    if check_mode or not ids:
        return bool(ids), _problem(rc, out, err)
    return True, _problem(*docker.run(["rm", "--force"] + ids))


def states(docker):
    """``{seat: state}`` for every container the collection runs on the host, in docker's words:
    ``running (healthy)``, ``running (health: starting)``, ``running`` (no healthcheck),
    ``exited: Exited (1) 3 seconds ago``..."""
    found = {}
    for seat, fields in docker.labelled(MANAGED_LABEL, ["State", "Status"]).items():
        if fields["State"] == "running":
            health = _HEALTH.search(fields["Status"])
            found[seat] = "running (%s)" % health.group(1) if health else "running"
        else:
            found[seat] = "%s: %s" % (fields["State"], fields["Status"])
    return found
