"""Seeded random malformations of a valid host and of a valid plan seat, through every entry
point an operator's input reaches: each is either accepted or refused with the collection's own
error (a ValueError naming what is wrong), never another exception."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from support.fuzz import malformed

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import build_plan, inventory_problems
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import seat_secrets, without_secrets
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import journal
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.steps import rebalance_steps
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, runtime_of, systemd

CONFIG = Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "model_configs" / "qwen3-8b.json"
PROFILE = Path(__file__).resolve().parents[3] / "integration" / "fleets" / "twin-radiance" / "models" / "radiance-moe" \
    / "radiance.json"
VALUES = [None, True, False, 0, -1, 1, 2 ** 70, 1.5, float("nan"), float("inf"), "", "x", "x\n", "'", "$",
          "8GiB", "/", "GPU-a", "published", [], [1], ["x"], {}, {"a": 1}, {"a": {"b": []}}, [{}], [[]]]
HOST = {"gpus": [{"index": 0, "uuid": "GPU-a", "memory_total_mib": 81559},
                 {"index": 1, "uuid": "GPU-b", "memory_total_mib": 81559}],
        "seats": [{"name": "alpha", "engine": "vllm", "model": "/srv/models/qwen3-8b", "model_config": str(CONFIG),
                   "max_model_len": 32768, "image": "vllm/vllm-openai:v0.33.0", "port": 8101,
                   "weights_bytes": 16381470720, "volumes": ["/srv/models:/srv/models:ro"],
                   "environment": {"HF_TOKEN": "hf_tttttttt", "A": "b"}},
                  {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr:1", "port": 8190,
                   "container_port": 8000, "gpu": 0},
                  {"name": "archon", "engine": "radiance", "model": "/srv/models/radiance-moe",
                   "model_profile": str(PROFILE), "image": "llmfleet/radiance:1.8.1", "port": 8201, "gpu": 1,
                   "max_num_seqs": 4, "max_model_len": 65536, "host_pool_mib": 30720, "ttm_min_mib": 68000,
                   "ttm_target_mib": 70000, "target_tokens": 250000}]}
PLAN_SEAT = {"name": "alpha", "engine": "vllm", "port": 8101, "gpus": ["GPU-a"], "container": "vllm-alpha",
             "health_path": "/health", "max_model_len": 32768, "kv_cache_memory_bytes": 4 * 1024 ** 3,
             "gpu_memory_utilization": 0.5, "footprint_mib": 1000,
             "launch": {"image": "vllm/vllm-openai:v0.33.0", "model": "m", "served_model_names": ["alpha"],
                        "environment": {"A": "b"}, "secret_environment": ["T"], "volumes": ["/a:/b"],
                        "command": [], "health_interval": "15s", "health_start_period": "20m",
                        "tensor_parallel_size": 1, "extra_args": []}}
PLATEAU = {"gpus": [{"uuid": "GPU-a", "memory_total_mib": 81559, "memory_used_mib": 5, "processes": [
    {"pid": 1, "used_mib": 5, "seat": "alpha",
     "args": ["m", "--max-model-len", "32768", "--kv-cache-memory-bytes", "1"]}]},
    {"uuid": "GPU-b", "memory_total_mib": 81559, "memory_used_mib": 5, "processes": [
        {"pid": 2, "used_mib": 5, "seat": "archon",
         "args": ["m", "--max-num-seqs", "4", "--max-model-len", "65536", "--gpu-headroom-mib", "96",
                  "--host-pool-mib", "30720", "--prefix-cache-mib", "0", "--placement", "auto",
                  "--checkpoint-slots", "auto"]}]}]}


@pytest.mark.parametrize("seed", range(4))
def test_a_malformed_host_is_planned_or_refused_never_crashes(seed):
    rng = random.Random(seed)
    for _round in range(1500):
        host = malformed(rng, HOST, VALUES)
        gpus, seats = (host.get("gpus"), host.get("seats")) if isinstance(host, dict) else (host, host)
        options = {key: copy.deepcopy(rng.choice(VALUES)) for key in (
            "accept", "retire", "plateau_ran", "plateau_kv", "seat_defaults", "min_spare_mib",
            "boot_margin_mib", "kv_factor", "kv_round_to") if rng.random() < 0.05}
        plateau = malformed(rng, PLATEAU, VALUES) if rng.random() < 0.3 else None
        for call in (lambda: build_plan("h", gpus, seats, None, plateau=plateau, **options),
                     lambda: build_plan("h", gpus, seats, None, cards=plateau, **options),
                     lambda: inventory_problems("h", gpus, seats, **options),
                     lambda: seat_secrets(seats, "alpha", options.get("seat_defaults")),
                     lambda: without_secrets(seats)):
            try:
                call()
            except ValueError:
                pass


@pytest.mark.parametrize("seed", range(4))
def test_a_malformed_plan_seat_is_rendered_or_refused_never_crashes(seed):
    rng = random.Random(seed)
    for _round in range(1500):
        seat = malformed(rng, PLAN_SEAT, VALUES)
        if not isinstance(seat, dict):  # seat_files' argument spec takes only a dict
            continue
        for call in (lambda: runtime_of(seat),
                     lambda: compose.render(seat, "h", {"T": "v"}),
                     lambda: rebalance_steps({"host": "h", "seats": [seat]}, ["alpha"], ["alpha"], {"gpus": []}),
                     lambda: journal.journal_files({"alpha": seat}, {}),
                     lambda: journal.seat_file_backups({"alpha": seat})):
            try:
                call()
            except ValueError:
                pass


@pytest.mark.parametrize("seed", range(2))
def test_a_malformed_radiance_plan_seat_is_rendered_or_refused_never_crashes(seed):
    planned = {s["name"]: s for s in build_plan("h", HOST["gpus"], HOST["seats"])["seats"]}["archon"]
    rng = random.Random(seed)
    for _round in range(1500):
        seat = malformed(rng, planned, VALUES)
        if not isinstance(seat, dict):
            continue
        for call in (lambda: compose.render(seat, "h"), lambda: systemd.render(seat, "h", None, "/srv/compose/archon")):
            try:
                call()
            except ValueError:
                pass
