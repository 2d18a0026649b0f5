"""The real vLLM 0.32 (its CPU build, .build/real-vllm/venv from scripts/bootstrap-real-vllm)
booted as ``vllm serve`` on tiny models made here (tests/realengine/make_tiny_model.py).

    model = tiny_model({"model_type": "llama", "num_key_value_heads": 1})
    boot = serve(model, ["--max-model-len", "2048", "--kv-cache-memory-bytes", "64M"])
    boot.log                     # everything it printed, up to the KV line or its exit
    stop_engine(boot)

``serve`` waits on events (the KV capacity line, "Application startup complete", the process's
exit), never on a fixed sleep; the timeout only bounds a boot that hangs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from support.litellm import free_port
from support.process import bootstrapped
from twinlib.fleet import REAL_VLLM_SITE_ON_HOST
from twinlib.rootfs import REAL_VLLM_SITE

MAKER = REPO_ROOT / "tests" / "realengine" / "make_tiny_model.py"
BOOT_ENGINES = REPO_ROOT / "tests" / "realengine" / "boot_engines.py"
# The twin fleet whose seat runs the real engine (one host, one simulated H100)
REAL_ENGINE_FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-realengine"
REAL_ENGINE_GPU = "GPU-7a1c0004-0000-4000-8000-000000000001"
# The realengine tests' GQA model: 2 layers, 1 KV head of 64, bf16 (512 bytes a token)
GQA_MODEL = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 1}
# The same with heads of 16: it boots, and the CPU attention kernel kills the engine at its first request
HEAD16_MODEL = dict(GQA_MODEL, head_dim=16)
# Its seat on the real engine's image: the CPU build's arithmetic, its own startup flag, the engine
# mounted from the host as the image expects it, and an overhead that covers what the engine's three
# processes hold (about 1.7 GiB)
REAL_ENGINE_SEAT = {
    "name": "tiny", "engine": "vllm", "vllm_platform": "cpu", "model": "/srv/models/tiny",
    "model_config": "models/tiny/config.json", "max_model_len": 2048, "kv_cache_memory_bytes": "64MiB",
    "image": "llmfleet/vllm-cpu:v0.32.0", "port": 8301,
    "volumes": ["/srv/models:/srv/models:ro", "%s:%s:ro" % (REAL_VLLM_SITE_ON_HOST, REAL_VLLM_SITE)],
    "extra_args": ["--enforce-eager"], "overhead_bytes": "3GiB", "gpu": 0}
MODELS = REPO_ROOT / ".build" / "real-vllm" / "models"
BOOT_TIMEOUT_S = 600
# Offline, quiet, and on vLLM's CPU platform.
ENGINE_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
              "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_LOGGING_COLOR": "0",
              "PYTHONUNBUFFERED": "1"}


def real_vllm_python() -> Path:
    """The engine's python; scripts/bootstrap-real-vllm builds it once (under a minute) and is instant after."""
    return bootstrapped("bootstrap-real-vllm", "the real-engine tests need vLLM's CPU build")


def tiny_model(spec: dict) -> Path:
    """The model of ``spec`` (config fields, see make_tiny_model.py), made once and kept under
    .build/real-vllm/models by the digest of the spec and the maker."""
    return tiny_models([spec])[0]


def tiny_models(specs: list) -> list:
    """The models of ``specs``, those not made yet made in one run of the maker."""
    maker = MAKER.read_bytes()
    targets = [MODELS / ("%s-%s" % (spec["model_type"], hashlib.sha256(
        maker + json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16])) for spec in specs]
    missing = {target: spec for target, spec in zip(targets, specs) if not (target / "config.json").is_file()}
    if not missing:
        return targets
    MODELS.mkdir(parents=True, exist_ok=True)
    work = {target: Path(tempfile.mkdtemp(dir=MODELS, prefix=".making-")) for target in missing}
    try:
        proc = subprocess.run([str(real_vllm_python()), str(MAKER)]
                              + [arg for target, spec in missing.items() for arg in (str(work[target]), json.dumps(spec))],
                              capture_output=True, text=True, timeout=600, check=False,
                              env=dict(os.environ, **ENGINE_ENV))
        if proc.returncode != 0:
            pytest.fail("making the tiny models %s failed:\n%s" % (list(missing.values()), proc.stderr[-3000:]))
        for target, made in work.items():
            try:
                made.rename(target)
            except OSError:  # another test made it first
                pass
    finally:
        for made in work.values():
            shutil.rmtree(made, ignore_errors=True)
    return targets


def real_engine_fleet(root: Path, added: tuple | list = (), **seat) -> Path:
    """The real-engine fleet at ``root`` (copied with the tiny model the first time), its seat with
    ``seat``'s fields changed and a seat more for each of ``added`` (the fields that differ from
    it); returns its hosts.yml."""
    if not root.exists():
        shutil.copytree(REAL_ENGINE_FLEET, root)
        shutil.copytree(tiny_model(GQA_MODEL), root / "models" / "tiny")
        shutil.copytree(tiny_model(HEAD16_MODEL), root / "models" / "tiny-head16")
        (root / "host_vars").mkdir()
    (root / "host_vars" / "twin1.yml").write_text(yaml.safe_dump({
        "llmfleet_gpus": [{"index": 0, "uuid": REAL_ENGINE_GPU, "name": "NVIDIA H100 80GB HBM3",
                           "memory_total_mib": 81559}],
        "llmfleet_seats": [dict(REAL_ENGINE_SEAT, **seat)] + [dict(REAL_ENGINE_SEAT, **more) for more in added]},
        sort_keys=False))
    return root / "hosts.yml"


class Boot:
    """One ``vllm serve`` process and what it printed."""

    def __init__(self, proc: subprocess.Popen, log_path: Path, port: int):
        self.proc, self.log_path, self.port = proc, log_path, port
        self.url = "http://127.0.0.1:%d" % port

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def serve(model: Path, args: list, until: str = "kv", log_dir: Path | None = None) -> Boot:
    """Start ``vllm serve MODEL ARGS`` on a free loopback port; return when the log shows
    ``until`` ("kv": the KV capacity line; "ready": the API server's startup complete) or the
    engine exits, whichever comes first."""
    port = free_port()
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="real-vllm-"))
    log_path = log_dir / ("serve-%d.log" % port)
    marker = {"kv": "KV cache size:", "ready": "Application startup complete"}[until]
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            [str(real_vllm_python()), "-m", "vllm.entrypoints.cli.main", "serve", str(model),
             "--host", "127.0.0.1", "--port", str(port), "--enforce-eager"] + list(args),
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, **ENGINE_ENV))
    boot = Boot(proc, log_path, port)
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while proc.poll() is None and marker not in boot.log:
        if time.monotonic() > deadline:
            stop_engine(boot)
            pytest.fail("vllm serve neither reached %r nor exited in %d s; log:\n%s"
                        % (marker, BOOT_TIMEOUT_S, boot.log[-3000:]))
        time.sleep(0.2)
    return boot


def engine_yields(boot: Boot) -> None:
    """Every thread of the engine's processes but its API server at the lowest CPU priority.
    The CPU build's worker makes a tiny model's tokens in a second or two on a core of its own,
    and on a busy machine the API server, which answers /metrics from the other, answers a scrape
    only once the requests are over. Yielding, the engine runs while the API server answers, as
    on a GPU host, where the engine's work is the GPU's."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == boot.proc.pid:
            continue
        try:
            if os.getpgid(int(entry.name)) != boot.proc.pid:  # the engine's session is its group
                continue
            for task in (entry / "task").iterdir():
                os.setpriority(os.PRIO_PROCESS, int(task.name), 19)
        except OSError:
            continue  # a process or thread that ended meanwhile


def stop_engine(boot: Boot) -> None:
    """The engine's whole session (API server, engine core, worker): SIGTERM once it serves, as a
    runtime stops it; SIGKILL while it boots, which SIGTERM leaves hanging for half a minute."""
    if boot.proc.poll() is None and "Application startup complete" in boot.log:
        try:
            os.killpg(boot.proc.pid, signal.SIGTERM)
            boot.proc.wait(timeout=30)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    try:
        os.killpg(boot.proc.pid, signal.SIGKILL)  # and any worker that outlived its parent
    except (ProcessLookupError, PermissionError):
        pass
    boot.proc.wait()


def boot_engines(cases: list, log_dir: Path) -> dict:
    """Boot the real engine for each case (``{"id", "model", "max_model_len",
    "kv_cache_memory_bytes", ...}``: engine arguments) one after another in one process
    (tests/realengine/boot_engines.py); ``{id: what that boot printed}``."""
    log_path = log_dir / "boot-engines.log"
    with open(log_path, "w") as out:
        proc = subprocess.run([str(real_vllm_python()), str(BOOT_ENGINES), json.dumps(cases)],
                              stdout=out, stderr=subprocess.STDOUT, timeout=BOOT_TIMEOUT_S, check=False,
                              env=dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", **ENGINE_ENV))
    log = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        pytest.fail("booting the real engine's cases failed (rc %d):\n%s" % (proc.returncode, log[-3000:]))
    parts = re.split(r"^==== boot (\S+)\n", log, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))
