# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The vLLM engine: a seat that runs ``vllm serve`` with its KV cache pinned in bytes.

Sized from the model's config.json and its context (KV exactly as vLLM turns bytes into blocks,
tokens and concurrency), its footprint is weights + KV + measured or default overhead, and
``--gpu-memory-utilization`` only gates its boot. After boot it must serve its names with the
planned context, and its boot log must print the planned KV line with no OOM.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import without_text
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import CONTROL_RE, SECRET_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import gate, num, unreadable
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.systemd import SystemdError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import GIB, MIB, human_bytes
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.argv import flag_value
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.fields import field_flags, flags_by_field, plain_dict
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.seam import SizingError
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_flags import FLAGS, PARSERS
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import (
    VllmLogError,
    matches_printed_gib,
    parse_boot_log,
    reserved_matches,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import (
    FootprintError,
    boot_gate_utilization,
    vllm_footprint,
    weights_bytes_per_gpu,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import (
    CPU_PLATFORM,
    KV_CACHE_DTYPES,
    KV_FACTOR_MAX,
    KVSizingError,
    evaluate_kv_budget,
    size_kv_budget,
    size_kv_for_demand,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    ModelConfigError,
    load_model_config,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import (
    ReleaseError,
    parse_version,
    seat_release,
)

NAME = "vllm"
# The inventory fields of a vLLM seat, beyond every seat's.
FIELDS = frozenset({
    "model", "model_config", "max_model_len", "kv_cache_memory_bytes", "kv_factor", "kv_sizing",
    "kv_cache_dtype", "tensor_parallel_size", "served_model_names", "tool_call_parser",
    "reasoning_parser", "default_chat_template_kwargs", "max_new_tokens", "extra_args",
    "max_num_seqs", "max_num_batched_tokens", "block_size", "weights_bytes", "overhead_bytes",
    "vllm_version", "allow_nearest_vllm_release", "api_key", "vllm_platform"})
# How a seat's KV budget is sized when the inventory does not pin it.
KV_SIZINGS = ("rule", "demand")
# The vLLM builds a seat's image may run: the CUDA one on the host's GPUs, or the CPU build (whose
# KV arithmetic is its own; its memory is the host's).
PLATFORMS = ("cuda", "cpu")
# The seat's ``api_key`` reaches vLLM in this variable, from the 0600 env file (never argv); the
# gates send it as a Bearer token.
API_KEY_VARIABLE = "VLLM_API_KEY"
# What it serves, with each name's context, once healthy; its boot log's gate.
MODELS_PATH = "/v1/models"
LOG_GATE = "boot_log"
# Its plan seat's fields, once (_engines.fields): the planned numbers, then what the rendered
# files need as the inventory declared it, each with the flag it renders.
PLAN_SEAT_FIELDS = (
    ("max_model_len", "positive", "--max-model-len"),
    ("kv_cache_memory_bytes", "positive", "--kv-cache-memory-bytes"),
    ("gpu_memory_utilization", "fraction", "--gpu-memory-utilization"),
    ("launch.model", "text", None),  # the positional argument
    ("launch.served_model_names", "texts", None),  # one --served-model-name with every name
    ("launch.tensor_parallel_size", "positive or null", "--tensor-parallel-size"),  # null: 1
    ("launch.kv_cache_dtype", "text or null", "--kv-cache-dtype"),
    ("launch.tool_call_parser", "text or null", "--tool-call-parser"),
    ("launch.reasoning_parser", "text or null", "--reasoning-parser"),
    ("launch.default_chat_template_kwargs", "plain dict or null", "--default-chat-template-kwargs"),
    ("launch.max_new_tokens", "positive or null", "--override-generation-config"),
    ("launch.max_num_seqs", "positive or null", "--max-num-seqs"),
    ("launch.max_num_batched_tokens", "positive or null", "--max-num-batched-tokens"),
    ("launch.block_size", "positive or null", "--block-size"),
    ("launch.extra_args", "texts", None),
)
# The fields that are memory sizes (read as written, shown in the plan in GiB too).
SIZE_FIELDS = ("kv_cache_memory_bytes", "weights_bytes", "overhead_bytes")
# The flags the plan writes (or that change what it counted: GPUs per seat, KV blocks). vLLM's
# last flag wins, so an extra arg setting one would run something the plan never showed.
PLAN_FLAGS = (
    "--model", "--port", "--served-model-name", "--max-model-len", "--kv-cache-memory-bytes",
    "--gpu-memory-utilization", "--tensor-parallel-size", "--pipeline-parallel-size",
    "--data-parallel-size", "--kv-cache-dtype", "--block-size", "--max-num-seqs",
    "--max-num-batched-tokens", "--enable-auto-tool-choice", "--tool-call-parser",
    "--reasoning-parser", "--default-chat-template-kwargs", "--override-generation-config",
    "--num-gpu-blocks-override")
_SHORT_PLAN_FLAGS = ("-tp", "-pp", "-dp")
# The largest plausible value of each count, checked before any sizing loops over it.
COUNT_MAX = {"max_model_len": 2 ** 24, "max_new_tokens": 2 ** 24, "max_num_seqs": 65536,
             "max_num_batched_tokens": 2 ** 24, "block_size": 65536}
# Flags that set the plan's numbers another way: a YAML of flags, the model's config and
# generation defaults replaced, a config.json other than the one sized, a draft model the
# footprint never counted, KV split across ranks the sizing does not model.
_OVERRIDE_FLAGS = (
    ("--config", "a file of flags can set any flag the plan owns"),
    ("--hf-overrides", "it rewrites the model config the plan sized (max_position_embeddings, ...)"),
    ("--hf-config-path", "the plan sized the model's own config.json"),
    ("--generation-config", "generation defaults come from max_new_tokens"),
    ("--speculative-config", "a draft model's weights and KV are not in the footprint"),
    ("--decode-context-parallel-size", "it splits the KV the plan sized per GPU"),
)
_SHORT_OVERRIDE_FLAGS = {"-dcp": "--decode-context-parallel-size"}
# Secrets never go on a command line (plans, reports, the diff, ps): the seat's api_key and
# secret_environment carry them.
_SECRET_FLAGS = ("--api-key", "--hf-token")
# What one argument may look like: a flag of lowercase words (a dotted key, an =value), or a
# value that does not start with a dash (a negative number may).
_FLAG_RE = lazy_regex(r"\A--[a-z0-9][a-z0-9_-]*(\.[A-Za-z0-9_.-]+)?(=.*)?\Z", re.DOTALL)
_SHORT_FLAG_RE = lazy_regex(r"\A-[A-Za-z][A-Za-z0-9]*(=.*)?\Z|\A-O[0-9.]", re.DOTALL)
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"
# The inventory fields that each render a flag, which the seat's release must take.
_FIELD_FLAGS = field_flags(PLAN_SEAT_FIELDS)
_FLAG_OF = flags_by_field(PLAN_SEAT_FIELDS)
MODEL_RE = lazy_regex(r"\A[A-Za-z0-9._/@:+-]+\Z")  # a Hugging Face id or a path in the image
SERVED_NAME_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:/@+-]*\Z")
# a parser of the operator's own, registered from this file, takes a name no release knows
_PARSER_PLUGIN_FLAGS = (("tool_call_parser", "--tool-parser-plugin"), ("reasoning_parser", "--reasoning-parser-plugin"))
_PARSER_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# The planned numbers a plan seat carries, once.
PLANNED_FIELDS = ("max_model_len", "kv_cache_memory_bytes", "kv_cache_tokens", "max_concurrency",
                  "block_size", "num_blocks", "per_token_kv_bytes")


# -- the inventory --------------------------------------------------------------------------------
def gpu_count(check, where, raw):
    """One GPU per tensor-parallel rank."""
    return check.positive_int(where, "tensor_parallel_size", raw.get("tensor_parallel_size", 1)) or 1


def container_name(name):
    return "vllm-%s" % name


def _long_flag(arg):
    """``--flag`` as vLLM reads ``arg`` (``=value`` and a ``.key`` of a JSON flag cut off,
    underscores read as dashes), or None when ``arg`` is no long flag."""
    flag = arg.split("=", 1)[0].split(".", 1)[0]
    if not flag.startswith("--") or len(flag) < 5:
        return None
    return "--" + flag[2:].replace("_", "-")


def _matching(flag, owned_flags):
    """The flag of ``owned_flags`` that ``flag`` spells out or abbreviates (argparse takes an
    unambiguous prefix), or None."""
    return next((owned for owned in owned_flags if owned == flag or owned.startswith(flag)), None)


def plan_flag(arg):
    """The plan's flag that ``arg`` sets, in any spelling vLLM accepts (``--flag value``,
    ``--flag=value``, underscores, an unambiguous abbreviation, a dotted JSON key), or None."""
    short = arg.split("=", 1)[0]
    if short in _SHORT_PLAN_FLAGS:
        return short
    flag = _long_flag(arg)
    return None if flag is None else _matching(flag, PLAN_FLAGS)


def extra_arg_problem(arg):
    """Why ``arg`` cannot be one of a seat's extra_args, as ``(flag, expected)``, or None. It
    never quotes the argument's value: that may be a secret."""
    owned = plan_flag(arg)
    if owned:
        return owned, "flags the plan does not set (%s is the plan's: set the seat's own field instead)" % owned
    flag = _SHORT_OVERRIDE_FLAGS.get(arg.split("=", 1)[0]) or _long_flag(arg)
    if flag is not None:
        override = _matching(flag, [name for name, _why in _OVERRIDE_FLAGS])
        if override:
            return override, "flags that cannot override the plan (%s: %s)" % (override, dict(_OVERRIDE_FLAGS)[override])
        secret = _matching(flag, _SECRET_FLAGS)
        if secret or SECRET_NAME_RE.search(flag):
            return secret or flag, ("no secret on the command line (%s): the seat's api_key or secret_environment "
                                    "carries it" % (secret or flag))
    if arg[:1] in _DASHES or arg[:1].isspace():
        return arg[:1], "an argument starting with '--', or a value (a typographic dash or a space makes vLLM read " \
            "a flag as a stray value and refuse to start)"
    if arg.startswith("--") and not _FLAG_RE.match(arg):
        return arg.split("=", 1)[0][:40], "a flag in lowercase words such as --enable-prefix-caching (vLLM refuses " \
            "any other spelling at boot)"
    if arg.startswith("-") and not arg.startswith("--") and not _SHORT_FLAG_RE.match(arg) and not _is_number(arg):
        return arg.split("=", 1)[0][:40], "a short flag such as -q, or --%s with two dashes" % arg.lstrip("-")[:40]
    return None


def _release_names(table, release):
    """One release's names from a ``(first, changes)`` table of vllm_flags.py; KeyError for a
    release it does not model."""
    (first, names), changes = table
    found, names = first == release, set(names)
    for version, added, removed in changes:
        if found:
            break
        names.update(added)
        names.difference_update(removed)
        found = version == release
    if not found:
        raise KeyError(release)
    return frozenset(names)


def release_flags(release):
    """The flags ``vllm serve`` of a modelled ``release`` takes (vllm_flags.py, read from its source)."""
    if release not in _RELEASE_FLAGS:
        _RELEASE_FLAGS[release] = _release_names(FLAGS, release)
    return _RELEASE_FLAGS[release]


def release_parsers(release, field):
    """The names ``release`` registers for ``field`` (``tool_call_parser`` or ``reasoning_parser``)."""
    if (release, field) not in _RELEASE_FLAGS:
        _RELEASE_FLAGS[(release, field)] = _release_names(PARSERS[field], release)
    return _RELEASE_FLAGS[(release, field)]


# what release_flags and release_parsers read, by release (and field)
_RELEASE_FLAGS = {}


def unknown_flag(arg, flags):
    """The flag ``arg`` names that ``flags`` (one release's) does not take, as vLLM's parser reads it
    (``--flag=value``, underscores, a dotted JSON key, ``--no-`` before a switch, an unambiguous
    abbreviation, ``-O3``), or None; a value is no flag."""
    name = arg.split("=", 1)[0]
    if name.startswith("--"):
        name = "--" + name[2:].split(".", 1)[0].replace("_", "-")
        if name in flags or (name.startswith("--no-") and "--" + name[5:] in flags):
            return None
        return None if len([flag for flag in flags if flag.startswith(name)]) == 1 else name
    if name.startswith("-O"):  # the parser's own -O3 / -O 3: --optimization-level, or -O in older releases
        return None if "--optimization-level" in flags or "-O" in flags else "-O"
    if name.startswith("-") and not _is_number(arg):
        short = [flag for flag in flags if not flag.startswith("--")]
        return None if name in short or any(len(flag) == 2 and name.startswith(flag) for flag in short) else name
    return None


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def normalize(check, where, raw, seat, defaults):
    """The vLLM fields of ``raw`` checked and brought to normal form into ``seat``."""
    name = seat["name"]
    seat["model"] = check.text(where, "model", raw.get("model"), MODEL_RE,
                               "a Hugging Face model id or a path in the image")
    seat["model_config"] = check.text(where, "model_config", raw.get("model_config"))
    length = raw.get("max_model_len")
    if length != "published":
        length = check.positive_int(where, "max_model_len", length, COUNT_MAX["max_model_len"])
    seat["max_model_len"] = length
    if "kv_cache_memory_bytes" in raw and "kv_factor" in raw:
        check.fail(where, "kv_cache_memory_bytes", "either a pinned budget or kv_factor, not both",
                   raw["kv_cache_memory_bytes"])
    seat["kv_cache_memory_bytes"] = check.size(where, "kv_cache_memory_bytes", raw["kv_cache_memory_bytes"], MIB) \
        if "kv_cache_memory_bytes" in raw else None
    # the host's factor is checked once, as the operator's variable
    seat["kv_factor"] = check.number(where, "kv_factor", raw["kv_factor"], maximum=KV_FACTOR_MAX) if "kv_factor" in raw \
        else defaults["kv_factor"]
    seat["kv_rule"] = ("pinned" if seat["kv_cache_memory_bytes"] is not None
                       else "exception" if "kv_factor" in raw else "rule")
    # by the rule (the factor above), or by the demand a calibration measured (the plan shows both)
    seat["kv_sizing"] = raw.get("kv_sizing", "rule")
    if seat["kv_sizing"] not in KV_SIZINGS:
        check.fail(where, "kv_sizing", "rule (the factor x max_model_len) or demand (the peak a calibration "
                   "measured, from llmfleet_demand_snapshot)", seat["kv_sizing"])
    elif seat["kv_sizing"] == "demand" and (seat["kv_cache_memory_bytes"] is not None or "kv_factor" in raw):
        check.fail(where, "kv_sizing", "rule with a pinned budget or a kv_factor of its own (demand sizes "
                   "the budget itself)", seat["kv_sizing"])
    dtype = raw.get("kv_cache_dtype", "auto")
    if not isinstance(dtype, str) or dtype not in KV_CACHE_DTYPES:
        check.fail(where, "kv_cache_dtype", "one of %s" % ", ".join(KV_CACHE_DTYPES), dtype)
    seat["kv_cache_dtype"] = dtype
    seat["tensor_parallel_size"] = seat["gpu_count"]
    # an unreadable seat name is its own problem, not the served names' too
    served = raw.get("served_model_names", [name] if name else ["seat"])
    seat["served_model_names"] = check.string_list(where, "served_model_names", served or None, SERVED_NAME_RE,
                                                   "model names (letters, digits, ._:/@+-)") or [name]
    for field in ("tool_call_parser", "reasoning_parser"):
        seat[field] = check.text(where, field, raw[field], _PARSER_RE, "a vLLM parser name such as hermes") \
            if raw.get(field) is not None else None
    kwargs = raw.get("default_chat_template_kwargs")
    if kwargs is not None and not plain_dict(kwargs):
        check.fail(where, "default_chat_template_kwargs", "a dict of plain values, e.g. {enable_thinking: false}",
                   kwargs)
    seat["default_chat_template_kwargs"] = kwargs
    for field in ("max_new_tokens", "max_num_seqs", "max_num_batched_tokens", "block_size"):
        seat[field] = check.positive_int(where, field, raw[field], COUNT_MAX[field]) if raw.get(field) is not None else None
    if isinstance(seat["max_model_len"], int) and seat["max_new_tokens"] and seat["max_new_tokens"] > seat["max_model_len"]:
        check.fail(where, "max_new_tokens", "at most max_model_len (%d)" % seat["max_model_len"],
                   seat["max_new_tokens"])
    platform = raw.get("vllm_platform", "cuda")
    if platform not in PLATFORMS:
        check.fail(where, "vllm_platform", "cuda (the default) or cpu (vLLM's CPU build)", platform)
    seat["vllm_platform"] = platform
    extra = _extra_args(check, where, raw["extra_args"]) if raw.get("extra_args") is not None else []
    seat["extra_args"] = extra or []
    for field in ("weights_bytes", "overhead_bytes"):
        seat[field] = check.size(where, field, raw[field], MIB) if raw.get(field) is not None else None
    _release(check, where, raw, seat)
    _release_takes(check, where, seat)


def _release_takes(check, where, seat):
    """Every flag the seat renders and every one of its extra_args is one its release's ``vllm serve``
    takes; unchecked when nothing names the release."""
    release = seat["vllm_release"]
    if not release or release.get("nearest"):
        return
    flags, shown = release_flags(release["release"]), release.get("version") or release["release"]
    for field, flag in _FIELD_FLAGS:
        if seat.get(field) is not None and flag not in flags:
            check.fail(where, field, "no value: vLLM %s's vllm serve has no %s (leave the field out, or run a "
                       "release that takes it)" % (shown, flag), seat[field])
    for arg in seat["extra_args"]:
        unknown = unknown_flag(arg, flags)
        if unknown:
            check.fail(where, "extra_args", "flags vLLM %s's vllm serve takes (its own argument definitions have "
                       "no %s)" % (shown, unknown), unknown)
    for field, plugin_flag in _PARSER_PLUGIN_FLAGS:
        plugged = any(arg.split("=", 1)[0].replace("_", "-") == plugin_flag for arg in seat["extra_args"])
        names = release_parsers(release["release"], field)
        if seat.get(field) and not plugged and seat[field] not in names:
            close = difflib.get_close_matches(seat[field], sorted(names), n=3)
            check.fail(where, field, "a name vLLM %s registers for %s (%s), or its plugin file in extra_args (%s)"
                       % (shown, dict(_FIELD_FLAGS)[field], "did you mean %s?" % " or ".join(close) if close
                          else ", ".join(sorted(names)), plugin_flag), seat[field])


def _extra_args(check, where, args):
    """The seat's extra_args, each checked by extra_arg_problem; a refusal names the flag, never
    a value (the one after --api-key is a key)."""
    if not isinstance(args, list) or not all(isinstance(arg, str) and arg and not CONTROL_RE.search(arg) for arg in args):
        check.fail(where, "extra_args", "a list of non-empty strings without control characters", without_text(args))
        return None
    problems = [extra_arg_problem(arg) for arg in args]
    for problem in filter(None, problems):
        check.fail(where, "extra_args", problem[1], problem[0])
    if any(problems):
        return None
    return check.string_list(where, "extra_args", args)


def _release(check, where, raw, seat):
    """The vLLM release the seat runs (its image tag or ``vllm_version``) and the modelled one
    that plans its KV; None when the image itself was refused."""
    nearest = raw.get("allow_nearest_vllm_release", False)
    if not isinstance(nearest, bool):
        check.fail(where, "allow_nearest_vllm_release", "true or false", nearest)
        nearest = False
    declared = raw.get("vllm_version")
    if declared is not None and not isinstance(declared, str):
        check.fail(where, "vllm_version", "a vLLM version such as 0.26.0 (quoted: YAML reads 0.26 as a number)",
                   declared)
        declared = None
    seat["vllm_release"] = None
    if not isinstance(seat["image"], str):
        return
    try:
        seat["vllm_release"] = seat_release(seat["image"], declared, nearest)
    except ReleaseError as exc:
        check.fail(where, exc.field, exc.expected, exc.got)


# -- sizing ---------------------------------------------------------------------------------------
def _config_path(seat, inventory_dir):
    path = seat["model_config"]
    return path if os.path.isabs(path) else os.path.join(inventory_dir or ".", path)


def size(seat, inventory_dir, options):
    """``{"kv": kv_budget result, "rule": how the budget was chosen, "weights_bytes": per GPU,
    "calibration": the budget measured demand gives beside the rule's, or None}``.
    ``options``: ``gpu_profile``, ``kv_round_to``, and ``demand`` (seat -> a demand snapshot's
    figures) with ``demand_factor``."""
    try:
        path = _config_path(seat, inventory_dir)
        config = load_model_config(path, seat=seat["name"])
        common = {"seat": seat["name"], "kv_cache_dtype": seat["kv_cache_dtype"],
                  "tensor_parallel_size": seat["tensor_parallel_size"], "block_size": seat["block_size"],
                  "max_num_seqs": seat["max_num_seqs"],
                  "max_num_batched_tokens": seat["max_num_batched_tokens"],
                  "gpu": CPU_PLATFORM if seat["vllm_platform"] == "cpu" else options["gpu_profile"],
                  "vllm_version": seat["vllm_release"]["version"],
                  "allow_nearest_vllm_release": seat["vllm_release"]["nearest"]}
        if seat["kv_cache_memory_bytes"] is not None:
            kv = evaluate_kv_budget(config, seat["max_model_len"], seat["kv_cache_memory_bytes"], **common)
            rule = "pinned %s" % human_bytes(seat["kv_cache_memory_bytes"])
        else:
            kv = size_kv_budget(config, seat["max_model_len"], kv_factor=seat["kv_factor"],
                                kv_round_to=options["kv_round_to"], **common)
            rule = "%s %sx" % (seat["kv_rule"], seat["kv_factor"])
        by_demand, calibration = _calibration(seat, config, kv, options, common)
        if seat["kv_sizing"] == "demand" and by_demand is not None:
            kv = by_demand
            rule = "demand: peak {:,} tokens x {}".format(calibration["peak_kv_tokens"], options["demand_factor"])
        elif seat["kv_sizing"] == "demand":
            rule += " (kv_sizing: demand, none measured yet)"
        return {"kv": kv, "rule": rule, "weights_bytes": weights_bytes_per_gpu(seat, path),
                "calibration": calibration}
    except (ModelConfigError, KVSizingError, FootprintError) as exc:
        raise SizingError(str(exc)) from None


def _calibration(seat, config, by_rule, options, common):
    """``(kv sized by demand, what a demand snapshot says of the seat beside its budget)``: the
    peak it measured, the budget that demand needs (sized like the rule), and the tail of its
    replies; ``(None, None)`` without figures, unless the seat is sized by demand (then refused)."""
    figures = (options.get("demand") or {}).get(seat["name"])
    peak = figures.get("peak_kv_tokens") if figures else None
    # a window without traffic (a holiday, an outage, the gateway sending elsewhere) measured no
    # demand: sizing by it would leave the seat one request
    if seat["kv_sizing"] == "demand" and (peak is None or not figures.get("requests")):
        if not options.get("demand_required", True):
            return None, None
        if options.get("demand") is None:
            why = "no demand snapshot is given (llmfleet_demand_snapshot, written by playbooks/calibrate.yml)"
        elif not figures:
            why = "the demand snapshot has no figures for it"
        elif peak is None:
            why = "the demand snapshot has no peak KV tokens for it (%s)" % (
                figures.get("detail") or "no metrics in its window")
        else:
            why = "the demand snapshot saw no request to it (%s); calibrate over a window with its traffic" % (
                figures.get("detail") or "no traffic")
        raise SizingError("seat %s: kv_sizing: demand, but %s" % (seat["name"], why))
    if peak is None:
        return None, None
    demand_tokens = int(math.ceil(peak * options["demand_factor"]))
    kv = size_kv_for_demand(config, by_rule["max_model_len"], demand_tokens, kv_round_to=options["kv_round_to"],
                            **common)
    return kv, {
        "sized_by": seat["kv_sizing"], "peak_kv_tokens": peak, "peak_kv_usage": figures.get("peak_kv_usage"),
        "requests": figures.get("requests"), "demand_tokens": demand_tokens, "demand_factor": options["demand_factor"],
        "by_rule_bytes": by_rule["kv_cache_memory_bytes"],
        "by_rule": "pinned" if seat["kv_rule"] == "pinned" else "%sx" % seat["kv_factor"],
        "by_demand_bytes": kv["kv_cache_memory_bytes"],
        "runaways": figures.get("runaways"), "max_new_tokens": seat["max_new_tokens"]}


def boot_problem(seat, sized):
    """Why vLLM would refuse to start with this budget, or None."""
    kv = sized["kv"]
    if kv["boot_ok"]:
        return None
    return "seat %s: vLLM would not boot with %s of KV: %s" % (
        seat["name"], human_bytes(kv["kv_cache_memory_bytes"]), kv["boot_error"])


def footprint(seat, sized, plateau, record, default_overhead_mib):
    # compared with what ran: the context as sized ("published" resolved)
    launched = dict(seat, max_model_len=sized["kv"]["max_model_len"])
    return vllm_footprint(launched, sized["kv"]["kv_cache_memory_bytes"], sized["weights_bytes"],
                          plateau, record, default_overhead_mib)


def ran(process):
    """What the seat ran, from its container in a snapshot (the image and the arguments of the
    command this engine writes): ``{"image", "model", "max_model_len",
    "kv_cache_memory_bytes"}``, or None when they cannot be read."""
    args = process.get("args") or []
    try:
        length = int(flag_value(args, "--max-model-len"))
        kv = int(flag_value(args, "--kv-cache-memory-bytes"))
    except (TypeError, ValueError):
        return None
    return {"image": process.get("image"), "model": args[0], "max_model_len": length,
            "kv_cache_memory_bytes": kv}


# How a container runs vLLM's OpenAI server: `vllm serve MODEL ...` (the image's entrypoint) or
# the module itself.
_SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)


def server_args(args):
    """The arguments after ``vllm serve`` (or the API server module), or None when ``args`` do
    not run vLLM's server."""
    for position, arg in enumerate(args):
        name = arg.rsplit("/", 1)[-1]
        if name == "vllm" and position + 1 < len(args) and args[position + 1] == "serve":
            return list(args[position + 2:])
        if arg in _SERVER_MODULES:
            return list(args[position + 1:])
    return None


def serves(argv):
    """Whether a process started outside the collection (its argv) runs vLLM's server."""
    return server_args(argv) is not None


# The requests a vLLM server is working on, by its Prometheus metrics: those in the batch and
# those queued for it, summed over its engines (one sample per engine and model name).
IN_FLIGHT_PATH = "/metrics"
_IN_FLIGHT_RE = lazy_regex(r"^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+(?P<value>[0-9.eE+-]+)\s*$",
                           re.MULTILINE)


def in_flight(metrics):
    """The requests the server is working on, by the text of its IN_FLIGHT_PATH; None when the
    text has no such count."""
    values = [float(found.group("value")) for found in _IN_FLIGHT_RE.finditer(metrics or "")]
    return int(sum(values)) if values else None


def boot_state(log):
    """How far such a server's boot got, by its log since it started: ``("serving", None)``
    once the API server is up (vLLM starts it after the engine has taken its memory),
    ``("failed", why)`` when its engine died, else ``("booting", the error that says why, if
    any)``."""
    info = parse_boot_log(log)
    if info["engine_dead"]:
        return "failed", info["cause"] or "its engine died"
    if info["startup_complete"]:
        return "serving", None
    return "booting", info["cause"]


def boot_utilization(footprint_mib, margin_mib, total_mib):
    """``--gpu-memory-utilization``: vLLM's startup check then refuses a GPU without room."""
    return boot_gate_utilization(footprint_mib, margin_mib, total_mib)


def planned(seat, sized):
    """The planned numbers of the seat, and what it serves."""
    fields = {key: sized["kv"][key] for key in PLANNED_FIELDS}
    fields["vllm_release"] = dict(seat["vllm_release"])  # what the seat runs, what planned its KV
    fields["served_model_names"] = seat["served_model_names"]
    fields["first_request_error"] = sized["kv"]["first_request_error"]
    fields["calibration"] = sized.get("calibration")
    return fields


def window_problems(seat, sized, running):
    """Nothing in what the seat runs now bars this window."""
    return [], []


# -- launch ---------------------------------------------------------------------------------------
def check_plan_seat(seat, fail):
    """One GPU per tensor-parallel rank; ``fail(field, expected, got)``."""
    tp = seat["launch"].get("tensor_parallel_size") or 1
    if tp != len(seat["gpus"]):
        fail("gpus", "one GPU per tensor-parallel rank (%s)" % tp, seat["gpus"])


def environment(seat):
    """The variables a maintenance window changes, beyond every seat's (image, port, GPUs)."""
    return [
        ("SEAT_MODEL", seat["launch"]["model"]),
        ("SEAT_MAX_MODEL_LEN", str(seat["max_model_len"])),
        ("SEAT_KV_CACHE_MEMORY_BYTES", str(seat["kv_cache_memory_bytes"])),
        ("SEAT_GPU_MEMORY_UTILIZATION", "%.2f" % seat["gpu_memory_utilization"]),
    ]


def command(seat, var):
    """The ``vllm serve`` arguments after the image's entrypoint; ``var(NAME)`` is the runtime's
    reference to one of the seat's variables."""
    launch = seat["launch"]
    # One flag with every name: vLLM's --served-model-name takes nargs="+", and a repeated flag
    # keeps only its last occurrence.
    args = [var("SEAT_MODEL"), "--port", var("SEAT_PORT"), "--served-model-name"]
    args += list(launch.get("served_model_names") or [seat["name"]])
    args += [
        _FLAG_OF["max_model_len"], var("SEAT_MAX_MODEL_LEN"),
        # The registered flag; vLLM's own log suggests --kv-cache-memory, which only works as an
        # argparse abbreviation.
        _FLAG_OF["kv_cache_memory_bytes"], var("SEAT_KV_CACHE_MEMORY_BYTES"),
        # With KV pinned in bytes, util is only vLLM's startup check against free memory.
        _FLAG_OF["gpu_memory_utilization"], var("SEAT_GPU_MEMORY_UTILIZATION"),
    ]
    if (launch.get("tensor_parallel_size") or 1) > 1:
        args += [_FLAG_OF["tensor_parallel_size"], str(launch["tensor_parallel_size"])]
    if launch.get("kv_cache_dtype") not in (None, "auto"):
        args += [_FLAG_OF["kv_cache_dtype"], launch["kv_cache_dtype"]]
    for field in ("block_size", "max_num_seqs", "max_num_batched_tokens"):
        if launch.get(field) is not None:
            args += [_FLAG_OF[field], str(launch[field])]
    # Tool calling, reasoning and the chat-template default are a set: a tool parser without
    # --enable-auto-tool-choice is inert, and vLLM refuses the reverse.
    if launch.get("tool_call_parser"):
        args += ["--enable-auto-tool-choice", _FLAG_OF["tool_call_parser"], launch["tool_call_parser"]]
    if launch.get("reasoning_parser"):
        args += [_FLAG_OF["reasoning_parser"], launch["reasoning_parser"]]
    if launch.get("default_chat_template_kwargs"):
        args += [_FLAG_OF["default_chat_template_kwargs"],
                 json.dumps(launch["default_chat_template_kwargs"], sort_keys=True)]
    if launch.get("max_new_tokens"):
        # vLLM reads max_new_tokens here; a "max_tokens" key is silently ignored.
        args += [_FLAG_OF["max_new_tokens"], json.dumps({"max_new_tokens": launch["max_new_tokens"]})]
    return args + list(launch.get("extra_args") or [])


def container_environment(seat, var):
    """vLLM takes everything on its command line."""
    return []


def listen_port(seat, var):
    """The port the server listens on inside its container: vLLM's is --port, the seat's."""
    return var("SEAT_PORT")


# Shared memory for the workers' tensors: vLLM's image wants the host's IPC namespace.
HOST_IPC = True
# A worker fault makes the API server exit 0: only a policy that restarts a clean exit brings
# the seat back.
# It leaves the operator's margin free on its GPUs.
KEEPS_OWN_HEADROOM = False
EXITS_CLEAN_ON_FAULT = True


# -- gates ----------------------------------------------------------------------------------------
def before_start_gates(seat, card, free_mib):
    """vLLM's own startup check: free >= ceil(total x util), in bytes."""
    util = seat["gpu_memory_utilization"]
    requested = math.ceil(card["memory_total_mib"] * MIB * util)
    free_bytes = free_mib * MIB
    return [gate(seat["name"], "vllm_startup_check", free_bytes >= requested, free_bytes, requested,
                 "vLLM refuses to start when free memory (%.2f GiB) is less than "
                 "ceil(total x %.2f) = %.2f GiB" % (free_bytes / GIB, util, requested / GIB))]


def host_gates(seat, cards):
    """vLLM pins no host memory the plan counts."""
    return []


def _logged(value, sentence):
    """The sentence about a value the boot log gave, or why there is none."""
    return "the boot log has no such line" if value is None else sentence


def boot_log_gates(seat, boot):
    """The boot log's reserved KV and capacity line equal the plan; no OOM or fall-back."""
    name = seat["name"]
    planned_bytes = seat["kv_cache_memory_bytes"]
    return [
        gate(name, "kv_reserved", reserved_matches(planned_bytes, boot), boot.get("kv_cache_memory_bytes"),
             planned_bytes, "%s; the plan pins %s bytes" % (_logged(
                 boot.get("kv_cache_memory_bytes"), "the log's reserved KV line says %s GiB (%s bytes)"
                 % (boot.get("reserved_kv_gib"), boot.get("kv_cache_memory_bytes"))), planned_bytes)),
        gate(name, "kv_cache_tokens", boot.get("kv_cache_tokens") == seat["kv_cache_tokens"],
             boot.get("kv_cache_tokens"), seat["kv_cache_tokens"],
             "%s; the plan computed %s%s" % (_logged(
                 boot.get("kv_cache_tokens"), "the log's %s KV cache size is %s tokens"
                 % (boot.get("kv_cache_pool") or "GPU", num(boot.get("kv_cache_tokens")))), num(seat["kv_cache_tokens"]),
                 # a boot that never got there: why, in the engine's words, once in the window's message
                 "; the engine stopped at: %s" % boot["cause"]
                 if boot.get("kv_cache_tokens") is None and boot.get("cause") else "")),
        gate(name, "max_concurrency", boot.get("max_concurrency") == seat["max_concurrency"],
             boot.get("max_concurrency"), seat["max_concurrency"],
             "%s; the plan computed %sx" % (_logged(
                 boot.get("max_concurrency"), "the log's maximum concurrency is %sx at %s tokens"
                 % (boot.get("max_concurrency"), num(boot.get("max_model_len")))),
                 seat["max_concurrency"])),
        gate(name, "no_oom", boot.get("oom_events", 0) == 0 and boot.get("autotuner_oom_fallbacks", 0) == 0,
             {"oom_events": boot.get("oom_events", 0),
              "autotuner_oom_fallbacks": boot.get("autotuner_oom_fallbacks", 0),
              "phases": sorted(set(boot.get("oom_phases") or []))},
             {"oom_events": 0, "autotuner_oom_fallbacks": 0},
             "%d OOM event(s) and %d FlashInfer autotuner OOM fall-back(s) in the boot log%s"
             % (boot.get("oom_events", 0), boot.get("autotuner_oom_fallbacks", 0),
                ": " + boot["cause"] if boot.get("cause") else "")),
    ] + _version_gates(seat, boot) + _rank_gates(seat, boot)


def _version_gates(seat, boot):
    """The release the boot log names is the minor the plan's KV arithmetic assumed; a log
    without a version line leaves the image tag's word standing."""
    release = seat.get("vllm_release")
    if not release:
        return []
    printed = parse_version(boot.get("version"))
    assumed = parse_version(release["version"] or release["release"])
    ok = printed is None or printed[:2] == assumed[:2]
    known = "nothing named the version" if release["version"] is None else "its %s says %s" % (
        release.get("from", "image tag"), release["version"])
    return [gate(seat["name"], "vllm_version", ok, boot.get("version"), release["version"],
                 "%s; the plan used %s's KV arithmetic (%s)%s" % (
                     _logged(boot.get("version"), "the boot log says vLLM %s" % boot.get("version")),
                     release["release"], known, "" if ok else ": set the seat's vllm_version to what the image runs"))]


def _rank_gates(seat, boot):
    """Tensor parallel: every rank's worker (Worker_TP0 ... Worker_TP<n-1>, or Ray's and V0's
    worker processes) printed its own reserved-KV line, and each pins the plan's bytes per GPU."""
    tp = len(seat.get("gpus") or [])
    if tp < 2:
        return []
    planned_bytes = seat["kv_cache_memory_bytes"]
    printed = boot.get("worker_reserved_kv_gib") or {}
    wrong = sorted(worker for worker, gib in printed.items() if not matches_printed_gib(planned_bytes, gib))
    missing = ["Worker_TP%d" % rank for rank in range(tp) if "Worker_TP%d" % rank not in printed] \
        if all(worker.startswith("Worker_TP") for worker in printed) else []
    ok = len(printed) == tp and not wrong and not missing
    return [gate(seat["name"], "kv_reserved_per_rank", ok, printed, {"ranks": tp, "gib": "%s" % round(planned_bytes / GIB, 2)},
                 "%d of %d ranks printed the plan's %s bytes per GPU%s" % (
                     len(printed) - len(wrong), tp, num(planned_bytes),
                     "; not %s" % ", ".join(["%s (%s)" % (w, printed[w]) for w in wrong]
                                            + ["%s (no line)" % w for w in missing]) if wrong or missing else ""))]


def runtime_probe_gate(seat, prompt_tokens, status, detail, free_before=None):
    """The long request's answer, and the free MiB on the seat's GPUs just before it (what the
    boot left; the request's own memory comes out of it)."""
    return gate(seat["name"], "runtime_probe", status == 200, {"status": status, "free_mib_before": free_before},
                {"status": 200}, "a %s-token request (max_model_len %s) answered %s%s%s"
                % (num(prompt_tokens), num(seat["max_model_len"]), status,
                   " with %s free before it" % ", ".join("%s MiB on %s" % (num(mib), gpu)
                                                         for gpu, mib in sorted(free_before.items()))
                   if free_before else "", ": " + detail if detail else ""))


def _engine_stopped_at(host, seat):
    """Why the engine went down, in its own words, from its log as it is now; "" when it says none."""
    try:
        cause = parse_boot_log(host.log(seat))["cause"]
    except (DockerError, SystemdError, VllmLogError):
        return ""
    return "; the engine stopped at: %s" % cause if cause else ""


def log_gates(seat, log):
    """The boot log's gates, or its unreadable gate when it is no vLLM boot log."""
    try:
        return boot_log_gates(seat, parse_boot_log(log))
    except VllmLogError as exc:
        return [unreadable(seat, LOG_GATE, exc)]


def probe_gates(seat, host):
    """One request near max_model_len (boot is not runtime: what boot never exercises), and the
    container after it."""
    tokens = int(seat["max_model_len"] * host.runtime_probe_fraction)
    body = {"model": seat["served_model_names"][0], "max_tokens": 16,
            "messages": [{"role": "user", "content": "hello " * tokens}]}
    free_before = host.free_mib(seat)
    try:
        status, reply = host.client(seat).call_json("POST", "/v1/chat/completions", body, timeout=host.health_timeout)
        detail = "" if status == 200 else str(reply)[:300]
    except Unreachable as exc:
        status, detail = None, exc.detail
    if status != 200:
        detail += _engine_stopped_at(host, seat)
    return [runtime_probe_gate(seat, tokens, status, detail, free_before), host.container_gate(seat)]


# -- the report -----------------------------------------------------------------------------------
def plan_cells(seat):
    """The plan's and the sizing's cells: KV budget, KV tokens, concurrency."""
    return ("%s (%s)" % (human_bytes(seat["kv_cache_memory_bytes"]), seat["kv_rule"]),
            "{:,}".format(seat["kv_cache_tokens"]),
            "%.2fx @ %s" % (seat["max_concurrency"], "{:,}".format(seat["max_model_len"])))


def plan_notes(seat):
    """A seat that boots but whose engine dies at its first request: the plan lets it through (its
    gates and the runtime probe are what catch it in a window) and says so."""
    if seat.get("first_request_error"):
        return ["- **%s boots but dies at its first request**: %s (seat_rebalance_runtime_probe catches it "
                "in the window)" % (seat["name"], seat["first_request_error"])]
    return []
