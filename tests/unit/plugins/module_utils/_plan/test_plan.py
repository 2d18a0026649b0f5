"""A host's plan from the inventory, the model configs and the cards."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import PlanError, build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import plan_markdown, plan_svg

CONFIGS = Path(__file__).resolve().parents[4] / "unit" / "fixtures" / "model_configs"
GIB = 1024 ** 3
GPUS = [{"index": 0, "uuid": "GPU-a", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559},
        {"index": 1, "uuid": "GPU-b", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}]


@pytest.fixture
def inventory(tmp_path):
    for name in ("qwen3-8b", "llama-3.1-8b-instruct"):
        (tmp_path / "models" / name).mkdir(parents=True)
        shutil.copy(CONFIGS / ("%s.json" % name), tmp_path / "models" / name / "config.json")
    return tmp_path


def _seat(name, model, port, **extra):
    seat = {"name": name, "engine": "vllm", "model": "/models/" + model, "port": port,
            "model_config": "models/%s/config.json" % model, "max_model_len": 32768,
            "image": "vllm/vllm-openai:v0.33.0", "weights_bytes": 16 * GIB}
    seat.update(extra)
    return seat


SEATS = [_seat("alpha", "qwen3-8b", 8101, kv_cache_memory_bytes="8GiB", current_gpu=0),
         _seat("beta", "llama-3.1-8b-instruct", 8102, current_gpu=0),
         _seat("gamma", "qwen3-8b", 8103, kv_factor=1.07, max_model_len=40960),
         {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr", "port": 8190,
          "gpu": 1}]


def _cards(background=0, seat_mib=0):
    return {"gpus": [{"index": g["index"], "uuid": g["uuid"], "memory_total_mib": 81559,
                      "memory_used_mib": background + seat_mib, "memory_reserved_mib": 0,
                      "processes": [{"used_mib": seat_mib, "compose_service": "alpha"}] if seat_mib else []}
                     for g in GPUS]}


def test_the_plan_sizes_places_and_explains(inventory):
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), kv_factor=1.25)
    seats = {s["name"]: s for s in plan["seats"]}
    # reference §8: Qwen3-8B bf16 with 8 GiB at 32,768 tokens
    assert seats["alpha"]["kv_cache_tokens"] == 58240 and seats["alpha"]["kv_rule"] == "pinned 8 GiB"
    assert seats["beta"]["kv_rule"] == "rule 1.25x" and seats["beta"]["max_concurrency"] >= 1.25
    assert seats["gamma"]["kv_rule"] == "exception 1.07x"
    assert seats["asr"]["gpus"] == ["GPU-b"] and seats["asr"]["footprint_mib"] == 3840
    for gpu in plan["gpus"]:
        on = [seats[name] for name in gpu["seats"]]
        assert gpu["spare_mib"] == 81559 - sum(s["footprint_mib"] for s in on)
    assert plan["worst_spare_mib"] == min(g["spare_mib"] for g in plan["gpus"]) and plan["optimal"]
    alpha = seats["alpha"]
    assert alpha["kv_cache_memory_bytes"] == 8 * GIB and 0 < alpha["gpu_memory_utilization"] <= 1
    assert alpha["launch"]["image"] and "kv_cache_memory_bytes" not in alpha["launch"], \
        "a planned number is in the plan seat once; its launch inputs are what the operator declared"
    assert seats["asr"]["gpu_memory_utilization"] is None and seats["asr"]["launch"]["container_port"]
    assert "| 0 | 81,559 |" in plan_markdown(plan) and plan_svg(plan).count("<rect") >= 6


def test_memory_nobody_in_the_plan_holds_shrinks_the_room(inventory):
    quiet = build_plan("twin1", GPUS, SEATS, str(inventory))
    busy = build_plan("twin1", GPUS, SEATS, str(inventory), cards=_cards(background=5000, seat_mib=30000))
    assert [g["background_mib"] for g in busy["gpus"]] == [5000, 5000], "the seat's own 30,000 MiB is ours"
    assert busy["worst_spare_mib"] == quiet["worst_spare_mib"] - 5000


def test_a_plateau_snapshot_measures_the_overhead(inventory):
    snapshot = _cards(seat_mib=16 * 1024 + 8 * 1024 + 3000)
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), plateau=snapshot, plateau_kv={"alpha": 8 * GIB})
    alpha = next(s for s in plan["seats"] if s["name"] == "alpha")
    assert alpha["overhead_source"] == "measured at plateau" and alpha["overhead_mib"] == 3000


def test_a_pinned_budget_vllm_would_refuse_fails_in_vllms_words(inventory):
    seats = [_seat("alpha", "qwen3-8b", 8101, kv_cache_memory_bytes="1GiB")]
    with pytest.raises(PlanError, match=r"seat alpha: vLLM would not boot with 1 GiB of KV: To serve at "
                                        r"least one request with the model's max seq len \(32768\)"):
        build_plan("twin1", GPUS, seats, str(inventory))


def test_cards_from_another_host_are_refused(inventory):
    cards = _cards()
    cards["gpus"][1]["uuid"] = "GPU-elsewhere"
    with pytest.raises(PlanError, match="host twin1: the reading of the cards has no GPU GPU-b"):
        build_plan("twin1", GPUS, SEATS, str(inventory), cards=cards)


def test_an_infeasible_fleet_names_the_gpus_and_the_shortfall(inventory):
    seats = [_seat(n, "qwen3-8b", 8100 + i, kv_cache_memory_bytes="30GiB") for i, n in enumerate("abcd")]
    with pytest.raises(PlanError) as caught:
        build_plan("twin1", GPUS, seats, str(inventory), min_spare_mib=0)
    assert "host twin1:" in str(caught.value) and "MiB" in str(caught.value)
