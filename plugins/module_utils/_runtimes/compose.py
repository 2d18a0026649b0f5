# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Render one seat's docker compose project: a ``.env`` with the numbers a maintenance window
changes, and a ``compose.yaml`` with the structure that refers to them.

Pure standard library and deterministic (no timestamps): the same seat renders to the same bytes,
so a second run changes nothing. Every value is quoted, so no model name or argument can break
either file: ``.env`` values are single-quoted (literal for compose), compose strings are
double-quoted with ``$`` escaped, and the only interpolations are the ``${SEAT_*:?}``
references this module writes itself.
"""

from __future__ import annotations

import json
import re

ENV_FILE = ".env"
COMPOSE_FILE = "compose.yaml"
MANAGED_LABEL = "io.llmfleet.seat"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_PLAIN_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class RenderError(ValueError):
    """A seat that cannot be rendered safely; the message names the seat and field."""


class Ref:
    """A reference to a ``.env`` variable inside compose.yaml: ``${NAME:?}``, so compose refuses
    to start ("required variable NAME is missing a value") rather than run with an empty one."""

    def __init__(self, name):
        self.name = name

    def text(self):
        return "${%s:?}" % self.name


def _fail(seat, field, expected, got):
    raise RenderError("seat %s: %s: expected %s, got %r" % (seat.get("name", "?"), field, expected, got))


def _require(seat, field, kind):
    value = seat.get(field)
    if kind == "str" and (not isinstance(value, str) or not value):
        _fail(seat, field, "a non-empty string", value)
    if kind == "int" and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        _fail(seat, field, "a positive integer", value)
    return value


def _validated(seat):
    name = seat.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        _fail(seat, "name", "lowercase letters, digits, '-' or '_' (a compose project name)", name)
    engine = seat.get("engine")
    if engine not in ("vllm", "fixed"):
        _fail(seat, "engine", "'vllm' or 'fixed'", engine)
    _require(seat, "image", "str")
    port = _require(seat, "port", "int")
    if port > 65535:
        _fail(seat, "port", "a TCP port (1-65535)", port)
    gpus = seat.get("gpu_uuids")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, str) and g for g in gpus):
        _fail(seat, "gpu_uuids", "a non-empty list of GPU UUIDs", gpus)
    if engine == "vllm":
        _require(seat, "model", "str")
        _require(seat, "max_model_len", "int")
        _require(seat, "kv_cache_memory_bytes", "int")
        util = seat.get("gpu_memory_utilization")
        if not isinstance(util, (int, float)) or isinstance(util, bool) or not 0 < util <= 1:
            _fail(seat, "gpu_memory_utilization", "a number in (0, 1]", util)
        tp = seat.get("tensor_parallel_size", 1)
        if tp != len(gpus):
            _fail(seat, "gpu_uuids", "one GPU per tensor-parallel rank (%s)" % tp, gpus)
    return seat


def seat_env(seat):
    """The ``.env`` variables of a seat, in file order: what a maintenance window changes."""
    seat = _validated(seat)
    env = [("SEAT_IMAGE", seat["image"]), ("SEAT_PORT", str(seat["port"]))]
    for index, uuid in enumerate(seat["gpu_uuids"]):
        env.append(("SEAT_GPU_%d" % index, uuid))
    if seat["engine"] == "vllm":
        env += [
            ("SEAT_MODEL", seat["model"]),
            ("SEAT_MAX_MODEL_LEN", str(seat["max_model_len"])),
            ("SEAT_KV_CACHE_MEMORY_BYTES", str(seat["kv_cache_memory_bytes"])),
            ("SEAT_GPU_MEMORY_UTILIZATION", "%.2f" % seat["gpu_memory_utilization"]),
        ]
    for key, value in env:
        if "'" in value or "\n" in value or "\r" in value:
            raise RenderError("seat %s: %s: a .env value cannot carry a single quote or a line "
                              "break safely, got %r" % (seat["name"], key, value))
    return env


def render_env(seat, host=None):
    """The ``.env`` file's text. Values are single-quoted: compose reads them literally."""
    lines = [_header(seat, host)]
    lines += ["%s='%s'" % (key, value) for key, value in seat_env(seat)]
    return "\n".join(lines) + "\n"


def vllm_command(seat):
    """The ``vllm serve`` arguments after the entrypoint; Refs point into the ``.env``."""
    seat = _validated(seat)
    # One flag with every name: vLLM's --served-model-name takes nargs="+", and a repeated flag
    # keeps only its last occurrence.
    args = [Ref("SEAT_MODEL"), "--port", Ref("SEAT_PORT"), "--served-model-name"]
    args += list(seat.get("served_model_names") or [seat["name"]])
    args += [
        "--max-model-len", Ref("SEAT_MAX_MODEL_LEN"),
        # The registered flag; vLLM's own log suggests --kv-cache-memory, which only works as an
        # argparse abbreviation.
        "--kv-cache-memory-bytes", Ref("SEAT_KV_CACHE_MEMORY_BYTES"),
        # With KV pinned in bytes, util is only vLLM's startup check against free memory.
        "--gpu-memory-utilization", Ref("SEAT_GPU_MEMORY_UTILIZATION"),
    ]
    if seat.get("tensor_parallel_size", 1) > 1:
        args += ["--tensor-parallel-size", str(seat["tensor_parallel_size"])]
    if seat.get("kv_cache_dtype", "auto") != "auto":
        args += ["--kv-cache-dtype", seat["kv_cache_dtype"]]
    for flag in ("block_size", "max_num_seqs", "max_num_batched_tokens"):
        if seat.get(flag) is not None:
            args += ["--" + flag.replace("_", "-"), str(seat[flag])]
    # Tool calling, reasoning and the chat-template default are a set (seed 002): a tool parser
    # without --enable-auto-tool-choice is inert, and vLLM refuses the reverse.
    if seat.get("tool_call_parser"):
        args += ["--enable-auto-tool-choice", "--tool-call-parser", seat["tool_call_parser"]]
    if seat.get("reasoning_parser"):
        args += ["--reasoning-parser", seat["reasoning_parser"]]
    if seat.get("default_chat_template_kwargs"):
        args += ["--default-chat-template-kwargs",
                 json.dumps(seat["default_chat_template_kwargs"], sort_keys=True)]
    if seat.get("max_new_tokens"):
        # vLLM reads max_new_tokens here; a "max_tokens" key is silently ignored.
        args += ["--override-generation-config",
                 json.dumps({"max_new_tokens": seat["max_new_tokens"]})]
    extra = seat.get("extra_args") or []
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        _fail(seat, "extra_args", "a list of strings", extra)
    return args + list(extra)


def seat_compose(seat):
    """The compose project of one seat as plain data (Refs mark ``.env`` interpolations)."""
    seat = _validated(seat)
    name = seat["name"]
    port = Ref("SEAT_PORT")
    service = {
        "image": Ref("SEAT_IMAGE"),
        "container_name": seat.get("container_name") or (
            "vllm-%s" % name if seat["engine"] == "vllm" else name),
        # A worker fault makes vLLM's API server exit 0, so on-failure never fires (seed 003).
        "restart": "always",
        "labels": {MANAGED_LABEL: name},
    }
    if seat["engine"] == "vllm":
        service["ports"] = [_Joined([port, ":", port])]
        service["ipc"] = "host"
        service["command"] = vllm_command(seat)
        health_port = port
    else:
        # A fixed tenant's image listens where it was built to; the host port is the seat's.
        inside = str(seat.get("container_port") or seat["port"])
        service["ports"] = [_Joined([port, ":" + inside])]
        if seat.get("command"):
            service["command"] = list(seat["command"])
        health_port = inside
    environment = dict(seat.get("environment") or {})
    if environment:
        service["environment"] = {str(k): str(v) for k, v in sorted(environment.items())}
    if seat.get("volumes"):
        service["volumes"] = list(seat["volumes"])
    service["healthcheck"] = {
        # python3 is in vLLM's image (curl is not in every image).
        "test": ["CMD", "python3", "-c", _Joined([
            "import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', ", health_port,
            ", timeout=5); c.request('GET', '%s'); sys.exit(c.getresponse().status != 200)"
            % seat.get("health_path", "/health")])],
        "interval": seat.get("health_interval", "15s"),
        "timeout": "10s",
        "retries": 3,
        "start_period": seat.get("health_start_period", "20m"),
    }
    service["deploy"] = {"resources": {"reservations": {"devices": [{
        "driver": "nvidia",
        "device_ids": [Ref("SEAT_GPU_%d" % i) for i in range(len(seat["gpu_uuids"]))],
        "capabilities": ["gpu"],
    }]}}}
    return {"name": name, "services": {name: service}}


def render_compose(seat, host=None):
    """The ``compose.yaml`` file's text."""
    return _header(seat, host) + "\n" + _yaml(seat_compose(seat), 0) + "\n"


def render_seat_files(seat, host=None):
    """Both files of a seat: ``{".env": text, "compose.yaml": text}``."""
    return {ENV_FILE: render_env(seat, host), COMPOSE_FILE: render_compose(seat, host)}


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
