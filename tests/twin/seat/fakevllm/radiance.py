"""`radiance serve`: a stand-in for a radiance 1.8.1 endpoint (its serve script and its engine).

The engine keeps an MoE model's experts on its cards or in a pinned host pool and gives the KV
cache what is left, by its budget resolver's funding formula (its own derivation here, from the
procedure radiance 1.8.1's operators follow). It reads the knobs from its flags and its TTM gate
from the environment, the model's ledger terms from `<model>/radiance.json`, and:

- refuses `--vram-weights-mib` and `--vram-kv-mib` (removed in 1.8.1), exit 2;
- the serve script's gate: the TTM limit (TTM_TARGET_MIB, as the preflight raises it, but no
  more than the host's RAM) below TTM_MIN_MIB refuses the start, exit 1;
- takes its CUDA context on every card, prints the boot ledger (`VRAM budget, per card` ->
  `claimable` -> `elastic` -> `experts / kv cache` -> `kv: ...` -> each card's `pools:` ->
  `pinned host memory` -> `mover`), holds on every card what the smallest card's budget gives,
  and pins its ledger of host RAM (a ledger above the TTM limit is cudaHostAlloc's failure,
  exit 1; one the host's RAM cannot hold takes the host down, through the simulated driver);
- serves /health, /v1/models and /v1/chat/completions (a prompt longer than the cache or
  max_model_len is refused with 400); under load the mover lends arena slots to the expert slab
  and says so; the drift grows in after ready; SIGTERM exits 0.

FAKE_RADIANCE_CLAIM_MIB makes another claim take that many MiB of the cache while it is cut (the
knob loses: vram_kv is not the formula's), FAKE_RADIANCE_BOOT_DELAY_S delays ready.

    radiance serve MODEL --port P [--tensor-parallel-size N] [--served-model-name NAME...]
        --max-num-seqs S --max-model-len L [--gpu-headroom-mib 96] --host-pool-mib H
        [--prefix-cache-mib 0] [--placement auto] [--checkpoint-slots auto|N]
"""

from __future__ import annotations

import argparse
import http.server
import json
import math
import os
import re
import signal
import sys
import threading
import time

from .gpu import MIB, Driver, DriverError, NoDevice, OutOfMemory
from .logs import stderr, stdout

VERSION = "1.8.1"
REMOVED = ("--vram-weights-mib", "--vram-kv-mib")
SLOT_MIB = 111.98
STATICS_ARENA_MIB = 2048
# What one mover slot is worth: the arena split in three, as the procedure's ledger shows it.
MOVER_SLOTS = 3


def log(level: str, message: str) -> None:
    stdout("%s %s radiance[%d]: %s" % (time.strftime("%Y-%m-%dT%H:%M:%S"), level, os.getpid(), message))


def parse(argv):
    removed = [arg for arg in argv if arg.split("=", 1)[0] in REMOVED]
    if removed:
        log("ERROR", "%s: no longer exists in radiance %s (core/config.cpp); the budget resolver sizes the "
                     "cache from --max-num-seqs x --max-model-len, --gpu-headroom-mib and --host-pool-mib"
            % (removed[0].split("=", 1)[0], VERSION))
        raise SystemExit(2)
    parser = argparse.ArgumentParser(prog="radiance serve")
    parser.add_argument("model")
    parser.add_argument("--host", default="")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--served-model-name", nargs="+")
    parser.add_argument("--max-num-seqs", type=int, required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--gpu-headroom-mib", type=int, default=96)
    parser.add_argument("--host-pool-mib", type=int, required=True)
    parser.add_argument("--prefix-cache-mib", type=int, default=0)
    parser.add_argument("--placement", default="auto")
    parser.add_argument("--checkpoint-slots", default="auto")
    return parser.parse_args(argv)


def _term(profile, name):
    """A ledger term of the model's profile, in MiB (0 when it has none)."""
    return int(profile.get(name, 0))


def ledger(args, profile, totals):
    """The budget resolver: per card, the smallest card's figures."""
    def term(name):
        return _term(profile, name)
    smallest = min(totals)
    capacity = smallest - term("already_held_mib") - term("drift_mib") - args.gpu_headroom_mib - term("arena_mib") \
        - term("step_staging_mib") - term("hw_queues_mib") - term("prefetch_mib")
    elastic = capacity - term("static_weights_mib")
    plane = term("plane_mib") if "plane_mib" in profile else \
        term("printed_experts_mib") + term("printed_host_pool_mib") - 2 * term("unit_max_mib")
    room = max(args.host_pool_mib - term("file_tier_staging_mib"), 0)
    floor = min(plane + term("spare_mib"), max(plane + 2 * term("unit_max_mib") - room, 0))
    per_token, block = term("kv_bytes_per_token"), int(profile.get("block_size", 16))
    demand = args.max_num_seqs * args.max_model_len
    # FAKE_RADIANCE_CLAIM_MIB: another claim on the card (a slab, a neighbour's context) that the
    # cache loses to while it is cut
    claim = int(os.environ.get("FAKE_RADIANCE_CLAIM_MIB") or 0)
    kv_bytes = min(demand * per_token, max(elastic - floor - claim, 0) * MIB)
    blocks = kv_bytes // (block * per_token)
    # auto: a slot per sequence and per checkpoint its retention policy keeps
    slots = args.max_num_seqs * (1 + term("checkpoint_retained")) if args.checkpoint_slots == "auto" \
        else int(args.checkpoint_slots)
    store = round(slots * SLOT_MIB, 2)
    pinned = round(args.tensor_parallel_size * args.host_pool_mib + term("ple_table_mib") + args.prefix_cache_mib
                   + int(profile.get("statics_arena_mib", STATICS_ARENA_MIB)) + store, 2)
    return {"smallest": totals.index(smallest), "capacity": capacity, "elastic": elastic, "floor": floor,
            "kv_bytes": kv_bytes, "blocks": blocks, "block": block, "vram_kv": blocks * block * per_token,
            "tokens": blocks * block, "demand": demand, "pinned": pinned, "slots": slots, "store": store,
            "experts": max(elastic - math.ceil(kv_bytes / MIB), floor)}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args):
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        engine = self.server.engine
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send(200 if engine.ready else 503, {"status": "ok" if engine.ready else "loading"})
        elif path == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": "radiance", "max_model_len": engine.args.max_model_len}
                for name in engine.names]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        engine = self.server.engine
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if self.path.split("?", 1)[0] != "/v1/chat/completions":
            self._send(404, {"detail": "Not Found"})
            return
        if not engine.ready:
            self._send(503, {"error": {"message": "the engine is loading"}})
            return
        prompt = sum(len(re.findall(r"\w+|[^\w\s]", str(m.get("content", "")))) + 4
                     for m in body.get("messages") or [])
        limit = min(engine.args.max_model_len, engine.budget["tokens"])
        if prompt + int(body.get("max_tokens") or 16) > limit:
            self._send(400, {"error": {"message": "the request needs %d tokens; the cache holds %d at most (%d "
                                                  "tokens of context, max_model_len %d)"
                                                  % (prompt + int(body.get("max_tokens") or 16), limit,
                                                     engine.budget["tokens"], engine.args.max_model_len),
                                       "type": "BadRequestError", "code": 400}})
            return
        engine.lend()
        self._send(200, {"object": "chat.completion", "model": body.get("model"), "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}})


class Engine:
    def __init__(self, args, profile, driver, devices):
        self.args, self.profile, self.driver, self.devices = args, profile, driver, devices
        self.names = args.served_model_name or [args.model]
        self.ready = False
        self.lent = 0
        self._lock = threading.Lock()
        self.budget = ledger(args, profile, [d["total_mib"] for d in devices])

    def lend(self):
        """Under load the expert slab re-borrows arena slots, one a request, while there are any."""
        with self._lock:
            if self.lent >= MOVER_SLOTS:
                return
            self.lent += 1
        log("INFO", "mover: lent 1 slots (%.2f MiB) to the expert slab" % (int(self.profile.get("arena_mib", 0)) / MOVER_SLOTS))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: radiance serve MODEL [flags]  (radiance serve --help lists them)")
        return 0
    if argv[:1] != ["serve"]:
        stderr("usage: radiance serve MODEL [flags]")
        return 2
    args = parse(argv[1:])
    log("INFO", "radiance %s serving %s (tp %d, placement %s)" % (VERSION, args.model, args.tensor_parallel_size,
                                                                  args.placement))
    try:
        with open(os.path.join(args.model, "radiance.json"), encoding="utf-8") as handle:
            profile = json.load(handle)
    except (OSError, ValueError) as exc:
        log("ERROR", "cannot read the model's profile %s/radiance.json: %s" % (args.model, exc))
        return 1
    try:
        driver = Driver()
        devices = driver.devices()[:args.tensor_parallel_size]
        if len(devices) < args.tensor_parallel_size:
            raise NoDevice("%d GPU(s) visible, %d ranks" % (len(devices), args.tensor_parallel_size))
        host = driver.call({"op": "host_info"})
    except (NoDevice, DriverError) as exc:
        log("ERROR", "no GPUs: %s" % exc)
        return 1
    ttm_min, ttm_target = (int(os.environ.get(name) or 0) for name in ("TTM_MIN_MIB", "TTM_TARGET_MIB"))
    limit = min(ttm_target, host.get("memory_mib") or ttm_target)
    if limit < ttm_min:
        log("ERROR", "serve: the TTM limit is %d MiB (TTM_TARGET_MIB %d, host RAM %s MiB), below TTM_MIN_MIB %d MiB: "
                     "refusing to start" % (limit, ttm_target, host.get("memory_mib"), ttm_min))
        return 1
    engine = Engine(args, profile, driver, devices)
    budget = engine.budget

    def term(name):
        return _term(profile, name)
    totals = [d["total_mib"] for d in devices]
    log("INFO", "VRAM budget, per card: %s" % ", ".join("[%d] %d MiB" % (rank, total) for rank, total in enumerate(totals)))
    log("INFO", "claimable: %d MiB a card = card total %d - already held %d - drift %d - headroom %d - arena %d - "
                "step staging %d - hw queues %d - prefetch %d" % (
                    budget["capacity"], min(totals), term("already_held_mib"), term("drift_mib"), args.gpu_headroom_mib,
                    term("arena_mib"), term("step_staging_mib"), term("hw_queues_mib"), term("prefetch_mib")))
    log("INFO", "elastic: %d MiB a card = claimable %d - static weights %d" % (
        budget["elastic"], budget["capacity"], term("static_weights_mib")))
    log("INFO", "experts / kv cache: %d MiB / %.2f MiB a card (expert floor %d MiB)" % (
        budget["experts"], budget["kv_bytes"] / MIB, budget["floor"]))
    log("INFO", "kv: the cache can grow to %.2f GiB a card -- %d tokens of context, %d sessions at %d" % (
        budget["vram_kv"] / 2 ** 30, budget["tokens"], budget["tokens"] // args.max_model_len, args.max_model_len))
    # the host pool first: what the host holds decides what stays on the cards
    if budget["pinned"] > limit:
        log("ERROR", "cudaHostAlloc failed: out of memory pinning %.2f MiB (the TTM limit is %d MiB)" % (
            budget["pinned"], limit))
        return 1
    try:
        driver.pin(math.ceil(budget["pinned"]))
    except DriverError as exc:
        log("ERROR", "cudaHostAlloc failed: %s" % exc)
        return 1
    log("INFO", "pinned host memory: %.2f MiB (%d x host pool %d + PLE table %d + prefix cache %d + statics and arena "
                "%d + %d checkpoint slots x %s); TTM limit %d MiB" % (
                    budget["pinned"], args.tensor_parallel_size, args.host_pool_mib, term("ple_table_mib"),
                    args.prefix_cache_mib, int(profile.get("statics_arena_mib", STATICS_ARENA_MIB)), budget["slots"],
                    SLOT_MIB, limit))
    held = min(totals) - args.gpu_headroom_mib - term("drift_mib")
    try:
        for rank, device in enumerate(devices):
            driver.alloc(device["uuid"], term("already_held_mib"), "cuda_context")
            driver.alloc(device["uuid"], held - term("already_held_mib"), "radiance")
            log("INFO", "[%d] pools: vram_kv %d bytes (%d blocks of %d tokens), experts %d MiB, free %d MiB" % (
                rank, budget["vram_kv"], budget["blocks"], budget["block"], budget["experts"],
                device["total_mib"] - held))
    except OutOfMemory as oom:
        log("ERROR", "CUDA out of memory allocating the pools: %d MiB asked, %d MiB free"
            % (oom.requested_mib, oom.free_mib))
        return 1
    log("INFO", "mover: %d slots can be lent out of the activation arena (%d MiB)" % (MOVER_SLOTS, term("arena_mib")))

    httpd = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    httpd.daemon_threads = True
    httpd.engine = engine
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait(float(os.environ.get("FAKE_RADIANCE_BOOT_DELAY_S") or 0))
    for device in devices:
        driver.alloc(device["uuid"], term("drift_mib"), "radiance")
    engine.ready = True
    log("INFO", "serving on port %d: %s" % (args.port, ", ".join(engine.names)))
    stop.wait()
    httpd.shutdown()
    driver.close()
    log("INFO", "shut down")
    return 0
