# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Taking over what runs on a host outside the collection: a hand-started compose project or
``docker run`` container that holds a seat's project name, container name, port or GPU memory.

Before anything is touched, every such container is found (``conflicts``). A seat whose
inventory says ``take_over: true`` has them stopped first in the window, journaled, and brought
back by a rollback exactly as they ran; any other conflict refuses the window, naming the
container and what it holds. A container is removed only when the seat's own project or
container name would otherwise replace it, and only when its compose files are on the host to
bring it back from; else it is stopped (and renamed when its name is the seat's) and kept.
After a window that passed its gates, a taken-over compose container is removed (its files
stay where they were) and a kept one no longer restarts with the engine.
"""

from __future__ import annotations

import os
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import ALL_INTERFACES, BIND_ADDRESS
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import STARTED_AT_RE, DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.ports import addresses_clash, endpoint
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, engine_serving
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.host import is_running

# What compose itself accepts as a project and a service name.
_PROJECT_RE = lazy_regex(r"\A[a-z0-9][a-z0-9_-]*\Z")
_SERVICE_RE = lazy_regex(r"\A[a-zA-Z0-9][a-zA-Z0-9._-]*\Z")
_RESTART_POLICIES = ("no", "always", "unless-stopped", "on-failure")
# A kept container whose name is the seat's steps aside under this suffix for the window.
ASIDE_SUFFIX = "-before-llmfleet"
STOP_TIMEOUT_S = 60
# How much of a brought-back server's log its boot state is read from (its boot lines come first).
BOOT_LOG_BYTES = 2 << 20
POLL_S = 2


class TakeOverError(ValueError):
    """Inputs that are not a plan's seats or a take-over list."""


def _reasons(seat, container):
    """What ``container`` holds of ``seat``: a list of phrases (empty when nothing)."""
    reasons = []
    if seat.get("runtime", "compose") == "compose" and container["compose_project"] == seat["name"]:
        reasons.append("its compose project %s" % seat["name"])
    if container["name"] == seat.get("container"):
        reasons.append("its container name %s" % seat["container"])
    if is_running(container):
        if container["compose_service"] == seat["name"]:
            reasons.append("its GPU memory (compose service %s)" % seat["name"])
        bind = _bind_address(seat)
        held = sorted({endpoint(p["host_ip"], p["host_port"]) for p in container["ports"]
                       if p["host_port"] == seat.get("port") and addresses_clash(p["host_ip"], bind)})
        if held:
            mine = endpoint(bind, seat["port"])
            reasons.append("its port %s" % held[0] + ("" if held == [mine] else " (the seat's %s)" % mine))
    return reasons


def _bind_address(seat):
    return (seat.get("launch") or {}).get("bind_address") or BIND_ADDRESS


def _describe(container):
    where = ("compose project %s, service %s" % (container["compose_project"], container["compose_service"])
             if container["compose_project"] else "started with docker run")
    return "container %s (%s, %s)" % (container["name"], where, container["state"])


def _can_recreate(container, exists=os.path.isfile):
    """Whether compose can bring the container back from its own files on this host (names in
    compose's own grammar, absolute paths that exist: what a label says is checked, not trusted)."""
    files = container["compose_config_files"]
    return bool(_PROJECT_RE.match(container["compose_project"] or "")
                and _SERVICE_RE.match(container["compose_service"] or "")
                and os.path.isabs(container["compose_working_dir"] or "")
                and files and all(os.path.isabs(path) and exists(path) for path in files))


def _outside_docker(host, seats, containers, listening, holders):
    """A problem per seat whose (address, port) a socket outside every container listens on
    (what docker itself listens on for a published port is the container's)."""
    published = [(p["host_ip"], p["host_port"]) for c in containers if is_running(c) for p in c["ports"]]
    outside = {(address, port): inode for (address, port), inode in (listening or {}).items()
               if not any(port == taken and addresses_clash(address, at) for at, taken in published)}
    problems = []
    for seat in seats:
        bind = _bind_address(seat)
        clashing = sorted((address, port) for address, port in outside
                          if port == seat.get("port") and addresses_clash(address, bind))
        if not clashing:
            continue
        names = holders([outside[key] for key in clashing])
        problems.append("host %s: seat %s: port %s is held by a process that is no container: %s; the seat "
                        "publishes %s; expected a free port on that address, or stop that process first" % (
                            host, seat["name"], seat["port"], ", ".join(
                                "%s listens on %s" % (names.get(outside[key], "a process"), endpoint(*key))
                                for key in clashing), endpoint(bind, seat["port"])))
    return problems


def conflicts(host, seats, containers, listening=None, exists=os.path.isfile, holders=lambda inodes: {}):
    """``(take_over, problems)`` for a host's plan ``seats`` against ``containers``
    (``host_containers``) and the sockets ``listening`` on the host (``{(address, port): inode}``,
    ``holders`` naming their processes). A port clashes when it is held on the seat's bind address
    or on every interface (either side). ``take_over`` lists each container to stop first, once,
    with the seats it blocks and how it steps aside (``remove`` or ``rename``); ``problems`` one
    line per container a seat did not opt in to take over, or that cannot be brought back, and per
    seat port a process outside every container listens on."""
    if not isinstance(seats, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in seats):
        raise TakeOverError("seats: expected the plan's seats (each with a name)")
    take_over, problems = [], _outside_docker(host, seats, containers, listening, holders)
    for container in containers:
        if container.get("seat"):
            continue  # the collection's own: the window manages it as a seat
        blocked = [(seat, reasons) for seat in seats for reasons in [_reasons(seat, container)] if reasons]
        if not blocked:
            continue
        held = "; ".join("seat %s: %s" % (seat["name"], ", ".join(reasons)) for seat, reasons in blocked)
        refusing = [seat["name"] for seat, _reasons in blocked if seat.get("take_over") is not True]
        if refusing:
            problems.append(
                "host %s: %s holds %s; expected nothing else there, or take_over: true on seat %s to stop "
                "it in the window (a rollback brings it back), or stop it yourself first"
                % (host, _describe(container), held, ", ".join(refusing)))
            continue
        names = any(container["name"] == seat.get("container") for seat, _r in blocked)
        projects = any(seat.get("runtime", "compose") == "compose" and container["compose_project"] == seat["name"]
                       for seat, _r in blocked)
        entry = dict(container, seats=[seat["name"] for seat, _r in blocked], holds=held,
                     was_running=is_running(container), step_aside="stop")
        if container["auto_remove"]:
            problems.append("host %s: %s runs with --rm, so stopping it would lose it (and whatever started it "
                            "may start it again): stop what starts it first" % (host, _describe(container)))
            continue
        if projects or names:
            if _can_recreate(container, exists):
                entry["step_aside"] = "remove"
            elif projects:
                problems.append("host %s: %s holds %s, so the seat's project would replace it, but its compose "
                                "files (%s) are not on the host to bring it back from; stop and remove it "
                                "yourself first" % (host, _describe(container), held,
                                                    ", ".join(container["compose_config_files"]) or "none named"))
                continue
            else:
                entry["step_aside"] = "rename"
                entry["aside_name"] = container["name"] + ASIDE_SUFFIX
        take_over.append(entry)
    return take_over, problems


def _files_of(entry):
    return "compose project %s, its files in %s" % (entry.get("compose_project"), entry.get("compose_working_dir"))


# -- on the host -----------------------------------------------------------------------------------
def _problem(rc, out, err):
    return None if rc == 0 else " ".join((err or out).split())[-500:] or "exit %d" % rc


def _compose_args(entry):
    args = ["compose", "--project-name=" + entry["compose_project"],
            "--project-directory=" + entry["compose_working_dir"]]
    args += ["--file=" + path for path in entry["compose_config_files"]]
    args += ["--env-file=" + path for path in entry.get("compose_env_files") or []
             if os.path.isabs(path) and os.path.isfile(path)]
    return args


def step_aside(entries, docker, check_mode=False):
    """Stop each taken-over container (and remove or rename it as its entry says).
    ``(changed, actions, problems)``."""
    changed, actions, problems = False, [], []
    for entry in entries:
        # by what the container is now: a run that takes over a dead run's journal repeats this
        current = docker.inspect_one(entry["id"])
        if current is None:
            if entry["step_aside"] != "remove":
                problems.append("%s: gone from the host before the window could stop it" % entry["name"])
            continue
        steps = []
        if (current.get("State") or {}).get("Status") in ("running", "restarting", "paused"):
            steps.append((["stop", "--time=%d" % STOP_TIMEOUT_S, entry["id"]], "stopped"))
        if entry["step_aside"] == "remove":
            steps.append((["rm", entry["id"]], "removed (%s)" % _files_of(entry)))
        elif entry["step_aside"] == "rename" and (current.get("Name") or "").lstrip("/") != entry["aside_name"]:
            steps.append((["rename", entry["id"], entry["aside_name"]], "renamed %s" % entry["aside_name"]))
        for args, done in steps:
            if check_mode:
                changed = True
                continue
            problem = _problem(*docker.run(args, timeout=STOP_TIMEOUT_S + 60))
            if problem:
                problems.append("%s: docker %s: %s" % (entry["name"], args[0], problem))
                break
            changed = True
            actions.append("taken over for seat %s: %s %s" % (", ".join(entry["seats"]), entry["name"], done))
    return changed, actions, problems


def engines_served(entries, docker):
    """Name on each take-over entry the engine its container's process serves (``engine``, None
    for any other), from its command line, so that a rollback can wait for that server to boot."""
    for entry in entries:
        attrs = docker.inspect_one(entry["id"]) or {}
        entry["engine"] = engine_serving([attrs.get("Path")] + list(attrs.get("Args") or []))
    return entries


def _boot_state(docker, entry, state):
    """Where the brought-back server's boot got, by its engine and its log since this start."""
    started = state.get("StartedAt")
    try:
        log = docker.log_head(entry["name"], BOOT_LOG_BYTES,
                              since=started if isinstance(started, str) and STARTED_AT_RE.match(started) else None)
    except DockerError as exc:
        return "booting", str(exc)
    return ENGINES[entry["engine"]].boot_state(log)


def _wait_up(docker, entry, timeout):
    """None once the container runs, is healthy when it had a healthcheck, and serves when it
    runs an engine's server (a util-sized vLLM takes its memory only while it boots, so the next
    container must not start before that); else why not."""
    deadline, why = time.monotonic() + timeout, None
    serving = isinstance(entry.get("engine"), str) and entry["engine"] in ENGINES
    while True:
        attrs = docker.inspect_one(entry["name"]) or {}
        state = attrs.get("State") or {}
        health = (state.get("Health") or {}).get("Status")
        up = state.get("Status") == "running" and (not entry.get("health") or health == "healthy")
        if up and serving:
            booted, why = _boot_state(docker, entry, state)
            if booted == "failed":
                return "its server failed to boot: %s" % why
            up = booted == "serving"
        if up:
            return None
        if state.get("Status") in ("exited", "dead") or health == "unhealthy":
            return "it is %s%s%s" % (state.get("Status"), " (%s)" % health if health else "",
                                     ": %s" % why if why else "")
        if time.monotonic() >= deadline:
            awaited = "serving" if serving else "healthy" if entry.get("health") else "running"
            return "not %s within %d s" % (awaited, timeout)
        time.sleep(POLL_S)


def bring_back(entries, docker, wait_timeout, check_mode=False):
    """Bring each taken-over container back as it was before the window, one at a time (a
    co-boot on one card is what util-sized seats get wrong) and in the order they last started
    (a util-sized seat that booted on an empty card may not boot beside a neighbour that came
    after it). ``(changed, actions, problems)``."""
    changed, actions, problems = False, [], []
    for entry in sorted(entries, key=_start_order):
        current = docker.inspect_one(entry["id"])
        if current is None and docker.inspect_one(entry["name"]) is not None and entry["step_aside"] != "remove":
            current = docker.inspect_one(entry["name"])
        commands = []
        if current is None:
            if not _can_recreate(entry):
                problems.append("%s: gone, and its compose files are not on the host to bring it back from"
                                % entry["name"])
                continue
            verb = ["up", "--detach", "--no-deps"] if entry["was_running"] else ["create"]
            commands.append((_compose_args(entry) + verb + [entry["compose_service"]],
                             "recreated from its compose files in %s" % entry["compose_working_dir"]))
        else:
            name_now = (current.get("Name") or "").lstrip("/")
            if name_now != entry["name"]:
                commands.append((["rename", current["Id"], entry["name"]], "renamed back"))
            restart = ((current.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name") or "no"
            if restart != entry["restart"] and entry["restart"] in _RESTART_POLICIES:
                commands.append((["update", "--restart=" + entry["restart"], current["Id"]],
                                 "restart policy %s again" % entry["restart"]))
            running = (current.get("State") or {}).get("Status") in ("running", "restarting")
            if entry["was_running"] and not running:
                commands.append((["start", current["Id"]], "started"))
        for args, done in commands:
            if check_mode:
                changed = True
                continue
            problem = _problem(*docker.run(args, timeout=wait_timeout + 120))
            if problem:
                problems.append("%s: docker %s: %s" % (entry["name"], " ".join(args[:1]), problem))
                break
            changed = True
            actions.append("brought back: %s %s" % (entry["name"], done))
        else:
            if entry["was_running"] and not check_mode:
                why = _wait_up(docker, entry, wait_timeout)
                if why:
                    problems.append("%s: brought back, but %s" % (entry["name"], why))
    return changed, actions, problems


def _start_order(entry):
    """Running containers by their last start (RFC 3339 UTC sorts as text), then the rest."""
    started = entry.get("started_at") if entry.get("was_running") else None
    return (started is None, started or "", entry["name"])


def release(entries, docker, check_mode=False):
    """After a window that passed: a taken-over compose container that was only stopped goes
    (its files stay); a kept one no longer restarts with the engine. ``(changed, actions, problems)``."""
    changed, actions, problems = False, [], []
    for entry in entries:
        current = docker.inspect_one(entry["id"])
        if current is None:
            continue
        if entry["compose_project"] and _can_recreate(entry):
            args, done = ["rm", entry["id"]], "removed (%s)" % _files_of(entry)
        elif ((current.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name", "no") != "no":
            args, done = ["update", "--restart=no", entry["id"]], "kept, stopped, restart policy no"
        else:
            continue
        if not check_mode:
            problem = _problem(*docker.run(args, timeout=120))
            if problem:
                problems.append("%s: docker %s: %s" % (entry["name"], args[0], problem))
                continue
            actions.append("taken over for good: %s %s" % (entry["name"], done))
        changed = True
    return changed, actions, problems


def takeover_lines(entries):
    """One line per taken-over container, as the dry run and the report say it."""
    lines = []
    for entry in entries or []:
        if entry.get("step_aside") == "remove":
            how = "removed; %s" % _files_of(entry)
        elif entry.get("step_aside") == "rename":
            how = "stopped and kept as %s" % entry.get("aside_name")
        else:
            how = "stopped and kept"
        seats = ", ".join(entry.get("seats") or [])
        lines.append("%s for seat %s (%s; %s)" % (entry.get("name"), seats, entry.get("holds"), how))
    return lines


def exposure_changes(host, seats, containers):
    """A warning for each seat the window publishes on other addresses than its container does
    now: narrower (a gateway on another host may lose it) or wider (reachable from more networks)."""
    warnings = []
    running = {c["seat"]: c for c in containers if c.get("seat") and is_running(c)}
    for seat in seats:
        container = running.get(seat.get("name"))
        planned = ((seat.get("launch") or {}).get("bind_address")) or BIND_ADDRESS
        if container is None or not seat.get("port"):
            continue
        now = sorted({p["host_ip"] or "0.0.0.0" for p in container["ports"] if p["host_port"] == seat["port"]})
        if not now or now == [planned]:
            continue
        everywhere_now = any(address in ALL_INTERFACES for address in now)
        if everywhere_now and planned not in ALL_INTERFACES:
            warnings.append("host %s: seat %s is published on every interface now (%s:%d) and the window "
                            "publishes it on %s only: a gateway on another host will no longer reach it; set its "
                            "bind_address to the address the gateway comes in on" % (
                                host, seat["name"], now[0], seat["port"], planned))
        elif planned in ALL_INTERFACES and not everywhere_now:
            warnings.append("host %s: seat %s is published on %s now and the window publishes it on every "
                            "interface (%s): reachable from every network the host is on" % (
                                host, seat["name"], ", ".join(now), planned))
        else:
            warnings.append("host %s: seat %s is published on %s now and the window publishes it on %s" % (
                host, seat["name"], ", ".join(now), planned))
    return warnings
