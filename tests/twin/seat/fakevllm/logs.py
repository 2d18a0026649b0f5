"""vLLM 0.33's log output: `(<proc> pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`.

The [file:line] of each message is the logger call's place in the vllm-0.33.0 wheel, so a log
reader tuned on this output reads the real thing. Multi-line records repeat the whole prefix on
every line, joined by CR LF, as vllm/logging_utils/formatter.py's NewLineFormatter does.
Records go to stdout in one write each; Python-level tracebacks go to stderr unprefixed, as an
uncaught exception does in vLLM 0.33.
"""

from __future__ import annotations

import os
import threading
import time

# message key -> (file, line of the logger call in vllm 0.33.0)
SITES = {
    "logo": ("startup.py", 38),
    "non_default_args": ("startup.py", 96),
    "architecture": ("model.py", 744),
    "max_model_len": ("model.py", 2170),
    "long_max_model_len": ("model.py", 2678),
    "chunked_prefill": ("scheduler.py", 310),
    "engine_config": ("core.py", 139),
    "rank": ("parallel_state.py", 2385),
    "v2_runner": ("gpu_worker.py", 513),
    "load_from_scratch": ("model_runner.py", 399),
    "weights_took": ("default_loader.py", 506),
    "model_loading": ("model_runner.py", 428),
    "kv_layout": ("utils.py", 381),
    "hybrid_block_size": ("interface.py", 1108),
    "mamba_padding": ("interface.py", 1132),
    "reserved": ("gpu_worker.py", 676),
    "graphs": ("model_runner.py", 1163),
    "available": ("gpu_worker.py", 772),
    "cudagraph_profiling": ("gpu_worker.py", 787),
    "capacity": ("kv_cache_utils.py", 1147),
    "auto_fit_full": ("kv_cache_planning.py", 1395),
    "auto_fit_reduced": ("kv_cache_planning.py", 1404),
    "cudagraph_pool": ("gpu_worker.py", 1003),
    "suggestion": ("gpu_worker.py", 1066),
    "init_engine": ("core.py", 405),
    "supported_tasks": ("entry.py", 135),
    "starting": ("entry.py", 139),
    "routes": ("launcher.py", 188),
    "route": ("launcher.py", 197),
    "engine_failed": ("core.py", 1584),
    "engine_fatal": ("core.py", 1586),
    "worker_failed": ("multiproc_executor.py", 1057),
    "worker_exception": ("multiproc_executor.py", 1189),
    "worker_died": ("multiproc_executor.py", 380),
    "client_engine_dead": ("core_client.py", 839),
    "output_handler": ("async_llm.py", 943),
    "shutdown_triggered": ("launcher.py", 256),
    "autotuner_oom": ("autotuner.py", 2392),
}

_write_lock = threading.Lock()


def _write(fd: int, text: str) -> None:
    data = text.encode("utf-8", errors="replace")
    with _write_lock:
        while data:
            try:
                written = os.write(fd, data)
            except InterruptedError:
                continue
            except OSError:
                return  # nobody reads our output any more (container log driver gone)
            data = data[written:]


class Logger:
    """The logger of one vLLM process (APIServer, EngineCore, Worker_TP<n>)."""

    def __init__(self, process_name: str):
        self.process_name = process_name
        self.prefix_env = os.environ.get("VLLM_LOGGING_PREFIX", "")

    def log(self, level: str, site: str, message: str) -> None:
        filename, line = SITES[site]
        prefix = "%s(%s pid=%d) %s %s [%s:%d] " % (
            self.prefix_env, self.process_name, os.getpid(), level,
            time.strftime("%m-%d %H:%M:%S"), filename, line)
        _write(1, prefix + message.replace("\n", "\r\n" + prefix) + "\n")

    def info(self, site: str, message: str) -> None:
        self.log("INFO", site, message)

    def warning(self, site: str, message: str) -> None:
        self.log("WARNING", site, message)

    def error(self, site: str, message: str) -> None:
        self.log("ERROR", site, message)

    def exception(self, site: str, message: str, traceback_text: str) -> None:
        """logger.exception(): the message, then the traceback, in one record."""
        self.log("ERROR", site, message + "\n" + traceback_text)


def stdout(text: str) -> None:
    """Output that bypasses vLLM's logger (uvicorn's own lines)."""
    _write(1, text + "\n")


def stderr(text: str) -> None:
    """What Python prints for an uncaught exception, or argparse for a usage error."""
    _write(2, text + "\n")


def flashinfer_warning(message: str) -> None:
    """flashinfer.jit's logger (flashinfer/jit/core.py): its own format, on stderr."""
    now = time.time()
    _write(2, "%s,%03d - WARNING - autotuner.py:2392 - flashinfer.jit: %s\n"
           % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)), int(now * 1000) % 1000,
              message))


def format_gib(num_bytes: int) -> str:
    """vllm/utils/mem_utils.py format_gib (0.33): round to 2 decimals, str()."""
    return "%s" % round(num_bytes / 2 ** 30, 2)


def traceback_text(frames: list, exception_line: str) -> str:
    return "Traceback (most recent call last):\n%s\n%s" % ("\n".join(
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/%s", line %d, in %s\n    %s'
        % frame for frame in frames), exception_line)
