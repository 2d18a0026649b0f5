# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Every container on a host, the collection's seats or not: what a window must see before it
touches anything (a hand-started project that holds a seat's name, port or GPU), and what a
rollback's verdict is measured against.

What a host says here is data: names, labels and paths are compared and shown, never run,
templated or followed on the controller.
"""

from __future__ import annotations

import ipaddress
import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import CONTROL_RE, MANAGED_LABEL
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import STARTED_AT_RE, DockerError

COMPOSE_PROJECT = "com.docker.compose.project"
COMPOSE_SERVICE = "com.docker.compose.service"
COMPOSE_WORKING_DIR = "com.docker.compose.project.working_dir"
COMPOSE_CONFIG_FILES = "com.docker.compose.project.config_files"
COMPOSE_ENV_FILES = "com.docker.compose.project.environment_file"
# What a label, name or path may be to be shown in a message or used as an argument.
_LONGEST_TEXT = 4096


def _text(value):
    """A host's string as the collection may show it, or None: no control character (a newline
    in a label must not start a new line in a report), bounded."""
    if not isinstance(value, str) or not value or len(value) > _LONGEST_TEXT or CONTROL_RE.search(value):
        return None
    return value


def _ports(attrs):
    """``[{host_ip, host_port, container_port}]``: the TCP ports it publishes (host ports bound)."""
    published = []
    bindings = ((attrs.get("HostConfig") or {}).get("PortBindings") or {})
    for inside, outside in sorted(bindings.items()):
        port, _slash, proto = str(inside).partition("/")
        if proto not in ("", "tcp") or not port.isdigit():
            continue
        for binding in outside or []:
            host_port = str((binding or {}).get("HostPort") or "")
            if host_port.isdigit():
                published.append({"host_ip": _text((binding or {}).get("HostIp")) or "",
                                  "host_port": int(host_port), "container_port": int(port)})
    return published


def container_record(attrs):
    """The part of one ``docker inspect`` object a window compares, journals and shows."""
    config, state = attrs.get("Config") or {}, attrs.get("State") or {}
    labels = config.get("Labels") or {}
    host_config = attrs.get("HostConfig") or {}
    health = (state.get("Health") or {}).get("Status")
    config_files = _text(labels.get(COMPOSE_CONFIG_FILES))
    return {
        "id": _text(attrs.get("Id")),
        "name": _text((attrs.get("Name") or "").lstrip("/")),
        "image": _text(config.get("Image")),
        "state": _text(state.get("Status")) or "unknown",
        "health": _text(health),
        "seat": _text(labels.get(MANAGED_LABEL)),
        "compose_project": _text(labels.get(COMPOSE_PROJECT)),
        "compose_service": _text(labels.get(COMPOSE_SERVICE)),
        "compose_working_dir": _text(labels.get(COMPOSE_WORKING_DIR)),
        "compose_config_files": config_files.split(",") if config_files else [],
        "compose_env_files": (_text(labels.get(COMPOSE_ENV_FILES)) or "").split(",") if labels.get(
            COMPOSE_ENV_FILES) else [],
        "ports": _ports(attrs),
        "restart": _text((host_config.get("RestartPolicy") or {}).get("Name")) or "no",
        # docker's RFC 3339 time of its last start: the order a host's containers came up in
        "started_at": _text(state.get("StartedAt")) if STARTED_AT_RE.match(_text(state.get("StartedAt")) or "") else None,
        "auto_remove": bool(host_config.get("AutoRemove")),
    }


def host_containers(docker):
    """Every container on the host (running or not), as ``container_record``s sorted by name.
    DockerError when the engine cannot be asked."""
    rc, out, err = docker.run(["ps", "--all", "--quiet", "--no-trunc"], timeout=60)
    if rc != 0:
        raise DockerError("docker ps failed (rc=%d): %s" % (rc, (err or out).strip()[:300]))
    found, why = docker.inspect(out.split())
    if why:
        raise DockerError(why)
    records = [container_record(attrs) for attrs in found.values()]
    return sorted((r for r in records if r["id"] and r["name"]), key=lambda r: r["name"])


def is_running(record):
    """Whether the container is up in ``docker ps``'s sense (running, restarting or paused)."""
    return record.get("state") in ("running", "restarting", "paused")


def _proc_net_address(text):
    """``0100007F`` -> ``127.0.0.1``: /proc/net/tcp{,6} print an address as 32-bit words, each
    in the host's byte order (little-endian on every host the collection runs on)."""
    raw = bytes.fromhex(text)
    if len(raw) not in (4, 16):
        raise ValueError(text)
    words = b"".join(raw[start:start + 4][::-1] for start in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening_sockets(proc_net="/proc/net"):
    """``{(address, port): socket inode}`` for every TCP socket that listens in the host's network
    namespace (IPv4 and IPv6); an address of every interface is ``0.0.0.0`` or ``::``."""
    sockets = {}
    for name in ("tcp", "tcp6"):
        try:
            with open("%s/%s" % (proc_net, name)) as handle:
                lines = handle.read(1 << 22).splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":  # TCP_LISTEN
                try:
                    address, port = fields[1].rsplit(":", 1)
                    sockets[(_proc_net_address(address), int(port, 16))] = fields[9]
                except ValueError:
                    continue
    return sockets


def socket_holders(inodes, proc="/proc"):
    """``{socket inode: "COMMAND (pid N)"}`` for the processes that hold these sockets, as far
    as /proc shows them (another user's descriptors need root). The command name is the host's
    text: shown only when it is printable and short (the kernel keeps 15 bytes of it)."""
    wanted, holders = {"socket:[%s]" % inode: inode for inode in inodes}, {}
    try:
        pids = sorted((entry for entry in os.listdir(proc) if entry.isdigit()), key=int)
    except OSError:
        return holders
    for pid in pids:
        if len(holders) == len(wanted):
            break
        try:
            links = {os.readlink("%s/%s/fd/%s" % (proc, pid, fd)) for fd in os.listdir("%s/%s/fd" % (proc, pid))}
        except OSError:
            continue
        for link in links & set(wanted):
            try:
                with open("%s/%s/comm" % (proc, pid)) as handle:
                    command = _text(handle.read(64).strip())
            except OSError:
                command = None
            holders.setdefault(wanted[link], "%s (pid %s)" % (command or "a process", pid))
    return holders
