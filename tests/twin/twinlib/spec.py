"""The twin's spec: which hosts, which simulated GPUs each has, which image tags the seats use.

A spec is JSON (docs/twin.md has the whole format):

    {"hosts": [{"name": "fv-ml1",
                "gpus": [{"count": 4, "name": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                          "memory_total_mib": 97887}]}]}

`hosts` is a list of hosts or a number of hosts alike; a host without `gpus` gets the spec's
top-level `gpus`. Each GPU entry may stand for `count` identical cards; `uuid` (count 1) or
`uuids` (one per card) pin their UUIDs, else each gets a stable one derived from host and index.
Errors name the field and what was expected, in one line.
"""

from __future__ import annotations

import re
import uuid

DEFAULT_GPUS = [{"count": 2, "name": "NVIDIA H200", "memory_total_mib": 143771}]
# Tag -> what the image runs. `vllm` is the real image's tag and entrypoint (`vllm serve`).
DEFAULT_IMAGES = {"vllm/vllm-openai:v0.33.0": "vllm", "llmfleet/asr-seat:twin": "asr"}
IMAGE_KINDS = ("vllm", "asr", "radiance", "real-vllm")
DRIVER = {"driver_version": "580.95.05", "nvml_version": "13.580.95.05",
          "cuda_driver_version": 13000}
# Bus numbers as an eight-GPU server enumerates them.
PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
HOST_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")
GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MAX_HOSTS = 200  # the twin's /24 holds hosts .11 to .210

_TOP_KEYS = {"description", "hosts", "gpus", "images", "image_env", "driver_version",
             "nvml_version", "cuda_driver_version"}
_HOST_KEYS = {"name", "gpus", "kind", "memory_mib"}
# A host's RAM, as its simulated /proc/meminfo shows it, when the spec gives none.
HOST_MEMORY_MIB = 262144
# `plain`: PID 1 is not systemd (as on this machine); `systemd`: the host's sshd and every SSH
# session run under a real systemd as PID 1 (twinlib/sysroot.py).
HOST_KINDS = ("plain", "systemd")
_GPU_KEYS = {"count", "name", "memory_total_mib", "memory_reserved_mib", "background_used_mib",
             "uuid", "uuids"}


class SpecError(ValueError):
    """The spec is malformed; the message names the field and what was expected."""


def _expect(condition: bool, where: str, expected: str, got: object) -> None:
    if not condition:
        raise SpecError("twin spec %s: expected %s, got %r" % (where, expected, got))


def _int(value: object, where: str, minimum: int) -> int:
    _expect(isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
            where, "an integer >= %d" % minimum, value)
    return value


def _known_keys(entry: object, allowed: set, where: str) -> dict:
    _expect(isinstance(entry, dict), where, "an object", entry)
    unknown = sorted(set(entry) - allowed)
    _expect(not unknown, where, "only the keys %s" % ", ".join(sorted(allowed)),
            ", ".join(unknown))
    return entry


def stable_uuid(host: str, index: int) -> str:
    """The UUID a GPU gets when the spec names none: the same host and index give the same one."""
    return "GPU-%s" % uuid.uuid5(uuid.NAMESPACE_URL, "llmfleet-twin/%s/%d" % (host, index))


def _expand_gpus(host: str, entries: object, where: str) -> list:
    _expect(isinstance(entries, list) and entries, where, "a non-empty list of GPU entries",
            entries)
    gpus = []
    for n, entry in enumerate(entries):
        at = "%s[%d]" % (where, n)
        _known_keys(entry, _GPU_KEYS, at)
        count = _int(entry.get("count", 1), at + ".count", 1)
        name = entry.get("name")
        _expect(isinstance(name, str) and name.strip() != "", at + ".name",
                "the GPU's product name", name)
        total = _int(entry.get("memory_total_mib"), at + ".memory_total_mib", 1)
        reserved = _int(entry.get("memory_reserved_mib", 0), at + ".memory_reserved_mib", 0)
        background = entry.get("background_used_mib", 0)
        if isinstance(background, list):
            _expect(len(background) == count, at + ".background_used_mib",
                    "one value per GPU (%d)" % count, background)
        else:
            background = [background] * count
        background = [_int(b, at + ".background_used_mib", 0) for b in background]
        for b in background:
            _expect(reserved + b <= total, at + ".background_used_mib",
                    "at most memory_total_mib - memory_reserved_mib (%d)" % (total - reserved), b)
        if "uuid" in entry:
            _expect(count == 1 and "uuids" not in entry, at + ".uuid",
                    "`uuid` for a single GPU (use `uuids` with count > 1)", entry["uuid"])
            uuids = [entry["uuid"]]
        else:
            uuids = entry.get("uuids")
        if uuids is not None:
            _expect(isinstance(uuids, list) and len(uuids) == count, at + ".uuids",
                    "a list of %d UUIDs" % count, uuids)
            for u in uuids:
                _expect(isinstance(u, str) and GPU_UUID.match(u) is not None, at + ".uuids",
                        "UUIDs like GPU-1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b (lower-case hex)", u)
        for i in range(count):
            index = len(gpus)
            gpus.append({
                "index": index,
                "uuid": uuids[i] if uuids else stable_uuid(host, index),
                "name": name,
                "memory_total_mib": total,
                "memory_reserved_mib": reserved,
                "background_used_mib": background[i],
            })
    _expect(len(gpus) <= len(PCI_BUSES), where, "at most %d GPUs per host" % len(PCI_BUSES),
            len(gpus))
    return gpus


def parse_spec(spec: object, host_count: int | None = None) -> dict:
    """Validate a spec (a parsed JSON value, or None) and return the fleet it describes:
    {"hosts": [{"name", "gpus": [...], "kind"}], "images": {tag: kind}, "driver": {...}}.
    `host_count` is `--hosts N`: the number of hosts when the spec gives none, else a check."""
    spec = {} if spec is None else spec
    _known_keys(spec, _TOP_KEYS, "(top level)")
    default_gpus = spec.get("gpus", DEFAULT_GPUS)
    hosts = spec.get("hosts", host_count if host_count is not None else 1)
    if isinstance(hosts, int) and not isinstance(hosts, bool):
        count = _int(hosts, "hosts", 1)
        if host_count is not None and host_count != count:
            raise SpecError("twin spec hosts: the spec asks for %d host(s) but --hosts %d"
                            % (count, host_count))
        hosts = [{"name": "twin%d" % (i + 1)} for i in range(count)]
    _expect(isinstance(hosts, list) and hosts, "hosts", "a host count or a non-empty list",
            hosts)
    if host_count is not None and host_count != len(hosts):
        raise SpecError("twin spec hosts: the spec lists %d host(s) but --hosts %d"
                        % (len(hosts), host_count))
    _expect(len(hosts) <= MAX_HOSTS, "hosts", "at most %d hosts" % MAX_HOSTS, len(hosts))

    fleet_hosts, seen_uuids = [], {}
    for n, host in enumerate(hosts):
        where = "hosts[%d]" % n
        _known_keys(host, _HOST_KEYS, where)
        name = host.get("name")
        _expect(isinstance(name, str) and HOST_NAME.match(name) is not None, where + ".name",
                "a host name of lower-case letters, digits, '.' and '-' (at most 63)", name)
        _expect(name not in [h["name"] for h in fleet_hosts], where + ".name",
                "a name no other host has", name)
        gpus_where = where + ".gpus" if "gpus" in host else "gpus"
        gpus = _expand_gpus(name, host.get("gpus", default_gpus), gpus_where)
        for gpu in gpus:
            _expect(gpu["uuid"] not in seen_uuids, gpus_where,
                    "UUIDs unique across the fleet (%s is on %s too)"
                    % (gpu["uuid"], seen_uuids.get(gpu["uuid"])), gpu["uuid"])
            seen_uuids[gpu["uuid"]] = name
        kind = host.get("kind", "plain")
        _expect(kind in HOST_KINDS, where + ".kind", " or ".join(HOST_KINDS), kind)
        memory = _int(host.get("memory_mib", HOST_MEMORY_MIB), where + ".memory_mib", 1024)
        fleet_hosts.append({"name": name, "gpus": gpus, "kind": kind, "memory_mib": memory})

    images = spec.get("images", DEFAULT_IMAGES)
    _expect(isinstance(images, dict) and images, "images", "an object of image tag -> kind",
            images)
    for tag, kind in images.items():
        _expect(kind in IMAGE_KINDS, "images[%r]" % tag, "one of %s" % ", ".join(IMAGE_KINDS),
                kind)
    image_env = spec.get("image_env", {})
    _expect(isinstance(image_env, dict) and all(
        tag in images and isinstance(env, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        for tag, env in image_env.items()), "image_env",
        "an object of image tag (one of images) -> {VARIABLE: string}", image_env)
    driver = dict(DRIVER)
    for key in DRIVER:
        if key in spec:
            _expect(isinstance(spec[key], type(DRIVER[key])), key,
                    "a %s like %r" % (type(DRIVER[key]).__name__, DRIVER[key]), spec[key])
            driver[key] = spec[key]
    return {"hosts": fleet_hosts, "images": dict(images), "image_env": dict(image_env),
            "driver": driver}


def spec_from_inventory(inventory: dict) -> dict:
    """A spec shaped like an Ansible inventory's GPU hosts (`ansible-inventory --list` output):
    every host with `llmfleet_gpus` (CONTRIBUTING.md, "The fleet as data") becomes a twin host
    with those GPUs and UUIDs, and every seat's image a tag the twin provides: the vLLM stand-in
    for an image a vLLM seat uses or named like vLLM's, else the fixed-size (ASR) tenant, which
    then takes the seat's memory_cap_bytes."""
    hostvars = inventory.get("_meta", {}).get("hostvars", {})
    hosts, images, image_env = [], {}, {}
    for name in sorted(hostvars):
        gpus = hostvars[name].get("llmfleet_gpus")
        if gpus is None:
            continue
        where = "inventory host %s: llmfleet_gpus" % name
        _expect(isinstance(gpus, list) and all(isinstance(g, dict) for g in gpus), where,
                "a list of GPUs", gpus)
        hosts.append({"name": name, "gpus": [
            {"name": g.get("name"), "memory_total_mib": g.get("memory_total_mib"),
             "uuid": g.get("uuid")}
            for g in sorted(gpus, key=lambda g: g.get("index", 0))]})
        for seat in hostvars[name].get("llmfleet_seats") or []:
            if isinstance(seat, dict) and isinstance(seat.get("image"), str):
                vllm = seat.get("engine") == "vllm" or "vllm" in seat["image"]
                if vllm or seat["image"] not in images:
                    images[seat["image"]] = "vllm" if vllm else "asr"
                if not vllm and seat.get("memory_cap_bytes") is not None:
                    image_env[seat["image"]] = {"FAKE_ASR_MEMORY": str(seat["memory_cap_bytes"])}
    _expect(bool(hosts), "inventory", "at least one host with llmfleet_gpus", sorted(hostvars))
    return {"hosts": hosts, "images": images or dict(DEFAULT_IMAGES), "image_env": image_env}


def gpu_state(host: dict, driver: dict) -> dict:
    """The host's initial state.json (CONTRIBUTING.md, "The simulated GPU"): no processes yet."""
    return {
        "schema": 1,
        **driver,
        # the host's RAM and what seats pin of it (the driver keeps /proc/meminfo's figures)
        "host": {"memory_mib": host.get("memory_mib", HOST_MEMORY_MIB), "pinned_mib": 0},
        "gpus": [
            {
                "index": gpu["index"],
                "uuid": gpu["uuid"],
                "name": gpu["name"],
                "pci_bus_id": "00000000:%02X:00.0" % PCI_BUSES[gpu["index"]],
                "serial": "16520%08d" % (int(gpu["uuid"][4:12], 16) % 10 ** 8),
                "memory_total_mib": gpu["memory_total_mib"],
                "memory_reserved_mib": gpu["memory_reserved_mib"],
                "background_used_mib": gpu["background_used_mib"],
                "mig_mode": False,
                "processes": [],
            }
            for gpu in host["gpus"]
        ],
        "faults": {},
    }
