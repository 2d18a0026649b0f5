"""The engine side: EngineCore (and, with tensor parallelism, one Worker_TP<n> process per GPU).

It is the "CUDA process" on the simulated GPU and boots as vLLM 0.33 does
(v1/worker/gpu_worker.py, v1/engine/core.py):

1. CUDA context (before the snapshot, outside the utilization budget), then the startup check
   `free < ceil(total * util)` -> vLLM's ValueError;
2. weights;
3. a profile run: activations at their peak, released again. With --kv-cache-memory-bytes the
   budget is taken as given ("reserved ... as specified"); otherwise KV = requested - (free
   memory consumed since the snapshot, neighbours included) - activation peak - CUDA graph
   estimate ("Available KV cache memory");
4. the KV plan (admission check, capacity line, Mamba check) and the KV allocation;
5. CUDA graphs, then the runtime buffers (FlashInfer workspace, sampler), then ready.

Every allocation goes through the driver; a refusal is torch's OutOfMemoryError. After ready
the engine can creep towards a plateau (a refused step is a FlashInfer autotuner OOM fall-back,
as in seed 001) and serves the API server's requests; the faults of README.md apply here.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import threading
import time

from . import RELEASE, VERSION
from .gpu import MIB, Driver, DriverError, OutOfMemory, mib_of
from .kv import Plan, PlanError, format_gib, longest_fitting_len
from .logs import Logger, flashinfer_warning, stderr, traceback_text

GIB = 2 ** 30
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. GPU %d has a total "
             "capacity of %s of which %s is free. Including non-PyTorch memory, this process has %s "
             "memory in use. Of the allocated memory %s is allocated by PyTorch, and %s is reserved "
             "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
             "documentation for Memory Management  "
             "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
WORKER_INIT_FAILED = ("WorkerProc initialization failed due to an exception in a background "
                      "process. See stack trace for root cause.")
ENGINE_FRAMES = [("v1/engine/core.py", 1539, "run_engine_core",
                  "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)"),
                 ("v1/engine/core.py", 159, "__init__",
                  "kv_cache_config = self._initialize_kv_caches(vllm_config)")]
# where in vLLM an allocation of each kind happens, for torch's OutOfMemoryError traceback
ALLOCATION_FRAMES = {
    "cuda_context": ("v1/worker/gpu_worker.py", 498, "init_device", "init_worker_distributed_environment("),
    "weights": ("v1/worker/gpu/model_runner.py", 402, "load_model", "self.model = model or model_loader.load_model("),
    "activations": ("v1/worker/gpu/model_runner.py", 1036, "profile_run", "self._dummy_run(max_num_tokens)"),
    "kv": ("v1/worker/gpu/model_runner.py", 1190, "initialize_kv_cache",
           "kv_caches = self._allocate_kv_cache_tensors(kv_cache_config)"),
    "cuda_graphs": ("v1/worker/gpu/model_runner.py", 1150, "capture_model", "self.cudagraph_manager.capture("),
}
BUSY_LOOP_FRAMES = [("v1/engine/core.py", 1570, "run_engine_core", "engine_core.run_busy_loop()"),
                    ("v1/engine/core.py", 1627, "step", "model_output = future.result()")]


def torch_size(num_bytes: int) -> str:
    """c10's format_size: bytes, KiB, MiB or GiB with two decimals."""
    if num_bytes <= 1024:
        return "%d bytes" % num_bytes
    for unit, size in (("KiB", 2 ** 10), ("MiB", 2 ** 20)):
        if num_bytes <= size * 1024:
            return "%.2f %s" % (num_bytes / size, unit)
    return "%.2f GiB" % (num_bytes / GIB)


class BootError(Exception):
    """An exception vLLM raises; `line` is how Python prints it."""

    def __init__(self, exc_type: str, message: str, frames=()):
        super().__init__(message)
        self.line = "%s: %s" % (exc_type, message)
        self.frames = list(frames)


class Settings:
    """What the API server resolved; inherited by the engine through fork."""

    def __init__(self, **values):
        self.__dict__.update(values)


class Rank:
    """One GPU's worth of the engine: the model runner and its memory."""

    def __init__(self, settings: Settings, rank: int, uuid: str, logger: Logger):
        self.s = settings
        self.rank = rank
        self.uuid = uuid
        self.log = logger
        self.knobs = settings.knobs
        self.driver = Driver()
        self.held_mib = 0
        self.torch_mib = 0
        self.long_request_mib = 0  # charged by the first long request
        self.layout = settings.layout
        self.total_bytes = self._mem_get_info()[1]

    # -- memory ------------------------------------------------------------------------------
    def _alloc(self, mib: int, tag: str, torch_owned: bool = True) -> None:
        try:
            self.driver.alloc(self.uuid, mib, tag)
        except OutOfMemory as oom:
            raise BootError("torch.OutOfMemoryError", self.oom_message(mib * MIB, oom.free_mib)
                            .split(": ", 1)[1], [ALLOCATION_FRAMES.get(tag, ALLOCATION_FRAMES["kv"])])
        except DriverError as exc:
            raise BootError("RuntimeError", "CUDA error: %s" % exc)
        self.held_mib += mib
        if torch_owned:
            self.torch_mib += mib

    def _mem_get_info(self):
        """cudaMemGetInfo; a lost GPU is a CUDA error."""
        try:
            return self.driver.mem_get_info(self.uuid)
        except DriverError as exc:
            raise BootError("RuntimeError", "CUDA error: %s" % exc)

    def _free(self, mib: int, torch_owned: bool = True) -> None:
        self.driver.free(self.uuid, mib)
        self.held_mib -= mib
        if torch_owned:
            self.torch_mib -= mib

    def oom_message(self, requested_bytes: int, free_mib: int) -> str:
        return TORCH_OOM % (torch_size(requested_bytes), self.rank, torch_size(self.total_bytes),
                            torch_size(free_mib * MIB), torch_size(self.held_mib * MIB),
                            torch_size(self.torch_mib * MIB), torch_size(20 * MIB))

    # -- boot --------------------------------------------------------------------------------
    def init_device(self) -> None:
        s = self.s
        self.log.info("rank", "rank %d in world size %d is assigned as DP rank 0, PP rank 0, PCP rank 0, "
                              "TP rank %d, ETP rank 0, EP rank %d, EPLB rank 0"
                      % (self.rank, s.tp, self.rank, self.rank))
        self.log.info("v2_runner", "Using V2 Model Runner")
        # the CUDA context, NCCL and cuBLAS handles exist before the snapshot
        self._alloc(self.knobs.cuda_context_mib, "cuda_context", torch_owned=False)
        free = self._mem_get_info()[0]
        self.snapshot_free = free
        self.requested = math.ceil(self.total_bytes * s.gpu_memory_utilization)
        if free < self.requested:
            raise BootError("ValueError", (
                "Free memory on device cuda:%d (%s/%s GiB) on startup is less than desired GPU "
                "memory utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU "
                "memory used by other processes." % (
                    self.rank, format_gib(free), format_gib(self.total_bytes),
                    s.gpu_memory_utilization, format_gib(self.requested))),
                [("v1/worker/gpu_worker.py", 544, "init_device",
                  "self.requested_memory = request_memory("),
                 ("v1/worker/utils.py", 762, "request_memory", "raise ValueError(")])

    def load_model(self) -> None:
        start = time.monotonic()
        self.log.info("load_from_scratch", "Loading model from scratch...")
        time.sleep(self.knobs.boot_delay_s * 0.5)
        weights = self.s.weights_bytes // self.s.tp
        self._alloc(mib_of(weights), "weights")
        self.weights_bytes = weights
        elapsed = time.monotonic() - start
        self.log.info("weights_took", "Loading weights took %.2f seconds" % elapsed)
        self.log.info("model_loading", "Model loading took %s GiB memory and %.6f seconds"
                      % (format_gib(weights), elapsed + 0.01))
        layout = self.layout
        if layout.aligned_block_size:   # platforms/interface.py _align_hybrid_block_size
            self.log.info("hybrid_block_size", "Setting attention block size to %d tokens to ensure "
                          "that attention page size is >= mamba page size." % layout.aligned_block_size)
            if layout.page != layout.mamba_page:
                self.log.info("mamba_padding", "Padding mamba page size by %.2f%% to ensure that mamba "
                              "page size and attention page size are exactly equal."
                              % (100 * (layout.page - layout.mamba_page) / layout.mamba_page))

    def determine_available_memory(self) -> int:
        s, knobs = self.s, self.knobs
        self._alloc(s.activation_mib, "activations")    # profile_run's peak
        time.sleep(knobs.boot_delay_s * 0.2)
        self._free(s.activation_mib)
        if s.kv_cache_memory_bytes:
            self.log.info("reserved", (
                "Initial free memory %s GiB, reserved %s GiB memory for KV Cache as specified by "
                "kv_cache_memory_bytes config and skipped memory profiling. This does not respect "
                "the gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you "
                "want manual control of KV cache memory size. If OOM'ed, check the difference of "
                "initial free memory between the current run and the previous run where "
                "kv_cache_memory_bytes is suggested and update it correspondingly."
                % (format_gib(self.snapshot_free), format_gib(s.kv_cache_memory_bytes))))
            return s.kv_cache_memory_bytes
        after_free = self._mem_get_info()[0]
        if self.snapshot_free < after_free:
            raise BootError("AssertionError", (
                "Error in memory profiling. Initial free memory %s GiB, current free memory %s GiB. "
                "This happens when other processes sharing the same container release GPU memory "
                "while vLLM is profiling during initialization. To fix this, ensure consistent GPU "
                "memory allocation or isolate vLLM in its own container."
                % (format_gib(self.snapshot_free), format_gib(after_free))))
        self.graph_estimate = 0 if s.enforce_eager else self.graph_mib() * MIB
        if self.graph_estimate:
            self.log.info("graphs", "Graph capturing finished in %.0f secs, took %.2f GiB"
                          % (knobs.boot_delay_s * 0.05, self.graph_estimate / GIB))
        # a difference of device-wide free memory: a co-booting neighbour is charged to us
        self.total_consumed = self.snapshot_free - after_free
        self.peak_activation = s.activation_mib * MIB
        self.available = (self.requested - self.total_consumed - self.peak_activation
                          - self.graph_estimate)
        self.log.info("available", "Available KV cache memory: %s GiB" % format_gib(self.available))
        if self.graph_estimate:
            util = s.gpu_memory_utilization
            delta = self.graph_estimate / self.total_bytes
            self.log.info("cudagraph_profiling", (
                "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
                "--gpu-memory-utilization=%.4f is equivalent to --gpu-memory-utilization=%.4f "
                "without CUDA graph memory profiling. To maintain the same effective KV cache size "
                "as before, increase --gpu-memory-utilization to %.4f. To disable, set "
                "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
                % (util, round(util - delta, 4), min(round(util + delta, 4), 1.0))))
        return self.available

    def allocate_kv(self, num_bytes: int) -> None:
        if self.knobs.fault == "oom_at_boot":
            free = self._mem_get_info()[0]
            raise BootError("torch.OutOfMemoryError",
                            self.oom_message(num_bytes, free // MIB).split(": ", 1)[1],
                            [ALLOCATION_FRAMES["kv"]])
        self._alloc(mib_of(num_bytes), "kv")

    def capture_and_warm_up(self) -> None:
        s, knobs = self.s, self.knobs
        time.sleep(knobs.boot_delay_s * 0.3)
        graphs = 0 if s.enforce_eager else self.graph_mib()
        if graphs:
            self._alloc(graphs, "cuda_graphs")
            self.log.info("graphs", "Graph capturing finished in %.0f secs, took %.2f GiB"
                          % (knobs.boot_delay_s * 0.3, graphs / 1024))
        if not s.kv_cache_memory_bytes and graphs:
            actual, estimate = graphs * MIB, self.graph_estimate
            self.log.info("cudagraph_pool", (
                "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), difference: %s GiB (%.1f%%)."
                % (round(actual / GIB, 2), round(estimate / GIB, 2), round(abs(actual - estimate) / GIB, 2),
                   100 * abs(actual - estimate) / max(actual, 1))))
            non_kv = self.total_consumed + self.peak_activation + actual
            redundancy = 150 * MIB
            fit = self.requested - non_kv - redundancy
            full = self.snapshot_free - non_kv - redundancy
            self.log.info("suggestion", (
                "Free memory on device (%s/%s GiB) on startup. Desired GPU memory utilization is "
                "(%s, %s GiB). Actual usage is %s GiB for consumed memory (weights + non-torch), %s "
                "GiB for peak activation, and %s GiB for CUDAGraph memory. Replace "
                "gpu_memory_utilization config with `--kv-cache-memory=%d` (%s GiB) to fit into "
                "requested memory, or `--kv-cache-memory=%d` (%s GiB) to fully utilize gpu memory. "
                "Current kv cache memory in use is %s GiB."
                % (format_gib(self.snapshot_free), format_gib(self.total_bytes),
                   s.gpu_memory_utilization, format_gib(self.requested), format_gib(self.total_consumed),
                   format_gib(self.peak_activation), format_gib(actual), fit, format_gib(fit), full,
                   format_gib(full), format_gib(self.available))))
        # activations come back for the warm-up and stay in torch's cache; FlashInfer's workspace
        self._alloc(s.activation_mib, "activations")
        self._alloc(knobs.runtime_overhead_mib, "workspace")

    def graph_mib(self) -> int:
        """CUDA graph memory per rank: the base, and what grows with max_num_seqs x context."""
        s = self.s
        return s.cuda_graph_mib + math.ceil(self.knobs.graph_mib_per_mtoken * s.max_num_seqs * s.max_model_len / 1e6)

    # -- runtime -----------------------------------------------------------------------------
    def execute(self, tokens: int, long_request: bool) -> None:
        longest = math.ceil(self.knobs.long_request_mib_per_ktoken * self.s.max_model_len / 1024)
        if long_request and longest and not self.long_request_mib:
            # the first long request's activations, kept in torch's cache after (seed 003: boot
            # is not runtime)
            try:
                self.driver.alloc(self.uuid, longest, "activations")
            except OutOfMemory as oom:
                raise BootError("torch.OutOfMemoryError",
                                self.oom_message(longest * MIB, oom.free_mib).split(": ", 1)[1],
                                [("v1/worker/gpu/model_runner.py", 1460, "execute_model",
                                  "hidden_states = self.model(input_ids, positions)")])
            self.long_request_mib = longest
            self.held_mib += longest
            self.torch_mib += longest
        # like seed 003, the last rank is the one that runs out
        if long_request and self.knobs.fault == "oom_on_long_request" and self.rank == self.s.tp - 1:
            free = self._mem_get_info()[0]
            try:
                self.driver.alloc(self.uuid, free // MIB + 50, "activations")
            except OutOfMemory as oom:
                raise BootError("torch.OutOfMemoryError",
                                self.oom_message(50 * MIB, oom.free_mib).split(": ", 1)[1],
                                [("v1/worker/gpu/model_runner.py", 1460, "execute_model",
                                  "hidden_states = self.model(input_ids, positions)")])

    def creep(self, mib: int) -> bool:
        """Grow towards the plateau; a refused step is FlashInfer falling back, not a crash."""
        try:
            self._alloc(mib, "creep")
            return True
        except BootError as err:
            if not err.line.startswith("torch.OutOfMemoryError"):
                raise
            flashinfer_warning("[Autotuner]: OOM detected, falling back to default tactic")
            return False

    def close(self) -> None:
        self.driver.close()


class RemoteRank:
    """A Rank in its own process (Worker_TP<n>), as vLLM's multiproc executor runs TP > 1."""

    METHODS = ("init_device", "load_model", "determine_available_memory", "allocate_kv",
               "capture_and_warm_up", "execute", "creep")

    def __init__(self, settings: Settings, rank: int, uuid: str):
        self.rank = rank
        self.name = "Worker_TP%d" % rank
        parent, child = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            parent.close()
            self._serve(child, settings, uuid)
        child.close()
        self.sock = parent
        self.reader = parent.makefile("rb")
        self.lock = threading.Lock()

    def _serve(self, conn, settings, uuid) -> None:
        log = Logger(self.name)
        reader = conn.makefile("rb")
        started = False
        try:
            rank = Rank(settings, self.rank, uuid, log)
            for line in reader:
                call = json.loads(line)
                try:
                    result = getattr(rank, call["method"])(*call["args"])
                except BootError as err:
                    text = traceback_text([("v1/executor/multiproc_executor.py", 1024, "worker_main",
                                            "worker = WorkerProc(*args, **kwargs)")] + err.frames, err.line)
                    if started:
                        log.exception("worker_exception", "WorkerProc hit an exception.", text)
                        os._exit(1)
                    log.exception("worker_failed", "WorkerProc failed to start.", text)
                    conn.sendall(json.dumps({"error": err.line}).encode() + b"\n")
                    continue
                started = started or call["method"] == "capture_and_warm_up"
                conn.sendall(json.dumps({"result": result}).encode() + b"\n")
        finally:
            os._exit(0)

    def _call(self, method, *args):
        with self.lock:
            try:
                self.sock.sendall(json.dumps({"method": method, "args": list(args)}).encode() + b"\n")
                line = self.reader.readline()
            except OSError:
                line = b""
        if not line:
            raise WorkerDied(self)
        reply = json.loads(line)
        if "error" in reply:
            raise BootError("Exception", WORKER_INIT_FAILED)
        return reply["result"]

    def __getattr__(self, method):
        if method not in self.METHODS:
            raise AttributeError(method)
        return lambda *args: self._call(method, *args)

    def exit_code(self) -> int:
        try:
            status = os.waitpid(self.pid, 0)[1]
        except ChildProcessError:
            return 1
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        self.sock.close()


class WorkerDied(Exception):
    def __init__(self, worker):
        super().__init__(worker.name)
        self.worker = worker


class Engine:
    """EngineCore: boots the ranks, plans KV, then serves the API server's requests."""

    def __init__(self, settings: Settings, conn: socket.socket):
        self.s = settings
        self.conn = conn
        self.log = Logger("EngineCore")
        self.ranks = []
        self.send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        with self.send_lock:
            try:
                self.conn.sendall(json.dumps(message).encode() + b"\n")
            except OSError:
                os._exit(1)

    def run(self) -> None:
        s = self.s
        self.log.info("engine_config", "Initializing a V1 LLM engine (v%s) with config: %s"
                      % (VERSION, s.config_text))
        start = time.monotonic()
        try:
            plan = self.boot()
        except BootError as err:
            text = traceback_text(ENGINE_FRAMES + err.frames, err.line)
            self.log.exception("engine_failed", "EngineCore failed to start.", text)
            stderr("Process EngineCore:\n" + text)
            self.send({"event": "failed"})
            self.close_ranks()
            os._exit(1)
        elapsed = time.monotonic() - start
        self.log.info("init_engine", "init engine (profile, create kv cache, warmup model) took "
                                     "%.2f s (compilation: %.2f s)" % (elapsed, elapsed * 0.4))
        self.send({"event": "ready", "num_gpu_blocks": plan.num_blocks, "block_size": s.layout.block_size,
                   "max_model_len": s.max_model_len,
                   "kv_cache_size_tokens": plan.tokens, "kv_cache_max_concurrency": plan.max_concurrency,
                   "kv_cache_memory_bytes": s.kv_cache_memory_bytes})
        self.after_ready()
        self.serve()

    def boot(self) -> Plan:
        s = self.s
        if s.tp == 1:
            self.ranks = [Rank(s, 0, s.devices[0], self.log)]
        else:
            self.ranks = [RemoteRank(s, rank, s.devices[rank]) for rank in range(s.tp)]
        try:
            for rank in self.ranks:
                rank.init_device()
            for rank in self.ranks:
                rank.load_model()
            self.log.info("kv_layout", "Using LBNHC KV cache layout.")
            available = min(rank.determine_available_memory() for rank in self.ranks)
            if s.auto_fit:
                self.auto_fit(available)
            try:
                plan = Plan(s.layout, available, s.max_model_len, s.max_num_seqs, s.enforce_eager, RELEASE)
            except PlanError as err:
                raise BootError(err.exc_type, str(err), [
                    ("v1/core/kv_cache_planning.py", 1554, "get_kv_cache_configs",
                     "_check_enough_kv_cache_memory("),
                    ("v1/core/kv_cache_planning.py", 77, "_check_enough_kv_cache_memory",
                     "raise ValueError(")])
            for line in plan.capacity_lines():
                self.log.info("capacity", line)
            if plan.mamba_error:
                raise BootError("ValueError", str(plan.mamba_error), [
                    ("config/compilation.py", 1525, "resolve_cudagraph_mode_and_sizes", "raise ValueError(")])
            for rank in self.ranks:
                rank.allocate_kv(plan.kv_bytes)
            for rank in self.ranks:
                rank.capture_and_warm_up()
        except WorkerDied as died:
            raise BootError("Exception", WORKER_INIT_FAILED + " (%s exited)" % died.worker.name)
        return plan

    def auto_fit(self, available: int) -> None:
        """--max-model-len auto: the longest context one request can hold."""
        s = self.s
        fitted = longest_fitting_len(s.layout, available, s.max_model_len)
        if fitted <= 0:
            raise BootError("ValueError", "Cannot auto-fit max_model_len: not enough GPU memory "
                            "available to serve even a single token. Try increasing "
                            "`gpu_memory_utilization`.")
        memory = "%s GiB GPU" % format_gib(available - s.layout.bytes_per_block)
        if fitted >= s.max_model_len:
            self.log.info("auto_fit_full", "Auto-fit max_model_len: full model context length %d fits "
                                           "in available KV cache memory (%s)" % (s.max_model_len, memory))
        else:
            self.log.info("auto_fit_reduced", "Auto-fit max_model_len: reduced from %d to %d to fit in "
                                              "available KV cache memory (%s)"
                          % (s.max_model_len, fitted, memory))
            s.max_model_len = fitted

    def after_ready(self) -> None:
        knobs = self.s.knobs
        if knobs.creep_mib > 0:
            threading.Thread(target=self.creep, daemon=True).start()
        if knobs.fault == "crash_after_ready":
            threading.Thread(target=self.crash, daemon=True).start()

    def creep(self) -> None:
        knobs = self.s.knobs
        step = max(1, knobs.creep_mib // knobs.creep_steps)
        remaining = knobs.creep_mib
        while remaining > 0:
            time.sleep(knobs.creep_seconds / knobs.creep_steps)
            grown = min(step, remaining)
            try:
                grew = all(rank.creep(grown) for rank in self.ranks)
            except (BootError, WorkerDied) as err:   # the GPU itself failed (Xid): fatal
                self.fatal(err)
            if grew:
                remaining -= grown

    def crash(self) -> None:
        time.sleep(self.s.knobs.crash_after_s)
        os.kill(os.getpid(), signal.SIGKILL)   # no goodbye: a segfault or the OOM killer

    def serve(self) -> None:
        reader = self.conn.makefile("rb")
        for line in reader:
            message = json.loads(line)
            if message.get("op") == "shutdown":
                break
            if message.get("op") == "request":
                self.execute(message)
        self.close_ranks()
        os._exit(0)

    def execute(self, message: dict) -> None:
        try:
            for rank in self.ranks:
                rank.execute(message["tokens"], message["long"])
        except (BootError, WorkerDied) as err:
            self.fatal(err)
        self.send({"id": message["id"], "ok": True})

    def fatal(self, err) -> None:
        """The busy loop's end: vLLM logs the fatal error and the engine process exits."""
        if isinstance(err, WorkerDied):
            self.log.error("worker_died", "Worker proc %s died unexpectedly (exit code: %s), shutting "
                                          "down executor." % (err.worker.name, err.worker.exit_code()))
            text = traceback_text(BUSY_LOOP_FRAMES, "RuntimeError: Worker failed with error 'CUDA "
                                  "out of memory.', please check the stack trace above for the root cause")
        else:   # TP=1: the worker is this process
            text = traceback_text(BUSY_LOOP_FRAMES + err.frames, err.line)
        self.log.exception("engine_fatal", "EngineCore encountered a fatal error.", text)
        self.close_ranks()
        os._exit(1)

    def close_ranks(self) -> None:
        for rank in self.ranks:
            rank.close()


def start_engine(settings: Settings):
    """Fork EngineCore; returns (pid, the API server's end of the socket pair)."""
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent.close()
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            Engine(settings, child).run()
        finally:
            os._exit(1)
    child.close()
    return pid, parent
