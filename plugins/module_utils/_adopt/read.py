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
import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MANAGED_LABEL, SECRET_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._common import systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import model_of
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import VllmLogError, parse_boot_log
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import image_version

_HF_HOME = "/root/.cache/huggingface"  # huggingface_hub's default for root, as in vLLM's image
_CONFIG_LIMIT = 4 * 1024 * 1024
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")


def _container_path(path, mounts):
    """The host path behind a path inside the container, through its longest mount, or None."""
    best = None
    for mount in mounts:
        target = mount["destination"].rstrip("/") or "/"
        if path == target or path.startswith(target.rstrip("/") + "/"):
            if best is None or len(target) > len(best["destination"]):
                best = mount
    if best is None or not best.get("source"):
        return None
    rest = path[len(best["destination"].rstrip("/")):].lstrip("/")
    return os.path.join(best["source"], rest) if rest else best["source"]


def _hub_snapshot(model, environment, mounts):
    """The host directory of the newest snapshot of a Hugging Face id in the cache the
    container mounts, or (None, why)."""
    hub = environment.get("HF_HUB_CACHE") or os.path.join(environment.get("HF_HOME") or _HF_HOME, "hub")
    host_hub = _container_path(hub, mounts)
    if host_hub is None:
        return None, "the container mounts no Hugging Face cache at %s" % hub
    repo = os.path.join(host_hub, "models--" + model.replace("/", "--"))
    try:
        with open(os.path.join(repo, "refs", "main")) as handle:
            revision = handle.read().strip()
    except OSError:
        revision = None
    snapshots = sorted(glob.glob(os.path.join(repo, "snapshots", "*")), key=os.path.getmtime)
    chosen = os.path.join(repo, "snapshots", revision) if revision else (snapshots[-1] if snapshots else None)
    if not chosen or not os.path.isdir(chosen):
        return None, "%s is not in the Hugging Face cache at %s" % (model, host_hub)
    return chosen, None


def model_files(model, environment, mounts):
    """``{model_dir, model_config, weights_bytes, problem}`` of the model a vLLM server serves:
    a path inside the container is followed through its mounts, an id looked up in its
    Hugging Face cache; ``problem`` says why a config could not be read."""
    found = {"model_dir": None, "model_config": None, "weights_bytes": None, "problem": None}
    if model.startswith("/"):
        directory = _container_path(model, mounts)
        if directory is None:
            found["problem"] = "%s is inside the image (no mount holds it)" % model
            return found
    else:
        directory, found["problem"] = _hub_snapshot(model, environment, mounts)
        if directory is None:
            return found
    found["model_dir"] = directory
    path = os.path.join(directory, "config.json")
    try:
        with open(path, "rb") as handle:
            data = handle.read(_CONFIG_LIMIT + 1)
        config = json.loads(data.decode("utf-8")) if len(data) <= _CONFIG_LIMIT else None
    except (OSError, ValueError) as exc:
        found["problem"] = "%s cannot be read as a model config: %s" % (path, getattr(exc, "strerror", None) or exc)
        return found
    if not isinstance(config, dict):
        found["problem"] = "%s is not a model config (a JSON object)" % path
        return found
    found["model_config"] = config
    found["weights_bytes"] = _weights_bytes(directory)
    return found


def _weights_bytes(directory):
    """The checkpoint's tensor bytes: the safetensors index's total_size (what vLLM loads),
    else the size of the checkpoint files (the Hugging Face cache links them to its blobs)."""
    try:
        with open(os.path.join(directory, "model.safetensors.index.json"), "rb") as handle:
            total = json.loads(handle.read(_CONFIG_LIMIT).decode("utf-8"))["metadata"]["total_size"]
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            return total
    except (OSError, ValueError, KeyError, TypeError):
        pass
    files = {os.path.realpath(name) for pattern in _WEIGHT_PATTERNS
             for name in glob.glob(os.path.join(directory, pattern))}
    return sum(os.path.getsize(name) for name in files) or None


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
                ports.append({"container_port": _port(spec), "host_port": _port(binding["HostPort"]),
                              "protocol": protocol})
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
        "args": [path] + _strings(attrs.get("Args")) if path else [],
        "environment": plain,
        "secret_environment": secrets,
        "ports": ports,
        "network_mode": _text(host.get("NetworkMode")),
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
_SERVICE = re.compile(r"/([^/]+\.service)(?:/|$)")


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
