# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A running vLLM's command line read back as the seat fields that launch it (adopting a host
that something else started): the inverse of vllm.command, and what it cannot express; and the
numbers alone of what such a container runs now, for the plan's "now" columns."""

from __future__ import annotations

import json
import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import STARTED_AT_RE, DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import GIB, LARGEST, human_readable_int
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.argv import split_flags
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import extra_arg_problem, plan_flag, server_args
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import VllmLogError, parse_boot_log
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import KV_CACHE_DTYPES

_DEFAULT_PORT = 8000
_INT_FIELDS = {"--max-model-len": "max_model_len", "--tensor-parallel-size": "tensor_parallel_size",
               "-tp": "tensor_parallel_size", "--block-size": "block_size", "--max-num-seqs": "max_num_seqs",
               "--max-num-batched-tokens": "max_num_batched_tokens"}
_TEXT_FIELDS = {"--kv-cache-dtype": "kv_cache_dtype", "--tool-call-parser": "tool_call_parser",
                "--reasoning-parser": "reasoning_parser"}
# Flags the collection cannot plan: the seat is adopted without them, and the notes say so.
_UNPLANNED = ("--pipeline-parallel-size", "-pp", "--data-parallel-size", "-dp", "--num-gpu-blocks-override")


def _split(args):
    """``[(flag, values)]`` and the positionals of vLLM's arguments; ``--served-model-name``
    is the one flag of the plan's that takes several values (nargs="+")."""
    return split_flags(args, many=lambda flag: plan_flag(flag) == "--served-model-name")


def _size(num_bytes):
    """Bytes as the inventory writes a size: in GiB or MiB when whole."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20)):
        if num_bytes % size == 0:
            return "%d%s" % (num_bytes // size, unit)
    return num_bytes


def model_of(args):
    """The model a vLLM command line serves (``serve MODEL`` or ``--model MODEL``), or None."""
    rest = server_args(args)
    if rest is None:
        return None
    pairs, positionals = _split(rest)
    for flag, values in pairs:
        if plan_flag(flag) == "--model" and values:
            return values[0]
    return positionals[0] if positionals else None


def adopted_fields(args):
    """``(fields, container_port, utilization, notes)`` for a vLLM command line: the seat
    fields that launch it, the port it listens on inside its container, the
    ``--gpu-memory-utilization`` it was sized by (None when its KV is pinned), and what could
    not be carried over."""
    rest = server_args(args) or []
    pairs, positionals = _split(rest)
    fields, notes, extra = {}, [], []
    container_port, utilization = _DEFAULT_PORT, None
    if positionals:
        fields["model"] = positionals[0]
        extra.extend(positionals[1:])
    for flag, values in pairs:
        key = plan_flag(flag)  # the plan's own flag, in whatever spelling vLLM accepted
        value = values[0] if values else None
        if key == "--model" and value:
            fields["model"] = value
        elif key == "--port" and value and value.isdigit():
            container_port = int(value)
        elif key == "--served-model-name" and values:
            fields["served_model_names"] = list(values)
        elif key in _INT_FIELDS and value and (human_readable_int(value) or 0) > 0:
            fields[_INT_FIELDS[key]] = human_readable_int(value)
        elif key in _TEXT_FIELDS and value:
            fields[_TEXT_FIELDS[key]] = value
        elif key == "--kv-cache-memory-bytes" and value and human_readable_int(value):
            fields["kv_cache_memory_bytes"] = _size(human_readable_int(value))
        elif key == "--gpu-memory-utilization" and value:
            try:
                utilization = float(value)
            except ValueError:
                notes.append("--gpu-memory-utilization %s is not a number; dropped" % value)
        elif key == "--enable-auto-tool-choice":
            pass  # the collection sets it with tool_call_parser
        elif key == "--default-chat-template-kwargs" and value:
            try:
                fields["default_chat_template_kwargs"] = json.loads(value)
            except ValueError:
                notes.append("--default-chat-template-kwargs %s is not JSON; dropped" % value)
        elif key == "--override-generation-config" and value:
            try:
                override = json.loads(value)
            except ValueError:
                override = None
            if isinstance(override, dict) and set(override) == {"max_new_tokens"}:
                fields["max_new_tokens"] = override["max_new_tokens"]
            else:
                notes.append("--override-generation-config %s: only max_new_tokens is carried over; "
                             "dropped" % value)
        elif key in _UNPLANNED:
            notes.append("%s %s cannot be planned by the collection; dropped" % (flag, " ".join(values)))
        elif key:  # the plan sets it, so extra_args may not; a value it cannot carry over
            notes.append("%s %s is not a value the collection can carry over; dropped" % (flag, " ".join(values)))
        elif extra_arg_problem(flag):  # the plan would refuse it as an extra arg; its value may be a secret
            notes.append("%s cannot be an extra arg (expected %s); dropped with its value"
                         % (flag, extra_arg_problem(flag)[1]))
        else:
            extra.extend([flag] + values)
    if "kv_cache_memory_bytes" in fields:
        utilization = None  # with KV pinned in bytes, util only gated its boot
    if extra:
        fields["extra_args"] = extra
    return fields, container_port, utilization, notes


# What a container started outside the collection runs now, kept as numbers alone: a command
# line and a log carry secrets (--api-key, HF_TOKEN) and text Ansible would template, so nothing
# but these fields, each in a plausible range, leaves the host. Field -> (type, lowest, highest);
# a float's lowest is excluded.
RUNNING_FIELDS = {
    "max_model_len": (int, 1, 1 << 24),
    "gpu_memory_utilization": (float, 0.0, 1.0),
    "kv_cache_memory_bytes": (int, 1, LARGEST),
    "max_num_seqs": (int, 1, 1 << 20),
    "tensor_parallel_size": (int, 1, 64),
    "kv_cache_tokens": (int, 1, 1 << 40),
    "max_concurrency": (float, 0.0, 1e7),
}
_RUNNING_FLAGS = {"--max-model-len": "max_model_len", "--gpu-memory-utilization": "gpu_memory_utilization",
                  "--kv-cache-memory-bytes": "kv_cache_memory_bytes", "--max-num-seqs": "max_num_seqs",
                  "--tensor-parallel-size": "tensor_parallel_size", "-tp": "tensor_parallel_size"}
# The most of a boot log read for its KV lines: a boot prints them in its first few hundred kB.
RUNNING_LOG_BYTES = 2 << 20
_LONGEST_NUMBER = 32


def _plausible(field, value):
    """``value`` when it is a number (or, for kv_cache_dtype, a known dtype) in the field's range."""
    if field == "kv_cache_dtype":
        return value if isinstance(value, str) and value in KV_CACHE_DTYPES else None
    kind, lowest, highest = RUNNING_FIELDS[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if kind is int and (not isinstance(value, int) or not lowest <= value <= highest):
        return None
    if kind is float and not lowest < value <= highest:
        return None
    return kind(value)


def _number(field, text):
    """The number a flag's text gives, as vLLM reads it, or None."""
    if not isinstance(text, str) or len(text) > _LONGEST_NUMBER:
        return None
    if RUNNING_FIELDS[field][0] is float:
        try:
            return float(text)
        except ValueError:
            return None
    return human_readable_int(text)


def checked_running(record):
    """The fields of a running record (read on a host, or from a snapshot file) that are
    plausible numbers; anything else is dropped."""
    if not isinstance(record, dict):
        return {}
    checked = {}
    for field in list(RUNNING_FIELDS) + ["kv_cache_dtype"]:
        value = _plausible(field, record.get(field))
        if value is not None:
            checked[field] = value
    return checked


def running_numbers(args, log=None):
    """What a vLLM server started outside the collection runs, as numbers: from its command line
    (``args``, the process's argv) the values of an allow-list of flags, and from its boot log
    (the first RUNNING_LOG_BYTES of it) the KV cache it reserved and the capacity it printed. An
    empty dict when ``args`` do not run vLLM's server. Nothing else of either is kept."""
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return {}
    rest = server_args(args)
    if rest is None:
        return {}
    numbers = {}
    pairs, _positionals = _split(rest)
    for flag, values in pairs:
        key = plan_flag(flag)
        if not values:
            continue
        if key in _RUNNING_FLAGS:
            numbers[_RUNNING_FLAGS[key]] = _number(_RUNNING_FLAGS[key], values[0])
        elif key == "--kv-cache-dtype":
            numbers["kv_cache_dtype"] = values[0]
    if isinstance(log, str) and log:
        try:
            boot = parse_boot_log(log[:RUNNING_LOG_BYTES])
        except VllmLogError:
            boot = {}
        # the context it serves, as its boot settled it (an auto-fit may have shortened the flag's)
        numbers["max_model_len"] = boot.get("max_model_len") or numbers.get("max_model_len")
        if numbers.get("kv_cache_memory_bytes") is None:
            available = boot.get("available_kv_cache_gib")
            # pinned: the reserved line; sized by utilization: what it profiled as available
            numbers["kv_cache_memory_bytes"] = boot.get("kv_cache_memory_bytes") or (
                int(round(available * GIB)) if isinstance(available, float) and math.isfinite(available) else None)
        numbers["kv_cache_tokens"] = boot.get("kv_cache_tokens")
        numbers["max_concurrency"] = boot.get("max_concurrency")
    return checked_running(numbers)


def container_running(docker, attrs):
    """``running_numbers`` of a container (its ``docker inspect`` object) whose process runs
    vLLM's server, its boot log read through ``docker`` from its current start; None for any
    other container. A log that cannot be read leaves the command line's numbers."""
    argv = [attrs.get("Path")] + list(attrs.get("Args") or [])
    if not all(isinstance(arg, str) for arg in argv) or server_args(argv) is None:
        return None
    started = (attrs.get("State") or {}).get("StartedAt")
    try:
        log = docker.log_head(attrs["Id"], RUNNING_LOG_BYTES,
                              since=started if isinstance(started, str) and STARTED_AT_RE.match(started) else None)
    except DockerError:
        log = None
    return running_numbers(argv, log) or None
