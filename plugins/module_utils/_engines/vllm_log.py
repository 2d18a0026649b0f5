# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Read what a vLLM seat said about itself at boot: its KV budget, capacity and failures.

Pure standard library. The patterns follow vLLM's own format strings from 0.10.1.1 through
0.33.0 (the fixtures in tests/unit/fixtures/vllm_logs/ are rendered from those strings):

* the line prefix: 0.33 formats ``(<proc> pid=N) LEVEL MM-DD HH:MM:SS [file.py:N] msg`` and
  repeats it on every line of a multi-line record; 0.10.x prints ``LEVEL ... msg`` behind a
  coloured ``(<proc> pid=N)`` that it writes on stdout and stderr alike;
* GiB values: 0.33's ``format_gib`` is ``str(round(x, 2))`` (``5.5``), 0.10.x used ``%.2f``
  (``5.50``, and ``22.00GiB`` without a space in the "reserved" line);
* 0.33 prints the capacity as one line, 0.10.x as two (``GPU KV cache size``, then
  ``Maximum concurrency``); 0.10.x said ``models's max seq len`` in the admission error;
* the V0 engine (0.5 ... 0.10) wrote ``file.py:N]`` without the bracket, ``Loading model weights
  took 14.99 GB`` (GB meaning GiB) and ``# GPU blocks: N, # CPU blocks: M`` instead of a token
  capacity; its API server printed its arguments as ``args: Namespace(...)`` (to 0.8), and its
  worker refused a context its KV cache could not hold as ``The model's max seq len (L) is larger
  than the maximum number of tokens that can be stored in KV cache (T)``;
* Ray nests prefixes (``(EngineCore_0 pid=..) (RayWorkerWrapper pid=..)``): a line belongs to the
  innermost process, and each rank's worker prints its own reserved-KV line;
* a speculative draft model prints its own ``Using max model len`` after the target's, which is
  the seat's;
* vLLM's CPU platform (its CPU build) names its pool ``CPU KV cache size`` and reports the budget
  as ``Explicitly set (G/T) GiB for KV cache on node N`` in its worker;
* an OOM is torch's ``OutOfMemoryError`` or ``CUDA error: out of memory`` (``torch.AcceleratorError``,
  ``RuntimeError``), 0.11.0's report of the one it caught creating a weight (``Failed to create
  unquantized linear weights: CUDA out of memory...``), or a FlashInfer autotuner fall-back, each
  counted once with where the boot was: loading weights, profiling, capturing graphs (after the KV
  allocation) or serving.

A container log can hold several boots (``restart: always``); the figures describe the last.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import SizeError, to_bytes

GIB = 1 << 30

_ANSI = lazy_regex(r"\x1b\[[0-9;]*[A-Za-z]")
# the processes that hold one rank each: vLLM's multiproc workers, Ray's, V0's
_WORKER = lazy_regex(r"\A(?:Worker_TP\d+|RayWorkerWrapper|VllmWorkerProcess)\Z")
_PROC = lazy_regex(r"\((?P<proc>[A-Za-z][\w]*) pid=(?P<pid>\d+)\) ")
# "[file.py:N]" since 0.8; "file.py:N]" before
_HEADER = lazy_regex(r"(?:^|\s)(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d "
                     r"\[?(?P<src>[^\]\s]+):\d+\] (?P<msg>.*)$")
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"

_VERSION_PATTERNS = (
    lazy_regex(r"^\s*[\u2580-\u259f][\s\u2580-\u259f]*version\s+(?P<version>\S+)\s*$"),  # 0.33 logo
    lazy_regex(r"^vLLM server version (?P<version>\S+), serving model (?P<model>.+)$"),
    lazy_regex(r"^vLLM API server version (?P<version>\S+)$"),           # 0.10.x
)
_LOGO_MODEL = lazy_regex(r"^\s*[\u2580-\u259f][\s\u2580-\u259f]*model\s+(?P<model>.+?)\s*$")
_ENGINE_VERSION = lazy_regex(r"Initializing (?:a V[01] |an )LLM engine \(v(?P<version>[^)]+)\)")

_CAPACITY = lazy_regex(r"(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens")
_CONCURRENCY = lazy_regex(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: "
                          r"(?P<conc>" + _NUMBER + r")x")
_MAX_LEN = lazy_regex(r"^Using max model len (?P<len>\d+)")
# V0's API server echoed its argparse Namespace (vllm/entrypoints/openai/api_server.py, 0.5.0 to
# 0.8.5: logger.info("args: %s", args)); max_model_len=None when the flag was not given
_V0_ARGS_LEN = lazy_regex(r"^args: Namespace\((?:.*?, )?max_model_len=(?P<len>\d+)[,)]")
_AUTO_FIT = lazy_regex(r"^Auto-fit max_model_len: (?:reduced from \d+ to (?P<reduced>\d+)|"
                       r"full model context length (?P<full>\d+) fits)")
_RESERVED = lazy_regex(r"Initial free memory (?P<free>" + _NUMBER + r") GiB, reserved "
                       r"(?P<gib>" + _NUMBER + r") ?GiB memory for KV Cache")
# the CPU platform's worker: "Explicitly set (0.06/23.54) GiB for KV cache on node 0." (a pinned
# budget) or "Auto set (...)" (one sized from the worker's requested memory); its total is the
# node's memory, not a free figure
_CPU_RESERVED = lazy_regex(r"^(?:Explicitly|Auto) set \((?P<gib>" + _NUMBER + r")/(?P<total>" + _NUMBER
                           + r")\) GiB for KV cache on node \d+")
_NON_DEFAULT_KV = lazy_regex(r"^non-default args: .*'kv_cache_memory_bytes': (?P<bytes>\d+)")
_AVAILABLE = lazy_regex(r"^Available KV cache memory: (?P<gib>" + _NUMBER + r") GiB")
# V1: "Model loading took 7.63 GiB memory and ..."; V0: "Loading model weights took 14.99 GB"
# and "Model loading took 0.47 GB and ..." (GB there is vLLM's name for GiB)
_WEIGHTS = lazy_regex(r"^(?:Model loading|Loading model weights) took (?P<gib>" + _NUMBER + r") Gi?B(?: |$)")
# V0's block counts: "# GPU blocks: 10039, # CPU blocks: 1310"
_V0_BLOCKS = lazy_regex(r"# GPU blocks: (?P<gpu>\d+), # CPU blocks: (?P<cpu>\d+)")
# Where in the boot an OOM happened: the phase the log was in, each ended by its marker.
_PHASES = (("weights", _WEIGHTS, "profile"),
           ("profile", lazy_regex(r"KV cache size: |# GPU blocks: |reserved .* for KV Cache"), "graph capture"),
           ("graph capture", lazy_regex(r"^Graph capturing finished|^init engine "), "runtime"))
# An OOM where it happened (not the engine's "Worker failed with error 'CUDA out of memory...'"
# that reports it again): torch's OutOfMemoryError, or the CUDA error torch.AcceleratorError
# and RuntimeError carry.
_OOM_DETAIL = lazy_regex(r"\ACUDA error: out of memory")
# vLLM 0.11.0, model_executor/layers/linear.py (UnquantizedLinearMethod.create_weights), on the
# torch.cuda.OutOfMemoryError it caught: logger.error("Failed to create unquantized linear
# weights: %s", e), then a RuntimeError of its own words; the traceback may repeat the OOM
_WEIGHTS_OOM = lazy_regex(r"^Failed to create unquantized linear weights: (?P<detail>.+)$")
_GRAPHS = lazy_regex(r"^Graph capturing finished in \d+ secs, took (?P<gib>" + _NUMBER + r") GiB")
_SUGGESTION = lazy_regex(r"`--kv-cache-memory=(?P<fit>-?\d+)`.*?`--kv-cache-memory=(?P<full>-?\d+)`")
_INIT_ENGINE = lazy_regex(r"^init engine \(profile, create kv cache, warmup model\) took "
                          r"(?P<secs>" + _NUMBER + r") s")
_SERVER = lazy_regex(r"^Starting vLLM (?:API )?server (?:\d+ )?on (?P<address>\S+)")
_STARTUP_COMPLETE = lazy_regex(r"^INFO:\s+Application startup complete\.")
_SHUTDOWN = lazy_regex(r"^INFO:\s+(?:Shutting down|Finished server process)|^\[shutdown\] API server")
_ENGINE_DEAD = lazy_regex(r"EngineCore encountered a fatal error|EngineDeadError|died unexpectedly"
                          r"|engine core exited unexpectedly")

_STARTUP_CHECK = lazy_regex(
    r"Free memory on device (?:(?P<device>\S+) )?\((?P<free>" + _NUMBER + r")/(?P<total>" + _NUMBER
    + r") GiB\) on startup is less than desired GPU memory utilization \((?P<util>" + _NUMBER
    + r"), (?P<requested>" + _NUMBER + r") GiB\)")
_ADMISSION = lazy_regex(
    r"To serve at least one request with the models?'s max seq len \((?P<len>\d+)\), \((?P<needed>"
    + _NUMBER + r") GiB KV cache is needed, which is larger than the available KV cache memory "
    r"\((?P<available>" + _NUMBER + r") GiB\)\.(?: Based on the available memory, the estimated "
    r"maximum model length is (?P<estimated>\d+)\.)?")
# V0's worker (vllm/worker/worker.py raise_if_cache_size_invalid, 0.5.0 to 0.10.2)
_V0_ADMISSION = lazy_regex(
    r"The model's max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens that can be "
    r"stored in KV cache \((?P<tokens>\d+)\)")
# any other words around the length those refusals name ("models's" to 0.21)
_REFUSED_LEN = lazy_regex(r"[Tt]he models?'s max seq len \((?P<len>\d+)\)")
_NO_KV_MEMORY = lazy_regex(r"No available memory for the cache blocks")
_MAMBA = lazy_regex(r"max_num_seqs \((?P<seqs>\d+)\) exceeds available Mamba cache blocks "
                    r"\((?P<blocks>\d+)\)")

_EXCEPTION = lazy_regex(r"^(?P<name>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))(?:: (?P<detail>.*))?$")
_PYDANTIC_VALUE_ERROR = lazy_regex(r"^\s+Value error, (?P<detail>.*?)(?: \[type=value_error.*)?$")
_ARGPARSE = lazy_regex(r"^(?P<prog>vllm(?: \w+)?): error: (?P<detail>.+)$")
_AUTOTUNER_OOM = lazy_regex(r"\[Autotuner\]: OOM detected")
# ERROR-level lines that are no boot failure: a client's bad request, and the engine's dumps of
# its inputs when it dies (the request's own data, which a report must not carry)
_NOT_FAILURES = lazy_regex(r"^(?:Error with model error=|Dumping (?:input data|scheduler output|scheduler stats)\b)")
_TRACEBACK_BODY = ("Traceback (most recent call last)", "During handling of the above exception",
                   "The above exception was the direct cause")


class VllmLogError(ValueError):
    """The log cannot be read; the message says which input and what was expected."""


def _split_line(raw):
    """(level, message, process) of one log line: vLLM's prefix removed, ANSI colour stripped.
    ``level`` is None for output that did not go through vLLM's logger; ``process`` is the
    innermost ``(<proc> pid=N)`` prefix's ``(name, pid)`` (``("Worker_TP1", "31")``), or None."""
    line = _ANSI.sub("", raw).replace("\r", "")
    header = _HEADER.search(line)
    prefix = line[:header.start() + 1] if header else line
    procs = [(found.group("proc"), found.group("pid")) for found in _PROC.finditer(prefix)]
    proc = procs[-1] if procs else None
    if header:
        return header.group("level"), header.group("msg"), proc
    lead = _PROC.match(line)
    return None, line[lead.end():] if lead else line, proc


def _split_boots(lines):
    """The (level, message) lines of each boot, and how many boots began; a boot begins at
    vLLM's version line."""
    boots, current, started = [], [], 0
    for level, msg, proc in lines:
        if any(pattern.match(msg) for pattern in _VERSION_PATTERNS):
            started += 1
            if current:
                boots.append(current)
                current = []
        current.append((level, msg, proc))
    boots.append(current)
    return boots, started


def matches_printed_gib(num_bytes, printed):
    """Whether ``printed`` is how vLLM renders ``num_bytes`` as GiB (0.33 or 0.10.x style)."""
    gib = num_bytes / GIB
    return printed in ("%s" % round(gib, 2), "%.2f" % gib)


def parse_boot_log(text):
    """Everything a boot gate reads from a vLLM log, for its last boot.

    Returns a dict: the contract keys (``kv_cache_tokens``, ``max_concurrency``,
    ``max_model_len``, ``kv_cache_memory_bytes``, ``available_kv_cache_gib``,
    ``model_weights_gib``, ``ready``, ``oom_events``, ``errors``) and what else a gate needs
    (``version``, ``boots``, ``startup_check``, ``admission_check``, ``mamba_max_num_seqs``, ...).
    Values the log does not state are ``None``.
    """
    if not isinstance(text, str):
        raise VllmLogError("log: expected the text of a vLLM log, got %s" % type(text).__name__)
    lines = [_split_line(raw) for raw in text.split("\n")]
    boots, boot_count = _split_boots(lines)
    result = _empty_result()
    result["boots"] = boot_count
    _read_boot(boots[-1], result)
    return result


def _empty_result():
    return {
        "kv_cache_tokens": None, "max_concurrency": None, "max_model_len": None,
        "kv_cache_memory_bytes": None, "available_kv_cache_gib": None, "model_weights_gib": None,
        "ready": False, "oom_events": 0, "errors": [],
        "version": None, "model": None, "boots": 0,
        "startup_complete": False, "engine_dead": False, "shutdown": False,
        "kv_cache_memory_bytes_exact": None, "reserved_kv_gib": None, "initial_free_gib": None,
        "kv_cache_pool": None, "torch_oom_events": 0, "autotuner_oom_fallbacks": 0,
        "startup_check": None, "admission_check": None, "mamba_max_num_seqs": None,
        "no_kv_cache_memory": False, "graph_capture_gib": None,
        "suggested_kv_cache_memory_bytes": None, "server_address": None,
        "init_engine_seconds": None,
        # the error that says why the boot failed, of all it printed
        "cause": None,
        # tensor parallel: each worker's own reserved-KV line, as printed (GiB), by its process
        # (Worker_TP<n>, or "RayWorkerWrapper pid=N" under Ray)
        "worker_reserved_kv_gib": {},
        # V0's "# GPU blocks" (it printed no token capacity)
        "num_gpu_blocks": None,
        # where each OOM event happened: weights, profile, graph capture or runtime
        "oom_phases": [],
    }


def _read_boot(lines, result):
    errors, torch_ooms = [], set()
    exact_kv_bytes = None
    configured_len = args_len = None

    def add_error(message):
        if message not in errors:
            errors.append(message)

    phase = "weights"
    for level, msg, proc in lines:
        if _AUTOTUNER_OOM.search(msg):
            result["autotuner_oom_fallbacks"] += 1
            result["oom_phases"].append(phase)
        for name, marker, following in _PHASES:
            if phase == name and marker.search(msg):
                phase = following
        if _STARTUP_COMPLETE.match(msg):
            phase = "runtime"
        for pattern in _VERSION_PATTERNS:
            found = pattern.match(msg)
            if found:
                result["version"] = found.group("version")
                if "model" in found.groupdict():
                    result["model"] = found.group("model")
        found = _LOGO_MODEL.match(msg)
        if found and result["model"] is None:
            result["model"] = found.group("model")
        found = _ENGINE_VERSION.search(msg)
        if found and result["version"] is None:
            result["version"] = found.group("version")

        found = _CAPACITY.search(msg)
        if found and result["kv_cache_tokens"] is None:
            result["kv_cache_tokens"] = int(found.group("tokens").replace(",", ""))
            result["kv_cache_pool"] = found.group("pool")
        found = _CONCURRENCY.search(msg)
        if found and result["max_concurrency"] is None:
            result["max_concurrency"] = float(found.group("conc"))
            result["max_model_len"] = int(found.group("len").replace(",", ""))
        found = _MAX_LEN.match(msg)
        # the first is the target model's: a speculative draft model prints its own after it
        if found and configured_len is None:
            configured_len = int(found.group("len"))
        found = _AUTO_FIT.match(msg)
        if found:
            configured_len = int(next(value for value in found.groups() if value))
        found = _V0_ARGS_LEN.match(msg)
        if found:
            args_len = int(found.group("len"))
        found = _V0_BLOCKS.search(msg)
        if found and result["num_gpu_blocks"] is None:
            result["num_gpu_blocks"] = int(found.group("gpu"))
        found = _RESERVED.search(msg)
        if found and result["reserved_kv_gib"] is None:
            result["reserved_kv_gib"] = found.group("gib")
            result["initial_free_gib"] = float(found.group("free"))
        if found and proc and _WORKER.match(proc[0]):
            result["worker_reserved_kv_gib"].setdefault(proc[0] if proc[0].startswith("Worker_TP") else
                                                        "%s pid=%s" % proc, found.group("gib"))
        found = _CPU_RESERVED.match(msg)
        if found and result["reserved_kv_gib"] is None:
            result["reserved_kv_gib"] = found.group("gib")
        found = _NON_DEFAULT_KV.match(msg)
        if found:
            exact_kv_bytes = int(found.group("bytes"))
        found = _AVAILABLE.match(msg)
        if found and result["available_kv_cache_gib"] is None:
            result["available_kv_cache_gib"] = float(found.group("gib"))
        found = _WEIGHTS.match(msg)
        if found and result["model_weights_gib"] is None:
            result["model_weights_gib"] = float(found.group("gib"))
        found = _GRAPHS.match(msg)
        if found:
            result["graph_capture_gib"] = float(found.group("gib"))
        found = _SUGGESTION.search(msg)
        if found:
            result["suggested_kv_cache_memory_bytes"] = {
                "fit_requested": int(found.group("fit")), "fit_gpu": int(found.group("full"))}
        found = _INIT_ENGINE.match(msg)
        if found:
            result["init_engine_seconds"] = float(found.group("secs"))
        found = _SERVER.match(msg)
        if found:
            result["server_address"] = found.group("address")

        if _STARTUP_COMPLETE.match(msg):
            result["startup_complete"] = True
        elif result["startup_complete"] and _SHUTDOWN.search(msg):
            result["shutdown"] = True
        if _ENGINE_DEAD.search(msg):
            result["engine_dead"] = True

        _read_failure(msg, result)

        exception = _EXCEPTION.match(msg)
        value_error = _PYDANTIC_VALUE_ERROR.match(msg)
        argparse_error = _ARGPARSE.match(msg)
        weights_oom = _WEIGHTS_OOM.match(msg)
        if weights_oom and weights_oom.group("detail") not in torch_ooms:
            torch_ooms.add(weights_oom.group("detail"))
            result["oom_phases"].append("weights")
        if exception:
            add_error(msg)
            # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError, "CUDA error: out of memory"
            # from torch.AcceleratorError or RuntimeError
            oom = exception.group("name").endswith("OutOfMemoryError") or \
                _OOM_DETAIL.match(exception.group("detail") or "")
            if oom and exception.group("detail") not in torch_ooms:
                # the same exception is printed by the worker's logger and again on stderr, and
                # linear.py's report of it comes first: one event, known by its words
                torch_ooms.add(exception.group("detail"))
                result["oom_phases"].append(phase)
        elif value_error:
            add_error("ValueError: " + value_error.group("detail"))
        elif argparse_error:
            add_error(msg)
        elif level in ("ERROR", "CRITICAL") and msg and not msg[0].isspace() \
                and not msg.startswith(_TRACEBACK_BODY) and not _NOT_FAILURES.match(msg):
            add_error(msg)

    if result["max_model_len"] is None:
        # the capacity line's, else what the engine said it uses, else the length a refusal names,
        # else V0's argument
        refused_len = result["admission_check"]["max_model_len"] if result["admission_check"] else None
        result["max_model_len"] = next((length for length in (configured_len, refused_len, args_len)
                                        if length is not None), None)
    _settle_kv_bytes(result, exact_kv_bytes)
    result["torch_oom_events"] = len(torch_ooms)
    result["oom_events"] = result["torch_oom_events"] + result["autotuner_oom_fallbacks"]
    result["errors"] = errors
    result["cause"] = _cause(errors)
    result["ready"] = result["startup_complete"] and not result["engine_dead"] and not result["shutdown"]


# What the engine says after the cause, about the cause: never the reason itself.
_AFTERMATH = lazy_regex(r"\A(?:RuntimeError: (?:Engine core initialization failed|cancelled|Worker failed with error)"
                        r"|(?:\w+\.)*EngineDeadError)")


def _cause(errors):
    """The error that says why: the first exception with words of its own that is not the engine's
    report of another's death, or linear.py's report of the OOM it caught; else the first error
    line; None without errors."""
    for error in errors:
        found = _EXCEPTION.match(error)
        if (found and found.group("detail") and not _AFTERMATH.match(error)) or _WEIGHTS_OOM.match(error):
            return error
    return errors[0] if errors else None


def _read_failure(msg, result):
    found = _STARTUP_CHECK.search(msg)
    if found and result["startup_check"] is None:
        result["startup_check"] = {
            "device": found.group("device"), "free_gib": float(found.group("free")),
            "total_gib": float(found.group("total")),
            "gpu_memory_utilization": float(found.group("util")),
            "requested_gib": float(found.group("requested"))}
    found = _ADMISSION.search(msg) or _V0_ADMISSION.search(msg) or _REFUSED_LEN.search(msg)
    if found and result["admission_check"] is None:
        figures = found.groupdict()
        result["admission_check"] = {
            "max_model_len": int(figures["len"]),
            "needed_gib": float(figures["needed"]) if figures.get("needed") else None,
            "available_gib": float(figures["available"]) if figures.get("available") else None,
            "estimated_max_model_len": int(figures["estimated"]) if figures.get("estimated") else None,
            "kv_cache_tokens": int(figures["tokens"]) if figures.get("tokens") else None}
    if _NO_KV_MEMORY.search(msg):
        result["no_kv_cache_memory"] = True
    found = _MAMBA.search(msg)
    if found and result["mamba_max_num_seqs"] is None:
        result["mamba_max_num_seqs"] = {"max_num_seqs": int(found.group("seqs")),
                                        "available_blocks": int(found.group("blocks"))}


def _settle_kv_bytes(result, exact_kv_bytes):
    """Exact bytes come from the ``non-default args`` line (vLLM echoes the CLI value there);
    the "reserved" line only has GiB to two decimals (about +-5 MiB), so alone it gives
    ``round(GiB * 2**30)`` and ``kv_cache_memory_bytes_exact: false``."""
    printed = result["reserved_kv_gib"]
    if printed is None:
        return
    if exact_kv_bytes is not None and matches_printed_gib(exact_kv_bytes, printed):
        result["kv_cache_memory_bytes"] = exact_kv_bytes
        result["kv_cache_memory_bytes_exact"] = True
    else:
        result["kv_cache_memory_bytes"] = int(round(float(printed) * GIB))
        result["kv_cache_memory_bytes_exact"] = False


def reserved_matches(planned_bytes, boot_info):
    """Whether a boot reserved ``planned_bytes`` of KV: exactly when the log gave exact bytes,
    else as vLLM would have printed the planned value (two decimals of GiB)."""
    if boot_info.get("kv_cache_memory_bytes") is None:
        return False
    if boot_info.get("kv_cache_memory_bytes_exact"):
        return boot_info["kv_cache_memory_bytes"] == planned_bytes
    return matches_printed_gib(planned_bytes, boot_info["reserved_kv_gib"])


def boot_info(log=None, container=None, docker=None, since=None, timeout=60,
              expected_kv_cache_memory_bytes=None):
    """vllm_boot_info's result: the boot log given as text, or read from ``container`` with the
    Docker runner ``docker``; with an expected budget, whether the reserved line matches it."""
    expected = expected_kv_cache_memory_bytes
    try:
        if expected is not None:
            expected = to_bytes(expected, "expected_kv_cache_memory_bytes")
    except SizeError as exc:
        raise VllmLogError(str(exc)) from None
    if container is not None:
        if not isinstance(container, str) or not container.strip():
            raise VllmLogError("container: expected a docker container name or id, got %r" % (container,))
        if timeout <= 0:
            raise VllmLogError("timeout: expected seconds > 0, got %d" % timeout)
        try:
            log = docker.logs(container, since=since, timeout=timeout)
        except DockerError as exc:
            raise VllmLogError("container %s: %s" % (container, exc)) from None
    info = parse_boot_log(log)
    if expected is not None:
        info["kv_cache_memory_bytes_match"] = reserved_matches(expected, info)
    return info
