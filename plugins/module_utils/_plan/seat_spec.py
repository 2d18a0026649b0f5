# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The fleet as data (CONTRIBUTING.md, "The fleet as data"): check a host's GPUs and seats and
bring them to one normal form before anything runs.

Every problem is collected, not just the first, and each names the host, the seat and the field
and says what was expected. GPU references (index or UUID) become UUIDs; sizes become bytes.
"""

from __future__ import annotations

import ipaddress
import json
import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import (
    VALUE_MAX_BYTES,
    Checker,
    too_long,
    without_text,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    ALL_INTERFACES,
    BIND_ADDRESS,
    CONTAINER_NAME_RE,
    CONTROL_RE,
    HEALTH_PATH_EXPECTED,
    HEALTH_PATH_RE,
    HOST_NAME_EXPECTED,
    HOST_NAME_RE,
    KV_FACTOR,
    NETWORK_NAME_RE,
    REDACTED,
    SECRET_MIN_CHARS,
    SECRET_NAME_RE,
    SEAT_NAME_EXPECTED,
    SEAT_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.ports import addresses_clash, endpoint
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import LARGEST, MIB
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, own_api_key
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import KV_FACTOR_MAX

_GPU_KEYS = {"index", "uuid", "name", "memory_total_mib", "keep_clear"}
_COMMON_KEYS = {"name", "engine", "image", "port", "gpu", "avoid_gpus", "current_gpu",
                "container_name", "environment", "secret_environment", "volumes", "command",
                "health_path", "health_interval", "health_start_period", "runtime", "restart",
                "allow_floating_image", "bind_address", "networks", "take_over", "replaces"}
# Where a seat runs, and the restart policies each runtime knows.
RUNTIME_RESTARTS = {"compose": ("always", "unless-stopped", "on-failure", "no"),
                    "systemd": ("always", "on-failure", "no")}
# The policies that restart a process that exited 0.
RESTARTS_CLEAN_EXIT = ("always", "unless-stopped")
_DIGEST_RE = lazy_regex(r"@sha256:[0-9a-f]{64}\Z|\Asha256:[0-9a-f]{64}\Z")
# docker's reference grammar, whole: [registry[:port]/]path[:tag][@sha256:64 lowercase hex], or a
# local image ID. A second tag, an uppercase or short digest never reaches a pull. A registry is
# a first component with a '.' or a port, or localhost (else it is a lowercase path component).
_REGISTRY_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE_RE = lazy_regex(
    r"\A(?:(?!sha256:)(?:(?:(?:localhost|{label}(?:\.{label})+)(?::[0-9]+)?|{label}:[0-9]+)/)?"
    r"{path}(?:/{path})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?"
    r"|sha256:[0-9a-f]{{64}})\Z".format(label=_REGISTRY_LABEL, path=_PATH_COMPONENT))
_IMAGE_EXPECTED = ("an image reference [REGISTRY/]NAME[:TAG][@sha256:DIGEST] (one tag; a digest of 64 lowercase "
                   "hex digits) or a local image ID sha256:DIGEST, such as vllm/vllm-openai:v0.33.0")
# Each grammar matches the whole string: what passes can be a file line, a path, a label or an
# argument as it is.
_DURATION_RE = lazy_regex(r"\A([0-9]+(ms|s|m|h))+\Z")
_UUID_RE = lazy_regex(r"\A(GPU|MIG)-[0-9A-Za-z/-]+\Z")
_ENV_NAME_RE = lazy_regex(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_VOLUME_RE = lazy_regex(r"\A[^\s:]+:/[^\s:]*(:[A-Za-z,]+)?\Z")
# Not networks a seat joins: host and none replace the seat's network (host publishes every port
# it listens on, on every interface); default is compose's name for the project's own.
_NOT_JOINABLE = ("host", "none", "default")
_NETWORK_KEYS = {"name", "external"}
# The seat's own variables in its .env; the inventory's environment cannot shadow them.
_RESERVED_ENV_PREFIX = "SEAT_"


class SeatSpecError(ValueError):
    """The inventory does not describe a host's seats; the message lists every problem."""


def _gpus(check, gpus):
    if not isinstance(gpus, list) or not gpus:
        check.problem("llmfleet_gpus", "expected a non-empty list of GPUs", gpus)
        return []
    out = []
    for position, gpu in enumerate(gpus):
        where = "llmfleet_gpus[%d]" % position
        if not isinstance(gpu, dict):
            check.fail(where, "entry", "a dict with index, uuid, memory_total_mib", gpu)
            continue
        for key in sorted(set(gpu) - _GPU_KEYS, key=str):
            check.fail(where, key, "one of %s (unknown field)" % ", ".join(sorted(_GPU_KEYS)), gpu[key])
        index = check.integer(where, "index", gpu.get("index"), 0)
        uuid = check.text(where, "uuid", gpu.get("uuid"), _UUID_RE, "a GPU UUID such as GPU-5a1c0c6e-...")
        total = check.positive_int(where, "memory_total_mib", gpu.get("memory_total_mib"), LARGEST // MIB)
        keep_clear = gpu.get("keep_clear", False)
        if not isinstance(keep_clear, bool):
            check.fail(where, "keep_clear", "true or false", keep_clear)
        name = gpu.get("name") or ""
        if name:
            name = check.text(where, "name", name) or ""
        out.append({"index": index, "uuid": uuid, "name": name,
                    "memory_total_mib": total, "keep_clear": keep_clear is True})
    for field in ("index", "uuid"):
        values = [gpu[field] for gpu in out if gpu[field] is not None]
        for value in sorted({v for v in values if values.count(v) > 1}, key=str):
            check.fail("llmfleet_gpus", field, "a different %s per GPU" % field, value)
    return out


def gpus_as_far_as_valid(gpus):
    """``llmfleet_gpus`` in normal form where each field is valid (None where not): what the plan's
    own options are checked against while normalize_host reports the GPUs' problems."""
    return _gpus(Checker(None), gpus)


def _gpu_refs(check, where, field, value, gpus, count=None):
    """Index or UUID (or a list of them) -> a list of UUIDs."""
    if value is None:
        return None
    refs = value if isinstance(value, list) else [value]
    valid = [gpu for gpu in gpus if gpu["index"] is not None and gpu["uuid"] is not None]
    by_index = {gpu["index"]: gpu["uuid"] for gpu in valid}
    by_uuid = {gpu["uuid"] for gpu in valid}
    uuids = []
    for ref in refs:
        if isinstance(ref, int) and not isinstance(ref, bool) and ref in by_index:
            uuids.append(by_index[ref])
        elif isinstance(ref, str) and ref in by_uuid:
            uuids.append(ref)
        else:
            check.fail(where, field, "a GPU index (%s) or UUID of this host"
                       % ", ".join(str(i) for i in sorted(by_index)), ref)
            return None
    if len(set(uuids)) != len(uuids):
        check.fail(where, field, "distinct GPUs", value)
        return None
    if count is not None and len(uuids) != count:
        check.fail(where, field, "%d GPU(s), one per tensor-parallel rank" % count, value)
        return None
    return uuids


def _scalar_text(value):
    """An environment value the way docker compose reads it, or None when it is not a scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return json.dumps(value) if math.isfinite(value) else None
    if isinstance(value, str) and not CONTROL_RE.search(value):
        return value
    return None


_SHORT_SECRET = ("a secret of at least %d characters (a secret's value is hidden wherever it occurs in what a "
                 "window prints and records, so a shorter one would hide parts of its figures; a variable named "
                 "with TOKEN, KEY, PASSWORD, AUTH... is a secret)" % SECRET_MIN_CHARS)


def _secret_length(text):
    return "%s of %d character%s" % (REDACTED, len(text), "" if len(text) == 1 else "s")


def _environment(check, where, raw):
    """``(plain, secret)``: the seat's variables as text, a secret's value where only the 0600
    .env holds it. ``secret_environment``, names that look like secrets (``*TOKEN*``,
    ``*KEY*``, ...), and the seat's ``api_key`` (as its engine's variable) are secret."""
    plain, secret = {}, {}
    engine = ENGINES.get(raw.get("engine")) if isinstance(raw.get("engine"), str) else None
    variable = getattr(engine, "API_KEY_VARIABLE", None)
    if variable is not None and raw.get("api_key") is not None:
        key = _scalar_text(raw["api_key"]) if isinstance(raw["api_key"], str) else None
        if key is None or not key.strip() or "'" in key or any(c.isspace() for c in key) or too_long(key):
            check.fail(where, "api_key", "the seat's API key: one word of text (a vault reference), without "
                       "a single quote, of at most %d bytes" % VALUE_MAX_BYTES, REDACTED)
        elif len(key) < SECRET_MIN_CHARS:
            check.fail(where, "api_key", _SHORT_SECRET, _secret_length(key))
        else:
            secret[variable] = key
    for field in ("environment", "secret_environment"):
        values = raw.get(field) or {}
        if not isinstance(values, dict):
            check.fail(where, field, "a dict of NAME: value", REDACTED if field == "secret_environment" else values)
            continue
        for name, value in values.items():
            hidden = field == "secret_environment" or (isinstance(name, str) and SECRET_NAME_RE.search(name))
            if not isinstance(name, str) or not _ENV_NAME_RE.match(name) or name.startswith(_RESERVED_ENV_PREFIX):
                check.fail(where, "%s name" % field, "a variable name (letters, digits, '_'; not "
                           "starting with %s, the seat's own)" % _RESERVED_ENV_PREFIX, name)
                continue
            text = _scalar_text(value)
            if text is None or (hidden and "'" in text):
                check.fail(where, "%s.%s" % (field, name), "a string, number or boolean on one line"
                           + (" without a single quote" if hidden else ""), REDACTED if hidden else value)
                continue
            if hidden and not text.strip():
                check.fail(where, "%s.%s" % (field, name), "a secret's value (it is empty: a vault "
                           "variable that was never set?)", REDACTED)
                continue
            if hidden and len(text) < SECRET_MIN_CHARS:
                check.fail(where, "%s.%s" % (field, name), _SHORT_SECRET, _secret_length(text))
                continue
            if too_long(text):
                check.fail(where, "%s.%s" % (field, name), "a value of at most %d bytes (the longest "
                           "a process is given)" % VALUE_MAX_BYTES, REDACTED if hidden else "%d bytes" % len(text))
                continue
            if name in plain or name in secret:
                check.fail(where, "%s.%s" % (field, name), "one value (it is in environment and "
                           "secret_environment%s)" % (", or is the api_key's" if name == variable else ""), REDACTED)
                continue
            (secret if hidden else plain)[name] = text
    return plain, secret


def _seat_where(position, name):
    variable = "llmfleet_seats[%d]" % position
    return "seat %s: %s" % (name, variable) if isinstance(name, str) and SEAT_NAME_RE.match(name) else variable


def _seat(check, position, raw, gpus, defaults):
    if not isinstance(raw, dict):
        check.fail("llmfleet_seats[%d]" % position, "entry", "a dict describing a seat", raw)
        return None
    name = raw.get("name")
    where = _seat_where(position, name)
    if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
        check.fail(where, "name", SEAT_NAME_EXPECTED + " (it names the seat's directory and project)", name)
        name = None
    engine = ENGINES.get(raw.get("engine")) if isinstance(raw.get("engine"), str) else None
    if engine is None:
        check.fail(where, "engine", " or ".join(repr(name) for name in ENGINES), raw.get("engine"))
        return None
    for key in sorted(set(raw) - _COMMON_KEYS - engine.FIELDS, key=str):
        # a misspelt field may hold a secret under any name (secret_enviroment: {HF: hf_...}):
        # its text is not shown, at any depth
        shown = REDACTED if isinstance(key, str) and SECRET_NAME_RE.search(key) else without_text(raw[key])
        check.fail(where, key, "a known field for a %s seat (typo?)" % engine.NAME, shown)

    tp = engine.gpu_count(check, where, raw)
    plain, secret = _environment(check, where, raw)
    seat = {
        "name": name, "engine": engine.NAME,
        "image": check.text(where, "image", raw.get("image"), _IMAGE_REFERENCE_RE, _IMAGE_EXPECTED),
        "port": check.positive_int(where, "port", raw.get("port"), 65535),
        "gpu": _gpu_refs(check, where, "gpu", raw.get("gpu"), gpus, tp),
        "avoid_gpus": _gpu_refs(check, where, "avoid_gpus", raw.get("avoid_gpus"), gpus) or [],
        "current_gpu": _gpu_refs(check, where, "current_gpu", raw.get("current_gpu"), gpus, tp),
        "gpu_count": tp,
        "container_name": check.text(where, "container_name", raw["container_name"], CONTAINER_NAME_RE,
                                     "a container name (letters, digits, '_', '.', '-')")
        if raw.get("container_name") is not None else engine.container_name(name or "seat"),
        "environment": plain,
        # names only: the values reach the .env alone (seat_secrets)
        "secret_environment": sorted(secret),
        "volumes": check.string_list(where, "volumes", raw["volumes"], _VOLUME_RE,
                                     "volumes such as /srv/models:/models:ro")
        if raw.get("volumes") is not None else [],
        "command": check.string_list(where, "command", raw["command"])
        if raw.get("command") is not None else [],
        "health_path": check.text(where, "health_path", raw.get("health_path", "/health"), HEALTH_PATH_RE,
                                  HEALTH_PATH_EXPECTED),
        # docker's healthcheck: how often, and how long a boot may take before failures count
        "health_interval": raw.get("health_interval", "15s"),
        "health_start_period": raw.get("health_start_period", "20m"),
    }
    for field in ("health_interval", "health_start_period"):
        check.text(where, field, seat[field], _DURATION_RE, "a docker duration such as 15s, 2m or 1m30s")
    _runtime_fields(check, where, raw, seat, engine)
    _exposure(check, where, raw, seat)
    seat["declared_sizes"] = {}
    engine.normalize(check, where, raw, seat, defaults)
    for field in engine.SIZE_FIELDS:
        if raw.get(field) is not None and seat.get(field) is not None:
            seat["declared_sizes"][field] = str(raw[field])
    return seat


def floating_image(image):
    """Whether an image reference may point at another image tomorrow: no digest, and no tag
    or the tag ``latest``."""
    if _DIGEST_RE.search(image):
        return False
    last = image.rsplit("/", 1)[-1]
    return ":" not in last or last.rsplit(":", 1)[1] == "latest"


def _runtime_fields(check, where, raw, seat, engine):
    """``runtime`` and ``restart``, checked against each other and the engine; a floating image
    only when the seat says so."""
    runtime = raw.get("runtime", "compose")
    if not isinstance(runtime, str) or runtime not in RUNTIME_RESTARTS:
        check.fail(where, "runtime", " or ".join(sorted(RUNTIME_RESTARTS)), runtime)
        runtime = "compose"
    seat["runtime"] = runtime
    restart = raw.get("restart", "always")
    if not isinstance(restart, str) or restart not in RUNTIME_RESTARTS[runtime]:
        check.fail(where, "restart", "one of %s (what %s knows)" % (", ".join(RUNTIME_RESTARTS[runtime]), runtime),
                   restart)
    elif engine.EXITS_CLEAN_ON_FAULT and restart not in RESTARTS_CLEAN_EXIT:
        check.fail(where, "restart", "%s: a worker fault makes %s's API server exit 0, which %r never "
                   "restarts" % (" or ".join(r for r in RESTARTS_CLEAN_EXIT if r in RUNTIME_RESTARTS[runtime]),
                                 engine.NAME, restart), restart)
    seat["restart"] = restart
    take_over = raw.get("take_over", False)
    if not isinstance(take_over, bool):
        check.fail(where, "take_over", "true or false (true: a container started outside the collection in the "
                   "seat's place is stopped in the window and brought back by a rollback)", take_over)
    seat["take_over"] = take_over is True
    replaces = raw.get("replaces")
    if replaces is not None and (not isinstance(replaces, str) or not SEAT_NAME_RE.match(replaces)):
        check.fail(where, "replaces", "the name of the seat this one takes the place of (%s)" % SEAT_NAME_EXPECTED,
                   replaces)
        replaces = None
    elif replaces is not None and runtime != "compose":
        check.fail(where, "replaces", "only on a compose seat (the replaced seat's container is kept dormant "
                   "by compose); on a %s seat, retire the old one (llmfleet_retire)" % runtime, replaces)
        replaces = None
    seat["replaces"] = replaces
    allow = raw.get("allow_floating_image", False)
    if not isinstance(allow, bool):
        check.fail(where, "allow_floating_image", "true or false", allow)
    elif isinstance(seat["image"], str) and floating_image(seat["image"]) and not allow:
        check.fail(where, "image", "a pinned image: a version tag or a digest (NAME@sha256:... or the local "
                   "image ID sha256:...); a floating tag runs whatever it points at on the next start "
                   "(allow_floating_image: true to accept it)", seat["image"])


def _exposure(check, where, raw, seat):
    """``bind_address`` (the host address its port is published on) and ``networks`` (docker
    networks it joins, ``[{"name", "external"}]``); a bare name is a network that exists on the
    host (external), and a systemd seat joins only those: it has no project to create one."""
    address = raw.get("bind_address", BIND_ADDRESS)
    expected = ("an IPv4 or IPv6 address of the host such as 127.0.0.1, 10.0.0.5 or ::1 (no brackets, "
                "no host name; %s publishes on every interface)" % " or ".join(ALL_INTERFACES))
    try:
        parsed = ipaddress.ip_address(address) if isinstance(address, str) and "%" not in address else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.is_multicast or (parsed.version == 6 and parsed.ipv4_mapped):
        check.fail(where, "bind_address", expected, address)
    seat["bind_address"] = str(parsed) if parsed is not None else None
    networks = raw.get("networks", [])
    seat["networks"] = []
    if not isinstance(networks, list):
        check.fail(where, "networks", "a list of network names or {name, external}", networks)
        return
    for position, network in enumerate(networks):
        field = "networks[%d]" % position
        entry = {"name": network, "external": True} if isinstance(network, str) else network
        if not isinstance(entry, dict) or set(entry) - _NETWORK_KEYS:
            check.fail(where, field, "a network name or {name: NAME, external: true|false}", network)
            continue
        name = check.text(where, field + ".name", entry.get("name"), NETWORK_NAME_RE,
                          "a docker network name (letters, digits, '_', '.', '-')")
        external = entry.get("external", True)
        if not isinstance(external, bool):
            check.fail(where, field + ".external", "true or false", external)
        elif name in _NOT_JOINABLE:
            check.fail(where, field + ".name", "a network to join (not %s)" % ", ".join(_NOT_JOINABLE), name)
        elif not external and seat["runtime"] == "systemd":
            check.fail(where, field + ".external", "true: a systemd seat joins networks that exist on the "
                       "host (docker network create them first)", external)
        elif name is not None and name in [known["name"] for known in seat["networks"]]:
            check.fail(where, field + ".name", "each network once", name)
        elif name is not None:
            seat["networks"].append({"name": name, "external": external})


def merged_seats(seats, seat_defaults):
    """The inventory's seats with ``llmfleet_seat_defaults`` filled in per engine."""
    seat_defaults = seat_defaults if isinstance(seat_defaults, dict) else {}
    merged = []
    for raw in seats:
        engine = raw.get("engine") if isinstance(raw, dict) else None
        defaults = seat_defaults.get(engine) if isinstance(engine, str) else None
        merged.append(dict(defaults, **raw) if isinstance(defaults, dict) else raw)
    return merged


def seat_secrets(seats, name=None, seat_defaults=None):
    """``{NAME: value}``: the secret variables of the seat called ``name``, for its .env alone;
    without ``name``, every seat's, ``{seat: {NAME: value}}`` (an inventory the plan refused
    gives what could be read)."""
    every = {}
    for position, raw in enumerate(merged_seats(seats, seat_defaults or {}) if isinstance(seats, list) else []):
        seat = raw.get("name") if isinstance(raw, dict) else None
        if isinstance(seat, str) and name in (None, seat) and seat not in every:
            every[seat] = _environment(Checker(None), _seat_where(position, seat), raw)[1]
    return every if name is None else every.get(name, {})


def gateway_seats(plan_seats, host, secrets=None, published=None):
    """A plan's seats as llmfleet.seats.gateway_routes audits the gateway's routes to them: each
    at ``host`` (the address the gateway writes) and its port, with its served names, its context
    and output cap (the most a route's model_info may declare), and its own API key when its
    engine reads one from ``secrets`` (the seat_secrets filter's result). ``published``
    (seat_runtime_info's, before the window) gives the port a seat the plan moves ran at: the
    routes to repoint from."""
    audited = []
    for seat in plan_seats if isinstance(plan_seats, list) else []:
        if not isinstance(seat, dict):
            continue
        launch = seat.get("launch") or {}
        entry = {"name": seat.get("name"), "host": host, "port": seat.get("port"),
                 "served_model_names": seat.get("served_model_names") or [],
                 "max_model_len": seat.get("max_model_len"), "max_new_tokens": launch.get("max_new_tokens"),
                 "api_key": own_api_key(seat, secrets)}
        before = (published or {}).get(seat.get("name")) if isinstance(published, dict) else None
        if isinstance(before, int) and not isinstance(before, bool) and before != seat.get("port"):
            entry.update(previous_host=host, previous_port=before)
        audited.append(entry)
    return audited


def without_secrets(value):
    """Seats (a list) or seat defaults (engine -> fields) with every secret value replaced by
    ``<secret>``: what may be passed on to a module whose arguments -vvv shows."""
    if isinstance(value, list):
        return [_seat_without_secrets(seat) for seat in value]
    if isinstance(value, dict):
        return {engine: _seat_without_secrets(fields) for engine, fields in value.items()}
    return value


def _seat_without_secrets(seat):
    if not isinstance(seat, dict):
        return seat
    seat = dict(seat)
    if isinstance(seat.get("secret_environment"), dict):
        seat["secret_environment"] = {name: REDACTED for name in seat["secret_environment"]}
    if isinstance(seat.get("environment"), dict):
        seat["environment"] = {name: REDACTED if isinstance(name, str) and SECRET_NAME_RE.search(name) else value
                               for name, value in seat["environment"].items()}
    return seat


def normalize_host(host, gpus, seats, kv_factor=KV_FACTOR, seat_defaults=None, retire=None):
    """``{"gpus": [...], "seats": [...], "retire": [...]}`` in normal form, or SeatSpecError
    listing every problem.

    ``seat_defaults`` (``llmfleet_seat_defaults``): per engine (``vllm``, ``fixed``), fields every
    seat of that engine gets unless it sets them itself, e.g. the model cache volume.
    ``retire`` (``llmfleet_retire``): seats no longer listed that a rebalance may stop.
    """
    check = Checker(host)
    if not isinstance(host, str) or not HOST_NAME_RE.match(host):
        check.fail("inventory host name", None, HOST_NAME_EXPECTED + " (it is written into the seats' files)", host)
    seat_defaults = {} if seat_defaults is None else seat_defaults
    if not isinstance(seat_defaults, dict) or set(seat_defaults) - set(ENGINES) or not all(
            isinstance(value, dict) for value in seat_defaults.values()):
        check.problem("llmfleet_seat_defaults", "expected {vllm: {field: value}, fixed: {field: value}}",
                      seat_defaults)
        seat_defaults = {}
    norm_gpus = _gpus(check, gpus)
    check.number("llmfleet_kv_factor", None, kv_factor, maximum=KV_FACTOR_MAX)
    if not isinstance(seats, list) or not seats:
        check.problem("llmfleet_seats", "expected a list of seats, at least one (a seat no longer wanted is "
                      "listed in llmfleet_retire, a host with none left is not a GPU host of the play)", seats)
        seats = seats if isinstance(seats, list) else []
    placed = []
    for i, raw in enumerate(merged_seats(seats, seat_defaults)):
        start = len(check.errors)
        seat = _seat(check, i, raw, norm_gpus, {"kv_factor": kv_factor})
        _name_the_defaults(check, start, seats[i], raw)
        if seat is not None:
            placed.append((i, seat))
    for field in ("name", "container_name"):
        users = {}
        for i, seat in placed:
            if seat[field] is not None:
                users.setdefault(seat[field], []).append(_seat_label(i, seat))
        for value, where in sorted(users.items(), key=str):
            if len(where) > 1:
                check.problem("llmfleet_seats", "%s %r is used by %s; expected a different %s per seat"
                              % (field, value, " and ".join(where), field))
    _port_clashes(check, placed)
    clear = {gpu["uuid"] for gpu in norm_gpus if gpu["keep_clear"]}
    for i, seat in placed:
        if seat["gpu"] and set(seat["gpu"]) & clear:
            check.fail(_seat_where(i, seat["name"]), "gpu", "a GPU that is not kept clear", seat["gpu"])
    norm_seats = [seat for _position, seat in placed]
    norm_retire = _retire(check, retire, {seat["name"] for seat in norm_seats})
    _replaced(check, placed, norm_retire)
    if check.errors:
        raise SeatSpecError("%d problem(s) in the inventory:\n- %s"
                            % (len(check.errors), "\n- ".join(check.errors)))
    return {"gpus": norm_gpus, "seats": norm_seats, "retire": norm_retire}


def _seat_label(position, seat):
    return "seat %s (llmfleet_seats[%d])" % (seat["name"], position) if seat["name"] else \
        "llmfleet_seats[%d]" % position


def _port_clashes(check, placed):
    """Two seats publish one port only on different addresses: 127.0.0.1:9100 beside
    10.0.0.5:9100, never beside a seat on every interface."""
    holders = [(i, seat) for i, seat in placed if seat["port"] is not None and seat.get("bind_address")]
    for number, (i, seat) in enumerate(holders):
        for j, other in holders[number + 1:]:
            if seat["port"] == other["port"] and addresses_clash(seat["bind_address"], other["bind_address"]):
                check.problem("llmfleet_seats", "port %d is used by %s on %s and %s on %s; expected a different "
                              "port or bind_address per seat (%s holds the port on every address)" % (
                                  seat["port"], _seat_label(i, seat), endpoint(seat["bind_address"], seat["port"]),
                                  _seat_label(j, other), endpoint(other["bind_address"], other["port"]),
                                  " or ".join(ALL_INTERFACES)))


def _name_the_defaults(check, start, own, merged):
    """A problem in a field the seat took from llmfleet_seat_defaults says so."""
    if not isinstance(own, dict) or not isinstance(merged, dict):
        return
    inherited = set(merged) - set(own)
    for number in range(start, len(check.errors)):
        field = next((key for key in inherited if ".%s:" % key in check.errors[number]), None)
        if field is not None:
            check.errors[number] += " (from llmfleet_seat_defaults.%s.%s)" % (merged.get("engine"), field)


def _replaced(check, placed, retire):
    """A seat replaces one that runs no longer under its name: neither listed nor retired, and by
    one seat alone."""
    listed = {seat["name"] for _i, seat in placed}
    by = {}
    for i, seat in placed:
        old = seat["replaces"]
        if old is None:
            continue
        where = _seat_where(i, seat["name"])
        if old == seat["name"] or old in listed:
            check.fail(where, "replaces", "a seat llmfleet_seats no longer lists (the replaced seat is kept "
                       "dormant, not placed): remove %s from llmfleet_seats" % old, old)
        elif old in retire:
            check.fail(where, "replaces", "a seat that is not also retired: a replaced seat is kept dormant to "
                       "fall back on, a retired one is removed; expected %s in one of replaces or llmfleet_retire"
                       % old, old)
        else:
            by.setdefault(old, []).append(_seat_label(i, seat))
    for old, where in sorted(by.items()):
        if len(where) > 1:
            check.problem("llmfleet_seats", "seat %s is replaced by %s; expected one seat in its place"
                          % (old, " and ".join(where)))


def _retire(check, retire, listed):
    if retire is None:
        return []
    if not isinstance(retire, list):
        check.problem("llmfleet_retire", "expected a list of seat names", retire)
        return []
    out = []
    for position, name in enumerate(retire):
        where = "llmfleet_retire[%d]" % position
        if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
            check.problem(where, "expected a seat name (%s)" % SEAT_NAME_EXPECTED, name)
        elif name in listed:
            check.problem(where, "seat %s is both listed in llmfleet_seats and to be retired; "
                          "expected one or the other" % name)
        else:
            out.append(name)
    return out
