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

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    DORMANT_LABEL,
    MANAGED_LABEL,
    SEAT_NAME_RE,
    SECRET_VAR_PREFIX,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan_seat import PLAIN_KEY_RE
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

NAME = "compose"
ENV_FILE = ".env"
COMPOSE_FILE = "compose.yaml"
# Laid over compose.yaml while the seat is dormant: the seat's own files stay byte for byte, and
# compose alone reads this one, only when it puts the seat to sleep.
DORMANT_FILE = "compose.dormant.yaml"
# The .env holds what a window changes, and may hold tokens: only its owner reads it.
_MODES = {ENV_FILE: 0o600, COMPOSE_FILE: 0o644}
PROJECT_LABEL = "com.docker.compose.project"
# the seat_files options that set its files' modes
MODE_OPTIONS = {ENV_FILE: "env_mode", COMPOSE_FILE: "compose_mode"}


def files(_name):
    """The seat's files and the mode each gets when it is created."""
    return dict(_MODES)


def redact(name, text, before=None):
    """A file's text as a diff may show it: the .env's secrets replaced."""
    return redact_env(text, before) if name == ENV_FILE else text


def seat_compose(seat):
    """The compose project of one seat as plain data (Refs mark ``.env`` interpolations)."""
    seat = validated(seat)
    engine, launch, name = engine_of(seat), seat["launch"], seat["name"]
    inside = engine.listen_port(seat, Ref)
    service = {
        "image": Ref("SEAT_IMAGE"),
        "container_name": seat.get("container") or engine.container_name(name),
        # always by default: a worker fault makes vLLM's API server exit 0 (seat_spec refuses a
        # policy that would not restart it)
        "restart": launch.get("restart", "always"),
        "labels": {MANAGED_LABEL: name},
        # on the seat's bind address alone: docker's default would be every interface
        "ports": [published(seat, inside)],
    }
    joined = networks(seat)
    if joined:
        # only these: listing networks leaves out the project's default one
        service["networks"] = [network["name"] for network in joined]
    if engine.HOST_IPC:
        service["ipc"] = "host"
    command = engine.command(seat, Ref)
    if command:
        service["command"] = command
    environment = {str(k): str(v) for k, v in (launch.get("environment") or {}).items()}
    # A secret reaches the container from the 0600 .env; compose.yaml names only its variable.
    environment.update({name: Ref(SECRET_VAR_PREFIX + name) for name in secret_names(seat)})
    environment.update(engine.container_environment(seat, Ref))
    if environment:
        service["environment"] = dict(sorted(environment.items()))
    if launch.get("volumes"):
        service["volumes"] = list(launch["volumes"])
    service["healthcheck"] = {
        "test": ["CMD", "python3", "-c", health_code(seat, inside)],
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
    project = {"name": name, "services": {name: service}}
    if joined:
        # an external network is the host's (the gateway's): compose joins it, never makes or removes it
        project["networks"] = {network["name"]: {"external": True} if network["external"] else {}
                               for network in joined}
    return project


def render_compose(seat, host=None):
    """The ``compose.yaml`` file's text."""
    return header(seat, host) + "\n" + _yaml(seat_compose(seat), 0) + "\n"


def render(seat, host=None, secrets=None, _project_dir=None):
    """Both files of a seat: ``{".env": text, "compose.yaml": text}``."""
    return {ENV_FILE: env_text(seat, host, secrets), COMPOSE_FILE: render_compose(seat, host)}


def validate(project_dir, staged, docker):
    """``docker compose config`` on the new pair, staged beside the real files (so relative
    paths resolve as they will); the reason compose gives, or None when it accepts them."""
    rc, out, err = docker.run(["compose", "--project-directory", project_dir,
                               "-f", staged[COMPOSE_FILE], "--env-file", staged[ENV_FILE],
                               "config", "--quiet"])
    return None if rc == 0 else (err or out).strip()


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Ref):
        return json.dumps(value.text())
    if isinstance(value, Joined):
        return json.dumps("".join(p.text() if isinstance(p, Ref) else p.replace("$", "$$")
                                  for p in value.parts))
    if isinstance(value, str):
        # Compose interpolates "$"; "$$" is its escape for a literal dollar.
        return json.dumps(value.replace("$", "$$"))
    raise RenderError("cannot render %r (%s) into compose.yaml" % (value, type(value).__name__))


def _key(key):
    return key if PLAIN_KEY_RE.match(key) else json.dumps(key)


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
    fails at once). A dormant seat wakes: its container is recreated from its own files alone."""
    before = _containers(project_dir, docker)
    dormant_file = os.path.join(project_dir, DORMANT_FILE)
    if check_mode:
        return not before or os.path.exists(dormant_file) or any(state != "running" for state in before.values()), None
    if os.path.exists(dormant_file):
        os.remove(dormant_file)
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


def dormant_text(seat, replaced_by):
    """The file laid over a dormant seat's compose.yaml: never restarted by the engine (its port
    is the seat's that replaced it), and labelled with that seat's name."""
    for what, name in (("seat", seat), ("replaced_by", replaced_by)):
        if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
            raise RenderError("%s: expected a seat name, got %r" % (what, name))
    return ("# Written by llmfleet.seats: seat %s was replaced by %s and is kept, stopped, to fall back on.\n"
            "# A rollback of that window starts it again from compose.yaml alone; llmfleet_retire removes it.\n"
            % (seat, replaced_by)) + _yaml({"services": {seat: {"restart": "no", "labels": {
                DORMANT_LABEL: replaced_by}}}}, 0) + "\n"


def sleep(project_dir, docker, replaced_by, check_mode=False):
    """Keep the seat's container, stopped, as the fallback of ``replaced_by``: recreated in
    docker's ``created`` state with the dormant label and no restart policy, from its own files
    and the file laid over them. A seat already dormant for ``replaced_by`` is left as it is."""
    seat = project_dir.rstrip("/").rsplit("/", 1)[-1]
    if not _has_files(project_dir):
        return False, "no %s in %s: only a compose seat's container is kept dormant" % (COMPOSE_FILE, project_dir)
    text = dormant_text(seat, replaced_by)
    dormant_file = os.path.join(project_dir, DORMANT_FILE)
    before = _containers(project_dir, docker)
    asleep = dormant(docker).get(seat) == replaced_by and before and all(
        state == "created" for state in before.values())
    try:
        with open(dormant_file, encoding="utf-8") as handle:
            current = handle.read()
    except FileNotFoundError:
        current = None
    if asleep and current == text:
        return False, None
    if check_mode:
        return True, None
    problem = _problem(*_compose(project_dir, docker, ["stop"], timeout=600)) if before else None
    if problem:
        return True, problem
    try:
        replace_file(dormant_file, text, _MODES[COMPOSE_FILE])
    except OSError as exc:
        return True, "could not write %s: %s" % (dormant_file, exc)
    return True, _problem(*docker.run(["compose", "--project-directory", project_dir,
                                       "-f", os.path.join(project_dir, COMPOSE_FILE), "-f", dormant_file,
                                       "create", "--force-recreate", "--pull", "never"], timeout=600))


def dormant(docker):
    """``{seat: the seat that replaced it}`` for every dormant seat on the host; a label value
    outside the seat-name grammar is read as no name (None)."""
    return {seat: fields[DORMANT_LABEL] if SEAT_NAME_RE.match(fields[DORMANT_LABEL]) else None
            for seat, fields in docker.labelled(MANAGED_LABEL, [], [DORMANT_LABEL]).items()
            if fields[DORMANT_LABEL]}


def remove(project_dir, docker, check_mode=False):
    """Remove the seat's container and network. Without its files, the collection's containers
    compose labelled with its project (the directory's name) go."""
    name = project_dir.rstrip("/").rsplit("/", 1)[-1]
    if _has_files(project_dir):
        before = _containers(project_dir, docker)
        if check_mode or not before:
            return bool(before), None
        problem = _problem(*_compose(project_dir, docker, ["down", "--remove-orphans"], timeout=600))
        if problem is None and os.path.exists(os.path.join(project_dir, DORMANT_FILE)):
            os.remove(os.path.join(project_dir, DORMANT_FILE))  # nothing left for it to lie over
        return _containers(project_dir, docker) != before, problem
    # only the collection's own: a hand-started project of the same name is not this seat's to remove
    rc, out, err = docker.run(["ps", "--all", "--quiet", "--filter", "label=%s=%s" % (PROJECT_LABEL, name),
                               "--filter", "label=%s" % MANAGED_LABEL])
    ids = out.split() if rc == 0 else []
    if check_mode or not ids:
        return bool(ids), _problem(rc, out, err)
    return True, _problem(*docker.run(["rm", "--force"] + ids))


def states(docker):
    """``{seat: state}`` for every container the collection runs on the host, in docker's words
    (``seat_env.container_state``)."""
    return {seat: container_state(fields)
            for seat, fields in docker.labelled(MANAGED_LABEL, ["State", "Status"]).items()}


def log(seat, docker):
    """The seat container's whole log."""
    return docker.logs(seat["container"])
