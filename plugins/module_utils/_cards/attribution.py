# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Who holds the memory: GPU process PID -> container -> compose project and service.

NVML and nvidia-smi report host PIDs. ``/proc/<pid>/cgroup`` names the container (cgroup v1
and v2; Docker's cgroupfs and systemd drivers, containerd, CRI, podman), and the Docker engine
(``docker inspect``, through the collection's Docker runner) names the container and reads its
``com.docker.compose.project`` / ``.service`` labels.
Where a PID cannot be resolved, the process says why in ``attribution``.
"""

from __future__ import annotations

import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MANAGED_LABEL
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.proc import process_stat

COMPOSE_PROJECT_LABEL = "com.docker.compose.project"
COMPOSE_SERVICE_LABEL = "com.docker.compose.service"

_ID = r"[0-9a-f]{64}"
# A container's cgroup directory: "docker-<id>.scope" (systemd driver), "cri-containerd-<id>.scope"
# (Kubernetes), "libpod-<id>.scope" (podman), "nerdctl-<id>.scope", or a bare "<id>" under
# "/docker/" (cgroupfs driver) or a containerd namespace such as "/default/".
_SCOPE = lazy_regex(r"^(?:(?P<runtime>docker|cri-containerd|containerd|crio|libpod|nerdctl)-)?"
                    r"(?P<id>%s)(?:\.scope)?$" % _ID)


def container_ids_from_cgroup(text):
    """Container IDs in a ``/proc/<pid>/cgroup`` text, innermost first, as ``(runtime, id)``.

    The cgroup v2 line (``0::/path``) is preferred; on v1 or hybrid hosts every hierarchy
    names the same container, so the first line that names one is enough.
    """
    paths = []
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, _controllers, path = parts
        if hierarchy == "0":
            paths.insert(0, path)
        else:
            paths.append(path)
    for path in paths:
        found = []
        segments = [segment for segment in path.split("/") if segment]
        for position, segment in enumerate(segments):
            match = _SCOPE.match(segment)
            if not match:
                continue
            runtime = match.group("runtime")
            if runtime is None:
                parent = segments[position - 1] if position else ""
                runtime = "docker" if parent == "docker" else "containerd"
            found.append((runtime, match.group("id")))
        if found:
            return list(reversed(found))
    return []


NOT_VISIBLE = ("PID %d is not visible here: it exited, or gpu_info runs in another PID namespace "
               "(NVML reports host PIDs) and no container of the Docker engine runs it")


def read_proc_cgroup(pid, proc_root="/proc"):
    """``(text, None)`` or ``(None, why)`` for a PID's cgroup file."""
    path = os.path.join(proc_root, str(pid), "cgroup")
    try:
        with open(path) as handle:
            return handle.read(), None
    except FileNotFoundError:
        return None, NOT_VISIBLE % pid
    except PermissionError:
        return None, "cannot read %s: permission denied (run the task with become: true)" % path
    except OSError as exc:
        return None, "cannot read %s: %s" % (path, exc.strerror or exc)


def read_process_running_seconds(pid, proc_root="/proc"):
    """How long a process has run (whole seconds), from /proc; None when it cannot be read.

    A seat's memory creeps for a day or two after it starts, so a reading says how settled it is.
    """
    try:
        stat = process_stat(pid, proc_root)
        with open(os.path.join(proc_root, "uptime")) as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if stat is None:
        return None
    return max(0, int(uptime - stat[1] / os.sysconf("SC_CLK_TCK")))


def _container_record(attrs):
    """The part of ``docker inspect`` that attribution needs."""
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return {
        "id": attrs.get("Id"),
        "name": (attrs.get("Name") or "").lstrip("/") or None,
        "compose_project": labels.get(COMPOSE_PROJECT_LABEL),
        "compose_service": labels.get(COMPOSE_SERVICE_LABEL),
        # A seat this collection runs: what it ran, so a plateau's measurement of it is only
        # reused for the same launch (the image and the arguments its command got).
        "seat": labels.get(MANAGED_LABEL),
        "image": (attrs.get("Config") or {}).get("Image") if labels.get(MANAGED_LABEL) else None,
        "args": list((attrs.get("Config") or {}).get("Cmd") or []) if labels.get(MANAGED_LABEL) else None,
    }


class Containers:
    """Containers by id through the Docker runner, as the records attribution needs.

    ``running(docker, inspect object)``: what a container started outside the collection runs,
    as numbers (the engines know how to read a server's command line and boot log), or None.
    """

    def __init__(self, docker, running=None):
        self.docker = docker
        self.docker_host = docker.docker_host
        self.running = running

    def inspect(self, container_ids):
        """``({id: record}, None)``, or ``({}, why)`` when the engine cannot be asked."""
        found, why = self.docker.inspect(container_ids)
        records = {}
        for cid, attrs in found.items():
            records[cid] = record = _container_record(attrs)
            if self.running and not record["seat"]:
                record["running"] = self.running(self.docker, attrs)
        return records, why

    def pid_owners(self):
        """``{host PID: container id}`` for every process of every running container, as the
        engine sees them (``docker top``): the PIDs NVML reports, whatever PID namespace
        gpu_info runs in (a host whose systemd runs in a container of its own, say)."""
        rc, out, _err = self.docker.run(["ps", "--quiet", "--no-trunc"], timeout=30)
        owners = {}
        for container_id in out.split() if rc == 0 else []:
            rc, top, _err = self.docker.run(["top", container_id, "-eo", "pid"], timeout=30)
            for line in top.splitlines()[1:] if rc == 0 else []:
                if line.strip().isdigit():
                    owners[int(line)] = container_id
        return owners


def _explain_unresolved(runtime, container_id, engine, engine_error):
    short = container_id[:12]
    if engine_error:
        return "%s container %s: %s" % (runtime, short, engine_error)
    return ("%s container %s is not known to the Docker engine at %s (another engine or runtime "
            "runs it)" % (runtime, short, engine.docker_host))


def attribute_processes(gpus, engine, read_cgroup=read_proc_cgroup, read_age=read_process_running_seconds):
    """Fill each process's ``container``, ``container_id``, ``compose_project``,
    ``compose_service``, ``attribution`` (None when resolved, else why not) and ``running_s``
    (seconds since it started), and each GPU's ``attributed_mib``, ``unattributed_mib`` and
    ``unlisted_mib``. Returns ``(gpus, warnings)``: new GPU dicts, and the engine's failure
    (once) when it could not be asked.

    ``engine`` answers ``inspect(ids) -> ({id: record}, error)`` and ``pid_owners() -> {pid:
    container id}`` (asked only for PIDs /proc does not show) and names its ``docker_host``:
    Containers, or anything shaped like it.
    ``unattributed_mib`` = used - memory of processes resolved to a container: driver and
    context memory, processes outside containers and processes nobody could name.
    ``unlisted_mib`` = used - memory of every listed process: what no process accounts for.
    """
    cgroup_ids, reasons = {}, {}
    for gpu in gpus:
        for process in gpu["processes"]:
            pid = process["pid"]
            if pid in cgroup_ids or pid in reasons:
                continue
            text, why = read_cgroup(pid)
            if text is None:
                reasons[pid] = why
                continue
            ids = container_ids_from_cgroup(text)
            if ids:
                cgroup_ids[pid] = ids
            else:
                first = next((line for line in text.splitlines() if line.startswith("0::")),
                             text.strip().splitlines()[0] if text.strip() else "")
                reasons[pid] = "PID %d is not in a container (cgroup %s)" % (pid, first or "empty")
    hidden = [pid for pid, why in reasons.items() if why == NOT_VISIBLE % pid]
    if hidden:
        owners = engine.pid_owners()
        for pid in hidden:
            if pid in owners:
                cgroup_ids[pid] = [("docker", owners[pid])]
                del reasons[pid]
    wanted = sorted({cid for ids in cgroup_ids.values() for _runtime, cid in ids})
    records, engine_error = engine.inspect(wanted)

    result = []
    for gpu in gpus:
        processes = []
        for process in gpu["processes"]:
            pid = process["pid"]
            resolved = dict(process, container=None, container_id=None, compose_project=None,
                            compose_service=None, attribution=reasons.get(pid),
                            running_s=read_age(pid))
            for runtime, container_id in cgroup_ids.get(pid, []):
                record = records.get(container_id)
                if record:
                    resolved.update(container=record["name"], container_id=container_id,
                                    compose_project=record["compose_project"],
                                    compose_service=record["compose_service"], attribution=None)
                    if record.get("seat"):
                        resolved.update(seat=record["seat"], image=record["image"], args=record["args"])
                    elif record.get("running"):
                        resolved["running"] = record["running"]
                    if not record["compose_service"] and not record.get("seat"):
                        resolved["attribution"] = ("container %s was not started by docker compose "
                                                   "(no %s label)" % (record["name"], COMPOSE_SERVICE_LABEL))
                    break
            else:
                if pid in cgroup_ids:
                    runtime, container_id = cgroup_ids[pid][0]
                    resolved["container_id"] = container_id
                    resolved["attribution"] = _explain_unresolved(runtime, container_id, engine,
                                                                  engine_error)
            processes.append(resolved)
        result.append(dict(gpu, processes=processes, **_accounting(gpu.get("memory_used_mib"), processes)))
    return result, ["process attribution: %s" % engine_error] if engine_error else []


def without_attribution(gpus, why):
    """The same keys as attribute_processes, with every process unresolved for ``why``."""
    result = []
    for gpu in gpus:
        processes = [dict(process, container=None, container_id=None, compose_project=None,
                          compose_service=None, attribution=why, running_s=None)
                     for process in gpu["processes"]]
        result.append(dict(gpu, processes=processes, **_accounting(gpu.get("memory_used_mib"), processes)))
    return result


def _accounting(used, processes):
    known = [p for p in processes if p.get("used_mib") is not None]
    attributed = sum(p["used_mib"] for p in known if p.get("container"))
    listed = sum(p["used_mib"] for p in known)
    return {
        "attributed_mib": attributed,
        "unattributed_mib": None if used is None else used - attributed,
        "unlisted_mib": None if used is None else used - listed,
    }
