"""The fake's knobs: environment variables a test or the twin sets on a seat, over the twin
host's defaults for the seat (README.md)."""

from __future__ import annotations

import json
import os
import re

from .gpu import socket_path

FAULTS = ("oom_at_boot", "oom_on_long_request", "health_stuck", "crash_after_ready")
_UNITS = {"": 1, "b": 1, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "k": 2 ** 10,
          "m": 2 ** 20, "g": 2 ** 30}


# The twin host's knobs per seat (by its first served name), beside the driver's socket: that
# directory is mounted read-only into every GPU container.
HOST_KNOBS = "seats.json"


class KnobError(Exception):
    """A knob with a value the fake cannot use; the message names it."""


def seat_environment(served_name, path=None):
    """The seat's knobs: the host file's for ``served_name``, under the seat's own environment."""
    path = path or os.path.join(os.path.dirname(socket_path()), HOST_KNOBS)
    try:
        with open(path, encoding="utf-8") as handle:
            host = json.load(handle)
    except FileNotFoundError:
        host = {}
    except ValueError as exc:
        raise KnobError("%s: not JSON: %s" % (path, exc))
    if not isinstance(host, dict):
        raise KnobError("%s: expected a mapping of served names to knobs" % path)
    defaults = host.get(served_name) or {}
    if not isinstance(defaults, dict):
        raise KnobError("%s: %s: expected a mapping of knob names to values" % (path, served_name))
    return dict({name: str(value) for name, value in defaults.items()}, **os.environ)


def _number(env, name, default, convert, minimum=0):
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = convert(raw)
    except ValueError:
        raise KnobError("%s: expected a number, got %r" % (name, raw))
    if value < minimum:
        raise KnobError("%s: expected a number >= %s, got %r" % (name, minimum, raw))
    return value


def _bytes(env, name):
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", raw)
    if not match or match.group(2).lower() not in _UNITS:
        raise KnobError("%s: expected bytes, or a size like 16GiB or 512MiB, got %r" % (name, raw))
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


class Knobs:
    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.boot_delay_s = _number(env, "FAKE_VLLM_BOOT_DELAY_S", 0.0, float)
        self.cuda_context_mib = _number(env, "FAKE_VLLM_CUDA_CONTEXT_MIB", 512, int)
        self.weights_bytes = _bytes(env, "FAKE_VLLM_WEIGHTS_BYTES")
        self.activation_mib = _number(env, "FAKE_VLLM_ACTIVATION_MIB", None, int)
        self.cuda_graph_mib = _number(env, "FAKE_VLLM_CUDA_GRAPH_MIB", 512, int)
        # What grows with the shape the seat asks for (0: nothing, as before): CUDA graphs take
        # this many MiB more per million of max_num_seqs x max_model_len at capture, and the
        # first long request this many MiB per 1,024 tokens of max_model_len, kept after.
        self.graph_mib_per_mtoken = _number(env, "FAKE_VLLM_GRAPH_MIB_PER_MTOKEN", 0.0, float)
        self.long_request_mib_per_ktoken = _number(env, "FAKE_VLLM_LONG_REQUEST_MIB_PER_KTOKEN", 0.0, float)
        self.runtime_overhead_mib = _number(env, "FAKE_VLLM_RUNTIME_OVERHEAD_MIB", 394, int)
        self.creep_mib = _number(env, "FAKE_VLLM_CREEP_MIB", 0, int)
        self.creep_seconds = _number(env, "FAKE_VLLM_CREEP_SECONDS", 60.0, float)
        self.creep_steps = _number(env, "FAKE_VLLM_CREEP_STEPS", 10, int, minimum=1)
        self.long_request_tokens = _number(env, "FAKE_VLLM_LONG_REQUEST_TOKENS", None, int, minimum=1)
        self.crash_after_s = _number(env, "FAKE_VLLM_CRASH_AFTER_S", 1.0, float)
        self.reply_tokens = _number(env, "FAKE_VLLM_REPLY_TOKENS", 24, int, minimum=1)
        self.token_delay_s = _number(env, "FAKE_VLLM_STEP_DELAY_MS", 0.0, float) / 1000.0
        self.watchdog_s = _number(env, "FAKE_VLLM_WATCHDOG_S", 5.0, float)
        fault = (env.get("FAKE_VLLM_FAULT") or "").strip()
        if fault and fault not in FAULTS:
            raise KnobError("FAKE_VLLM_FAULT: expected one of %s, got %r" % (", ".join(FAULTS), fault))
        self.fault = fault or None
