# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A starting inventory for a host something else started: its GPUs from a gpu_info reading,
every container on a GPU as a seat (a vLLM server with the fields that launch it, anything
else as a fixed tenant capped at what it holds now), the model configs they serve, a plateau
snapshot once every seat has run a day, and a note for everything it could not work out."""

from __future__ import annotations

import ipaddress
import json
import re

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.host_vars_file import Template, dump
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import (
    build_snapshot,
    dump_snapshot,
    utc_timestamp,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import value_depth
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    CONTAINER_NAME_RE,
    HOST_NAME_EXPECTED,
    HOST_NAME_RE,
    NETWORK_NAME_RE,
    SEAT_NAME_RE,
    SECRET_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import SERVED_NAME_RE, server_args
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import adopted_fields
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.card_profiles import profile_of_card
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import GPU_PROFILES
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import image_version

PLATEAU_SECONDS = 24 * 3600  # "headroom at plateau": a day after boot
MAX_FIELD_DEPTH = 16  # default_chat_template_kwargs and the like are a level or two deep
# What Ansible would template, were the text not written !unsafe (host_vars_file): a note says
# where a host's text holds it.
_TEMPLATE_RE = lazy_regex(r"\{\{|\{%|\{#")
_CONTROL_RE = lazy_regex(r"[\x00-\x1f\x7f]")
_VARIABLE_RE = lazy_regex(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
# Variables the runtime sets from the seat's GPUs; carried over they would fight it.
_GPU_VARIABLES = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
# docker's own networks: not ones a seat joins by name
_DOCKER_NETWORKS = ("bridge", "host", "none")


class AdoptError(ValueError):
    """What adopt_info returned cannot be read as a host."""


def _seat_name(record, taken):
    """The seat's own name when the collection runs it, else the compose service's name (else
    the container's) in the seat grammar, unique."""
    managed = record.get("managed_seat")
    raw = managed if isinstance(managed, str) and SEAT_NAME_RE.match(managed) else \
        record.get("compose_service") or record["name"]
    name = re.sub(r"[^a-z0-9_-]+", "-", raw.lower()).strip("-_") or "seat"
    if not SEAT_NAME_RE.match(name):
        name = "seat-" + name
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = "%s-%d" % (name, number), number + 1
    taken.add(candidate)
    return candidate


def _gpus_of(record, cards):
    """The UUIDs of the GPUs a container uses: its device request, its visible devices, else
    the GPUs its processes hold memory on."""
    by_key = {}
    for gpu in cards["gpus"]:
        by_key[str(gpu["index"])] = gpu["uuid"]
        by_key[gpu["uuid"]] = gpu["uuid"]
    wanted = list(record.get("gpu_device_ids") or [])
    visible = record.get("visible_devices")
    if not wanted and visible and visible not in ("all", "void", "none"):
        wanted = [part.strip() for part in visible.split(",") if part.strip()]
    if wanted:
        return [by_key[key] for key in wanted if key in by_key]
    return [gpu["uuid"] for gpu in cards["gpus"]
            if any(p.get("container") == record["name"] for p in gpu.get("processes") or [])]


def _held_mib(record, cards):
    """What the container's processes hold per GPU now (MiB)."""
    held = {}
    for gpu in cards["gpus"]:
        used = sum(p.get("used_mib") or 0 for p in gpu.get("processes") or [] if p.get("container") == record["name"])
        if used:
            held[gpu["uuid"]] = used
    return held


def _with_secrets(seat, record, secrets_note):
    """Each secret variable as a reference to a vault variable: the value stays on the host."""
    secrets = [name for name in record["secret_environment"] if _VARIABLE_RE.match(name)]
    if len(secrets) < len(record["secret_environment"]):
        secrets_note("seat %s: a secret whose name is not a variable name (left out)" % seat["name"])
    if secrets:
        stem = seat["name"].replace("-", "_")
        seat["secret_environment"] = {secret: Template("{{ vault_%s_%s }}" % (stem, secret.lower()))
                                      for secret in secrets}
        secrets_note(", ".join("vault_%s_%s" % (stem, secret.lower()) for secret in secrets))
    return seat


def _common_fields(name, record, gpus, note):
    seat = {"name": name, "engine": None, "image": record["image"]}
    if record["name"] != name and not record.get("managed_seat"):  # the collection names its own
        if CONTAINER_NAME_RE.match(record["name"]):
            seat["container_name"] = record["name"]
        else:
            note("seat %s: container_name: its container's name is none docker gives (letters, digits, '_', '.' "
                 "or '-'); left out: set it to the container's name" % name)
    seat["current_gpu"] = gpus[0] if len(gpus) == 1 else gpus
    environment = {k: v for k, v in sorted(record["environment"].items()) if k not in _GPU_VARIABLES}
    if environment:
        seat["environment"] = environment
    volumes = ["%s:%s%s" % (m["source"], m["destination"], ":ro" if m["read_only"] else "")
               for m in record["mounts"] if m.get("source")]
    if volumes:
        seat["volumes"] = volumes
    return seat


def _exposure(seat, record, container_port, note):
    """The seat's port, the address it is published on and the networks it joins, as the
    container has them: a window never publishes it wider than it was."""
    name = seat["name"]
    if record.get("network_mode") == "host":
        seat["port"], seat["bind_address"] = container_port, "0.0.0.0"
        note("seat %s: ran on the host's network, reachable on every interface: bind_address 0.0.0.0 keeps it so; "
             "set the address the gateway comes in on" % name)
        return
    bindings = [p for p in record["ports"] if p["container_port"] == container_port]
    if not bindings:
        note("seat %s: its port %d is not published on the host; set port" % (name, container_port))
        return
    first = bindings[0]
    seat["port"] = first["host_port"]
    host_ip = first.get("host_ip")
    try:
        seat["bind_address"] = str(ipaddress.ip_address(host_ip or "0.0.0.0"))
    except ValueError:
        note("seat %s: published on a host address adopt cannot read; set bind_address" % name)
    if not host_ip:
        note("seat %s: published on all interfaces (port %d): bind_address 0.0.0.0 keeps it so; set the "
             "address the gateway comes in on" % (name, first["host_port"]))
    if len(bindings) > 1:
        note("seat %s: port %d is published %d times; only the first, port %d on %s, is kept" % (
            name, container_port, len(bindings), first["host_port"], seat.get("bind_address", "?")))
    networks = []
    own = "%s_" % record["compose_project"] if isinstance(record.get("compose_project"), str) else None
    for network in record.get("networks") or []:
        if not isinstance(network, str) or network in _DOCKER_NETWORKS or (own and network == own + "default"):
            continue  # docker's own, or the one compose makes for every project
        if not NETWORK_NAME_RE.match(network):
            note("seat %s: joins a network whose name adopt does not write; left out: set networks" % name)
        elif own and network.startswith(own):
            note("seat %s: joins %s, a network of its compose project; left out: its seat joins the networks "
                 "listed in networks" % (name, network))
        else:
            networks.append({"name": network, "external": True})
    if networks:
        seat["networks"] = networks


def _template_markers(value, where=""):
    """Where in a value (a field's keys and items, at any depth) a host's text holds a marker
    Ansible would template."""
    found, stack = [], [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Template):
            continue  # adopt's own reference to a vault variable
        if isinstance(item, str) and _TEMPLATE_RE.search(item):
            found.append(path)
        elif isinstance(item, dict):
            found += ["%s key %s" % (path, key) for key in item if isinstance(key, str) and _TEMPLATE_RE.search(key)]
            stack.extend((child, "%s.%s" % (path, key)) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, "%s[%d]" % (path, number)) for number, child in enumerate(item))
    return sorted(found)


def _without_deep_fields(name, seat, note):
    """The seat without a field nested deeper than any seat field is (a JSON flag of its command
    line can nest without bound), each one left out with a note."""
    for field in [field for field, value in seat.items() if value_depth(value) > MAX_FIELD_DEPTH]:
        del seat[field]
        note("seat %s: %s nests deeper than %d levels; left out: set it by hand" % (name, field, MAX_FIELD_DEPTH))


def _say_template_markers(name, seat, note):
    """A note for each field whose text holds Jinja markers: it is written !unsafe, so Ansible
    keeps it as the text the seat ran and never runs it; the operator should still look."""
    for field, value in seat.items():
        places = _template_markers(value, field)
        if places:
            note("seat %s: %s hold Jinja markers; written !unsafe (kept as text, never templated): check "
                 "it is what the seat should run" % (name, ", ".join(places)))


def _secret_flags(name, args, secrets_note, note):
    """The command line without the flags that carry a secret (their values adopt_info never
    returns): ``--api-key`` becomes the seat's ``api_key``, a vault variable's reference; any
    other is left out with a note. ``(args, api_key or None)``."""
    kept, api_key, position = [], None, 0
    stem = name.replace("-", "_")
    while position < len(args):
        arg = args[position]
        flag, has_value, _value = arg.partition("=")
        position += 1
        if not arg.startswith("-") or SECRET_NAME_RE.search(flag.lstrip("-")) is None:
            kept.append(arg)
            continue
        if not has_value and position < len(args) and not args[position].startswith("-"):
            position += 1  # its value
        if flag == "--api-key":
            api_key = Template("{{ vault_%s_api_key }}" % stem)
            secrets_note("vault_%s_api_key (its --api-key)" % stem)
        else:
            note("seat %s: %s carries a secret on its command line; left out: give it to the seat as a "
                 "secret_environment variable" % (name, flag))
    return kept, api_key


def _reads_as_inventory(config):
    """Whether a copied config.json would read as inventory where the inventory folder is given
    to Ansible whole (a JSON file is YAML): a top-level mapping with vars, hosts or children is a
    group, and its strings would be trusted as templates."""
    return not isinstance(config, dict) or any(
        isinstance(value, dict) and {"vars", "hosts", "children"} & set(value) for value in config.values())


def _vllm_seat(host, name, record, gpus, note, files, secrets_note):
    args, api_key = _secret_flags(name, record["args"], secrets_note, note)
    fields, container_port, utilization, argv_notes = adopted_fields(args)
    for text in argv_notes:
        note("seat %s: %s" % (name, text))
    seat = _common_fields(name, record, gpus, note)
    seat["engine"] = "vllm"
    seat.update(fields)
    if api_key:
        seat["api_key"] = api_key
    _exposure(seat, record, container_port, note)
    if "served_model_names" not in fields:
        served = fields.get("model", name)  # vLLM serves the model as it was named
        if not SERVED_NAME_RE.match(served):
            note("seat %s: vLLM served it as %s, a name the collection does not write; it is served "
                 "as %s now: point the clients (or the gateway) that call the old name there" % (name, served, name))
            served = name
        seat["served_model_names"] = [served]
    if image_version(record["image"]) is None:
        if record.get("vllm_version"):
            seat["vllm_version"] = record["vllm_version"]  # its tag names none: what its boot log printed
        else:
            note("seat %s: neither its image nor its boot log names the vLLM version it runs; set vllm_version "
                 "(its KV arithmetic depends on it)" % name)
    if "max_model_len" not in fields:
        seat["max_model_len"] = "published"
        note("seat %s: no --max-model-len, so vLLM ran the model's own window: max_model_len: published" % name)
    if utilization is not None:
        note("seat %s: ran util-sized (--gpu-memory-utilization %s): its KV was whatever the card had "
             "free at boot; the plan pins it in bytes by the sizing rule" % (name, utilization))
    model = record.get("model") or {}
    if model.get("model_config") and _reads_as_inventory(model["model_config"]):
        note("seat %s: model_config: the host's config.json has a group of an Ansible inventory at its top "
             "(a mapping with vars, hosts or children), which no model config has; nothing copied: copy its "
             "config.json beside the inventory and name it" % name)
    elif model.get("model_config"):
        path = "models/%s/%s/config.json" % (host, name)
        files[path] = json.dumps(model["model_config"], indent=2, sort_keys=True) + "\n"
        seat["model_config"] = path
    else:
        note("seat %s: model_config: %s; nothing copied: copy its config.json beside the inventory "
             "and name it" % (name, model.get("problem") or "the model was not found"))
    if model.get("weights_bytes"):
        seat["weights_bytes"] = "%dMiB" % -(-model["weights_bytes"] // MIB)
    else:
        note("seat %s: weights_bytes: no checkpoint files found beside its config; set the "
             "checkpoint's size" % name)
    tp = fields.get("tensor_parallel_size", 1)
    if len(gpus) != tp:
        note("seat %s: runs on %d GPU(s) with tensor_parallel_size %d; check current_gpu" % (name, len(gpus), tp))
    return seat


def _runtime(seat, record, is_vllm, note):
    """A seat a systemd unit runs becomes a systemd seat; a policy that would not restart a vLLM
    server after a worker fault (it exits 0) is said, since the collection's unit restarts it.
    A seat the collection runs already needs neither said."""
    unit = record.get("systemd_unit")
    managed = bool(record.get("managed_seat"))
    if isinstance(unit, dict) and isinstance(unit.get("name"), str):
        seat["runtime"] = "systemd"
        if not managed:
            note("seat %s: run by the systemd unit %s now: disable it (systemctl disable --now %s) before the "
                 "first rebalance starts the collection's own, llmfleet-seat-%s.service" % (
                     seat["name"], unit["name"], unit["name"], seat["name"]))
        policy, kind = unit.get("restart"), "Restart=%s" % unit.get("restart")
    else:
        policy, kind = record.get("restart_policy"), "restart: %s" % record.get("restart_policy")
    if is_vllm and not managed and policy not in ("always", "unless-stopped"):
        note("seat %s: ran with %s, which never restarts vLLM after a worker fault (its API server exits "
             "0); the collection's seat restarts always" % (seat["name"], kind))


def _fixed_seat(name, record, gpus, held, note):
    seat = _common_fields(name, record, gpus, note)
    seat["engine"] = "fixed"
    cap = max(held.values()) if held else None
    if cap:
        seat["memory_cap_bytes"] = "%dMiB" % cap
        note("seat %s: not a vLLM server: a fixed tenant capped at what it holds now (%d MiB); "
             "raise memory_cap_bytes to what it holds at its peak" % (name, cap))
    else:
        note("seat %s: not a vLLM server and holds no GPU memory now: set memory_cap_bytes" % name)
    if record["ports"]:
        seat["container_port"] = record["ports"][0]["container_port"]
        _exposure(seat, record, seat["container_port"], note)
    else:
        note("seat %s: publishes no port; set port and container_port" % name)
    return seat


# What adopt_info returns of a container, by type (the filter refuses anything else).
_RECORD_TYPES = {"name": str, "image": (str, type(None)), "args": list, "environment": dict,
                 "secret_environment": list, "ports": list, "mounts": list, "gpu_device_ids": list,
                 "running_s": (int, type(None))}
_GPU_TYPES = {"index": int, "uuid": str, "name": str, "memory_total_mib": int}


def _is(value, kind):
    return isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, (int, type(None))))


def _check(host, containers, cards):
    if not isinstance(cards, dict) or not isinstance(cards.get("gpus"), list) or not isinstance(cards.get("source"), str):
        raise AdoptError("host %s: cards: expected a gpu_info result with its source and gpus" % host)
    for number, gpu in enumerate(cards["gpus"]):
        bad = [field for field, kind in _GPU_TYPES.items() if not isinstance(gpu, dict) or not _is(gpu.get(field), kind)]
        processes = gpu.get("processes", []) if isinstance(gpu, dict) else None
        if bad or not isinstance(processes, list) or not all(
                isinstance(p, dict) and _is(p.get("used_mib", 0), (int, type(None))) for p in processes):
            raise AdoptError("host %s: cards.gpus[%d]: expected gpu_info's index, uuid, name, memory_total_mib "
                             "and processes%s" % (host, number, " (%s)" % ", ".join(bad) if bad else ""))
    if not isinstance(containers, list):
        raise AdoptError("host %s: containers: expected adopt_info's list of containers" % host)
    for number, record in enumerate(containers):
        bad = [field for field, kind in _RECORD_TYPES.items() if not isinstance(record, dict) or not _is(record.get(field), kind)]
        if not bad:
            bad = [field for field in ("args", "secret_environment", "gpu_device_ids")
                   if not all(isinstance(item, str) for item in record[field])]
            bad += ["ports"] if not all(isinstance(p, dict) and _is(p.get("container_port"), int)
                                        and _is(p.get("host_port"), int) and isinstance(p.get("host_ip", ""), str)
                                        for p in record["ports"]) else []
            bad += ["networks"] if not all(isinstance(n, str) for n in record.get("networks") or []) else []
            bad += ["mounts"] if not all(isinstance(m, dict) and isinstance(m.get("destination"), str)
                                         for m in record["mounts"]) else []
            bad += ["environment"] if not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in record["environment"].items()) else []
        if bad:
            raise AdoptError("host %s: containers[%d]: %s not as adopt_info returns them" % (host, number, ", ".join(bad)))


def adopted_inventory(host, containers, cards, now=None):
    """``{host_vars, files: {path: text}, notes}`` for ``host`` from adopt_info's
    ``containers`` and a gpu_info reading ``cards``; ``files`` (model configs, a plateau
    snapshot) go beside the host_vars, paths relative to the inventory."""
    if not isinstance(host, str) or not HOST_NAME_RE.match(host):
        raise AdoptError("host %r: expected %s (it names the files adopt writes)" % (host, HOST_NAME_EXPECTED))
    _check(host, containers, cards)
    notes, files, seats, taken, secret_names = [], {}, [], set(), []
    host_vars = {"llmfleet_gpus": [{"index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"],
                                    "memory_total_mib": gpu["memory_total_mib"]}
                                   for gpu in sorted(cards["gpus"], key=lambda g: g["index"])]}
    _gpu_profile(host_vars, notes.append)
    ran, ages, projects = {}, [], {}
    for record in containers:
        gpus = _gpus_of(record, cards)
        is_vllm = server_args(record["args"]) is not None
        if not gpus:
            if is_vllm:
                notes.append("container %s serves vLLM but uses no GPU of this host; left out" % record["name"])
            continue
        name = _seat_name(record, taken)
        if record.get("managed_seat"):
            notes.append("seat %s: already run by this collection (its container %s is seat %s): adopted as it "
                         "runs, nothing to stop or take over" % (name, record["name"], record["managed_seat"]))
        if is_vllm:
            seat = _vllm_seat(host, name, record, gpus, notes.append, files, secret_names.append)
        else:
            seat = _fixed_seat(name, record, gpus, _held_mib(record, cards), notes.append)
        _without_deep_fields(name, seat, notes.append)
        _say_template_markers(name, seat, notes.append)
        seat = _with_secrets(seat, record, secret_names.append)
        if is_vllm and "kv_cache_memory_bytes" in seat:
            ran[name] = {field: seat[field] for field in ("kv_cache_memory_bytes", "image", "model")
                         if field in seat}
            if isinstance(seat.get("max_model_len"), int):
                ran[name]["max_model_len"] = seat["max_model_len"]
        if not record.get("managed_seat") and not record.get("systemd_unit"):
            # the hand-over: the first window stops it and starts the seat as the collection's (a
            # unit's container is not: its unit would start it again; the note says to disable it)
            seat["take_over"] = True
            projects.setdefault(record.get("compose_project") or "", []).append(name)
        _runtime(seat, record, is_vllm, notes.append)
        ages.append(record.get("running_s") or 0)
        seats.append(seat)
    host_vars["llmfleet_seats"] = seats
    for project, names in sorted(projects.items()):
        notes.append("%s %s now: take_over: true, so the first rebalance stops %s and starts the collection's "
                     "own in %s place (a rollback brings %s back as %s ran; docs/adopt.md); set it to false "
                     "to have the window refuse instead"
                     % ("compose project %s runs" % project if project else "docker run started",
                        ", ".join(names), "them" if len(names) > 1 else "it", "their" if len(names) > 1 else "its",
                        "them" if len(names) > 1 else "it", "they" if len(names) > 1 else "it"))
    if secret_names:
        notes.append("secrets stay on the host: put %s in vault" % "; ".join(secret_names))
    if seats and min(ages) >= PLATEAU_SECONDS:
        taken_at = utc_timestamp(now)
        path = "snapshots/%s-plateau-%s.json" % (host, taken_at[:10].replace("-", ""))
        files[path] = dump_snapshot(build_snapshot(cards, host, taken_at))
        host_vars["llmfleet_plateau_snapshot"] = Template("{{ inventory_dir }}/%s" % path)
        if ran:
            host_vars["llmfleet_plateau_ran"] = ran
        unmeasured = sorted(seat["name"] for seat in seats if seat["engine"] == "vllm" and seat["name"] not in ran)
        if unmeasured:
            notes.append("plateau: %s ran util-sized, so their KV then is unknown: they get the default "
                         "overhead until a pinned run is recorded" % ", ".join(unmeasured))
    elif seats:
        notes.append("plateau: the youngest seat has run %d s, under a day: no plateau snapshot yet; "
                     "adopt again (or record one with gpu_info) once every seat has run a day" % min(ages))
    if not seats:
        notes.append("no container uses a GPU of this host: llmfleet_seats is empty")
    notes = [_CONTROL_RE.sub(" ", note) for note in notes]
    text = _host_vars_text(host, host_vars, notes, now)
    # the variables as plain data: which strings are adopt's own templates only the text says
    return {"host_vars": json.loads(json.dumps(host_vars)), "files": files, "notes": notes, "host_vars_text": text}


def _gpu_profile(host_vars, note):
    """``llmfleet_gpu_profile`` from the cards' names when every card is of one profile the
    sizing knows; else a note, never a guess (the plan's default is h100's arithmetic)."""
    profiles = {}
    for gpu in host_vars["llmfleet_gpus"]:
        profile = profile_of_card(gpu["name"])
        if profile is None:
            note("GPU %d (%s): not a card the sizing has a profile for (%s): llmfleet_gpu_profile left unset; set "
                 "the one whose arithmetic it follows, or the plan sizes it as h100" % (
                     gpu["index"], gpu["name"], ", ".join(sorted(GPU_PROFILES))))
        profiles.setdefault(profile, []).append(gpu["index"])
    if len(profiles) == 1 and None not in profiles:
        host_vars["llmfleet_gpu_profile"] = next(iter(profiles))
    elif len(profiles) > 1 and None not in profiles:
        mixed = "; ".join("%s: GPU %s" % (profile, ", ".join(map(str, indices)))
                          for profile, indices in sorted(profiles.items()))
        note("the cards are of different profiles (%s): llmfleet_gpu_profile left unset; set the one the plan "
             "sizes every seat by" % mixed)


def _host_vars_text(host, host_vars, notes, now):
    """The host_vars file: what adopt read, when, the notes as comments, every string from the
    host written !unsafe."""
    lines = ["---", "# %s as llmfleet.seats' playbooks/adopt.yml read it on %s." % (host, utc_timestamp(now)),
             "# What it could not work out, or that needs a look before a rebalance:"]
    lines += ["# - %s" % note for note in notes]
    return "\n".join(lines) + "\n" + dump(host_vars)
