# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What every running container of a host launches, as adopt_info returns it: image, command
line, its own environment (a secret's name only, never its value), ports, GPUs, mounts and
restart policy, the systemd unit whose ``docker run`` started it; and for a vLLM server the
config.json and weights of the model it serves, found through its mounts (a model directory,
or the Hugging Face cache)."""

from __future__ import annotations

import datetime
import glob
import json
import os
import stat

from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import value_depth
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    MANAGED_LABEL,
    REDACTED,
    SECRET_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common import systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import model_of
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import VllmLogError, parse_boot_log
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import image_version

_HF_HOME = "/root/.cache/huggingface"  # huggingface_hub's default for root, as in vLLM's image
# A model's config.json is kilobytes; what is larger, or nests deeper, is not one.
CONFIG_LIMIT = 1024 * 1024
CONFIG_DEPTH = 32
_HUB_ID_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)?\Z")
_REVISION_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")


def _inside(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _container_path(path, mounts):
    """``(host path, mount root, None)`` behind a path inside the container, through its longest
    mount, or ``(None, None, why)``. A path that climbs (``..``) is refused, and so is one whose
    links lead out of the mount: nothing outside what the container mounts is ever read."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None, None, "%s climbs out of its directory (..); not followed" % path
    path = "/" + "/".join(parts)
    best = None
    for mount in mounts:
        target = "/" + "/".join(part for part in mount["destination"].split("/") if part not in ("", "."))
        if _inside(path, target) and (best is None or len(target) > len(best[1])):
            best = (mount, target)
    if best is None or not best[0].get("source"):
        return None, None, "%s is inside the image (no mount holds it)" % path
    root = os.path.realpath(best[0]["source"])
    rest = path[len(best[1]):].lstrip("/")
    resolved = os.path.realpath(os.path.join(root, rest))
    if not _inside(resolved, root):
        return None, None, "%s leads out of its mount (a link to %s); not followed" % (path, resolved)
    return resolved, root, None


def _hub_snapshot(model, environment, mounts):
    """``(directory, mount root, None)`` of the snapshot of a Hugging Face id that the cache the
    container mounts holds (its refs/main, else the newest), or ``(None, None, why)``."""
    if not _HUB_ID_RE.match(model) or ".." in model:
        return None, None, "%s is neither a path nor a Hugging Face id" % model
    hub = environment.get("HF_HUB_CACHE") or os.path.join(environment.get("HF_HOME") or _HF_HOME, "hub")
    host_hub, root, _why = _container_path(hub, mounts)
    if host_hub is None:
        return None, None, "the container mounts no Hugging Face cache at %s" % hub
    repo = os.path.join(host_hub, "models--" + model.replace("/", "--"))
    try:
        with open(os.path.join(repo, "refs", "main"), "rb") as handle:
            revision = handle.read(256).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        revision = None
    if revision is not None and not _REVISION_RE.match(revision):
        return None, None, "%s: its refs/main names no snapshot" % model
    snapshots = sorted(glob.glob(os.path.join(repo, "snapshots", "*")), key=os.path.getmtime)
    chosen = os.path.join(repo, "snapshots", revision) if revision else (snapshots[-1] if snapshots else None)
    if chosen:
        chosen = os.path.realpath(chosen)
    if not chosen or not _inside(chosen, root) or not os.path.isdir(chosen):
        return None, None, "%s is not in the Hugging Face cache at %s" % (model, host_hub)
    return chosen, root, None


def _read_capped(path, root, limit):
    """The bytes of a regular file inside ``root`` (its links resolved, never followed out),
    at most ``limit`` of them; ValueError says what it is instead."""
    resolved = os.path.realpath(path)
    if not _inside(resolved, root):
        raise ValueError("a link out of its mount (to %s); not followed" % resolved)
    # non-blocking: a pipe where a config should be is refused, not waited on
    with os.fdopen(os.open(resolved, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("not a regular file")
        if status.st_size > limit:
            raise ValueError("%d bytes, over the %d a model config may have" % (status.st_size, limit))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError("over the %d bytes a model config may have" % limit)
    return data


def _model_config(path, root):
    """``(config, None)`` when ``path`` is provably a model's config.json (a JSON object naming
    its ``model_type`` or ``architectures``, within the size and depth bounds), else
    ``(None, why it was skipped)``."""
    try:
        config = json.loads(_read_capped(path, root, CONFIG_LIMIT).decode("utf-8"))
    except OSError as exc:
        return None, "%s cannot be read: %s" % (path, exc.strerror or exc)
    except RecursionError:
        return None, "%s is nested deeper than a model config; skipped" % path
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None, "%s is not a model config (%s); skipped" % (path, exc)
    if not isinstance(config, dict) or not (
            isinstance(config.get("model_type"), str) or isinstance(config.get("architectures"), list)):
        return None, "%s is not a model config (a JSON object with model_type or architectures); skipped" % path
    if value_depth(config) > CONFIG_DEPTH:
        return None, "%s is nested deeper than %d levels, more than a model config; skipped" % (path, CONFIG_DEPTH)
    return config, None


def model_files(model, environment, mounts):
    """``{model_dir, model_config, weights_bytes, problem}`` of the model a vLLM server serves:
    a path inside the container is followed through its mounts, an id looked up in its
    Hugging Face cache; only the directory's own config.json is read, and ``problem`` says why
    it was skipped (a path that climbs or links out of its mount, not a regular file, too
    large, not a model config)."""
    found = {"model_dir": None, "model_config": None, "weights_bytes": None, "problem": None}
    if model.startswith("/"):
        directory, root, found["problem"] = _container_path(model, mounts)
    else:
        directory, root, found["problem"] = _hub_snapshot(model, environment, mounts)
    if directory is None:
        return found
    found["model_dir"] = directory
    found["model_config"], found["problem"] = _model_config(os.path.join(directory, "config.json"), root)
    if found["model_config"] is not None:
        found["weights_bytes"] = _weights_bytes(directory, root)
    return found


def _weights_bytes(directory, root):
    """The checkpoint's tensor bytes: the safetensors index's total_size (what vLLM loads),
    else the size of the checkpoint files (the Hugging Face cache links them to its blobs);
    nothing outside the mount counts."""
    try:
        index = json.loads(_read_capped(os.path.join(directory, "model.safetensors.index.json"), root,
                                        CONFIG_LIMIT).decode("utf-8"))
        total = index["metadata"]["total_size"]
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            return total
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        pass
    files = {os.path.realpath(name) for pattern in _WEIGHT_PATTERNS
             for name in glob.glob(os.path.join(directory, pattern))}
    return sum(os.path.getsize(name) for name in files if _inside(name, root) and os.path.isfile(name)) or None


def _running_seconds(started_at, now):
    if not isinstance(started_at, str):
        return None
    try:
        started = datetime.datetime.fromisoformat(started_at[:26].rstrip("Z") + "+00:00")
    except (TypeError, ValueError):
        return None
    return max(0, int((now - started).total_seconds()))


def _environment(own):
    """The container's own variables (not its image's): ``(plain, secret names)``."""
    plain, secrets = {}, []
    for name, value in own.items():
        if SECRET_NAME_RE.search(name):
            secrets.append(name)
        else:
            plain[name] = value
    return plain, sorted(secrets)


def _pairs(entries):
    return dict(entry.split("=", 1) if "=" in entry else (entry, "") for entry in _strings(entries))


def _dict(value):
    return value if isinstance(value, dict) else {}


def _dicts(value):
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _strings(value):
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _text(value):
    return value if isinstance(value, str) else None


def _port(value):
    text = str(value).partition("/")[0]
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def _without_secret_values(args):
    """The command line with the value of every flag named as a secret (``--api-key KEY``,
    ``--hf-token=...``) replaced by REDACTED: a secret on a command line is never returned."""
    shown, hiding = [], False
    for arg in args:
        if hiding and not arg.startswith("-"):
            shown.append(REDACTED)
            hiding = False
            continue
        flag, has_value, _value = arg.partition("=")
        secret = arg.startswith("-") and SECRET_NAME_RE.search(flag.lstrip("-")) is not None
        hiding = secret and not has_value
        shown.append(flag + "=" + REDACTED if secret and has_value else arg)
    return shown


def container_record(attrs, image_env, now):
    """One running container as adopt_info returns it (what docker does not say is left empty)."""
    config, host = _dict(attrs.get("Config")), _dict(attrs.get("HostConfig"))
    labels = {k: v for k, v in _dict(config.get("Labels")).items() if isinstance(v, str)}
    env = _pairs(config.get("Env"))
    defaults = _pairs(image_env.get(_text(attrs.get("Image")), []))
    own = {name: value for name, value in env.items() if defaults.get(name) != value}
    plain, secrets = _environment(own)
    mounts = [{"source": _text(m.get("Source")), "destination": m["Destination"], "read_only": not m.get("RW", True)}
              for m in _dicts(attrs.get("Mounts")) if _text(m.get("Destination"))]
    ports = []
    for spec, bindings in sorted(_dict(host.get("PortBindings")).items()):
        protocol = spec.partition("/")[2] or "tcp"
        for binding in _dicts(bindings):
            if _port(spec) and _port(binding.get("HostPort")):
                # docker's "" is every interface
                ports.append({"container_port": _port(spec), "host_port": _port(binding["HostPort"]),
                              "host_ip": _text(binding.get("HostIp")) or "", "protocol": protocol})
    devices = [request for request in _dicts(host.get("DeviceRequests"))
               if request.get("Driver") in ("nvidia", "", None) or ["gpu"] in (request.get("Capabilities") or [])]
    path = _text(attrs.get("Path"))
    record = {
        "name": (_text(attrs.get("Name")) or "").lstrip("/"),
        "compose_project": labels.get("com.docker.compose.project"),
        "compose_service": labels.get("com.docker.compose.service"),
        "managed_seat": labels.get(MANAGED_LABEL),
        "image": _text(config.get("Image")),
        "image_id": _text(attrs.get("Image")),
        "args": _without_secret_values([path] + _strings(attrs.get("Args"))) if path else [],
        "environment": plain,
        "secret_environment": secrets,
        "ports": ports,
        "network_mode": _text(host.get("NetworkMode")),
        "networks": sorted(name for name in _dict(_dict(attrs.get("NetworkSettings")).get("Networks"))
                           if isinstance(name, str)),
        "ipc_mode": _text(host.get("IpcMode")),
        "gpu_device_ids": sorted({str(i) for request in devices for i in _strings(request.get("DeviceIDs"))}),
        "gpu_all": any(request.get("Count") == -1 for request in devices),
        "visible_devices": env.get("NVIDIA_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES"),
        "mounts": mounts,
        "restart_policy": _text(_dict(host.get("RestartPolicy")).get("Name")) or "no",
        "running_s": _running_seconds(_dict(attrs.get("State")).get("StartedAt"), now),
        "model": None,
    }
    model = model_of(record["args"])
    if model:
        record["model"] = dict(model_files(model, env, mounts), name=model)
    return record


# A cgroup path's service: "/system.slice/qwen.service" (cgroup v2's "0::" line, or v1's
# name=systemd hierarchy).
_SERVICE = lazy_regex(r"/([^/]+\.service)(?:/|$)")


def _docker_run_name(argv):
    """The ``--name`` of a ``docker run`` (or ``docker container run``) command line, or None."""
    if len(argv) < 2 or os.path.basename(argv[0]) != "docker":
        return None
    rest = argv[1:]
    if rest[:2] == ["container", "run"]:
        rest = rest[2:]
    elif rest[:1] == ["run"]:
        rest = rest[1:]
    else:
        return None
    for index, arg in enumerate(rest):
        if arg == "--name" and index + 1 < len(rest):
            return rest[index + 1]
        if arg.startswith("--name="):
            return arg.split("=", 1)[1]
    return None


def _service_of(pid, proc_root):
    try:
        with open(os.path.join(proc_root, pid, "cgroup")) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _sep, path = line.partition(":")[2].partition(":")
        if hierarchy in ("", "name=systemd"):
            found = _SERVICE.search(path)
            if found:
                return found.group(1)
    return None


def docker_run_services(proc_root="/proc"):
    """``{container name: service}`` for every process running ``docker run --name <container>``
    in a systemd service (a unit's serve script, exec'd or not)."""
    found = {}
    for pid in sorted(name for name in os.listdir(proc_root) if name.isdigit()):
        try:
            with open(os.path.join(proc_root, pid, "cmdline"), "rb") as handle:
                argv = [part.decode("utf-8", "replace") for part in handle.read().split(b"\0") if part]
        except OSError:
            continue
        container = _docker_run_name(argv)
        unit = _service_of(pid, proc_root) if container else None
        if unit:
            found[container] = unit
    return found


def systemd_units():
    """``{container name: {"name", "restart", "fragment"}}``: the service that started each
    container, its ``Restart=`` and unit file. Empty on a host whose PID 1 is not systemd."""
    if not systemd.booted():
        return {}
    units = {}
    for container, unit in docker_run_services().items():
        shown = systemd.show(unit, ["Restart", "FragmentPath"])
        units[container] = {"name": unit, "restart": shown.get("Restart") or None,
                            "fragment": shown.get("FragmentPath") or None}
    return units


def _logged_version(docker, record, started_at):
    """The vLLM version a server's boot log printed (its first minutes only), or None."""
    try:
        started = datetime.datetime.fromisoformat(started_at[:26].rstrip("Z"))
    except (TypeError, ValueError):
        return None
    until = (started + datetime.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")  # docker's times are UTC
    rc, out, _err = docker.run(["logs", "--until", until, record["name"]], timeout=60, merge_output=True)
    if rc != 0:
        return None
    try:
        return parse_boot_log(out).get("version")
    except VllmLogError:
        return None


def running_containers(docker):
    """Every running container of the Docker engine, by name (DockerError when it cannot be
    asked)."""
    rc, out, err = docker.run(["ps", "--quiet", "--no-trunc"], timeout=60)
    if rc != 0:
        raise DockerError("docker ps failed (rc=%d): %s" % (rc, (err or out).strip()))
    found, why = docker.inspect(out.split())
    if why:
        raise DockerError(why)
    images = sorted({attrs.get("Image") for attrs in found.values() if attrs.get("Image")})
    image_env = {}
    if images:
        rc, out, err = docker.run(["image", "inspect"] + images, timeout=60)
        if rc == 0:
            image_env = {image.get("Id"): (image.get("Config") or {}).get("Env") or []
                         for image in json.loads(out or "[]") if isinstance(image, dict)}
    now = datetime.datetime.now(datetime.timezone.utc)
    units = systemd_units()
    records = []
    for attrs in found.values():
        record = container_record(attrs, image_env, now)
        record["systemd_unit"] = units.get(record["name"])
        record["vllm_version"] = _logged_version(docker, record, _dict(attrs.get("State")).get("StartedAt")) \
            if record["model"] and image_version(record["image"]) is None else None
        records.append(record)
    return sorted(records, key=lambda r: r["name"])
