"""A host's plan from the inventory, the model configs and the cards."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import human_bytes
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import PlanError, build_plan, size_seats
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import plan_markdown, plan_svg
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan_seat import check_plan_seat
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import size_kv_for_demand

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
         {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr:1", "port": 8190,
          "gpu": 1}]


def _cards(background=0, seat_mib=0):
    return {"gpus": [{"index": g["index"], "uuid": g["uuid"], "memory_total_mib": 81559,
                      "memory_used_mib": background + seat_mib, "memory_reserved_mib": 0,
                      "processes": [{"used_mib": seat_mib, "compose_service": "alpha"}] if seat_mib else []}
                     for g in GPUS]}


def test_the_plan_sizes_places_and_explains(inventory):
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), kv_factor=1.25)
    seats = {s["name"]: s for s in plan["seats"]}
    # the 8 GiB vector of Qwen3-8B bf16 at 32,768 tokens
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
    for seat in plan["seats"]:
        assert check_plan_seat(seat, AssertionError) is seat, "the plan writes what its own check holds"


def test_a_plan_seat_edited_by_hand_is_held_to_its_engines_field_table(inventory):
    alpha = next(s for s in build_plan("twin1", GPUS, SEATS, str(inventory))["seats"] if s["name"] == "alpha")
    for change, message in (
            ({"max_model_len": 0}, "seat alpha: max_model_len: expected a positive integer, got 0"),
            ({"gpu_memory_utilization": 1.5}, "seat alpha: gpu_memory_utilization: expected a number in (0, 1], got 1.5"),
            ({"launch": dict(alpha["launch"], block_size="16")},
             "seat alpha: launch.block_size: expected a positive integer or null, got '16'"),
            ({"launch": dict(alpha["launch"], default_chat_template_kwargs={"t": float("nan")})},
             "seat alpha: launch.default_chat_template_kwargs: expected a dict of plain values or null, got {'t': nan}"),
            ({"gpus": ["GPU-a", "GPU-b"]}, "seat alpha: gpus: expected one GPU per tensor-parallel rank (1), got")):
        with pytest.raises(ValueError, match="^" + re.escape(message)):
            check_plan_seat(dict(alpha, **change), ValueError)


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


def _recorded(seat_mib, **ran):
    """A plateau whose alpha process carries the record gpu_info writes for a managed seat."""
    snapshot = _cards(seat_mib=seat_mib)
    args = ["/models/qwen3-8b", "--port", "8101", "--max-model-len", str(ran.get("max_model_len", 32768)),
            "--kv-cache-memory-bytes", str(ran.get("kv", 8 * GIB)), "--gpu-memory-utilization", "0.5"]
    snapshot["gpus"][0]["processes"][0].update(seat="alpha", image=ran.get("image", "vllm/vllm-openai:v0.33.0"),
                                               args=args)
    snapshot["gpus"][1]["processes"] = []
    snapshot["gpus"][1]["memory_used_mib"] = 0
    return snapshot


def test_a_raised_pin_grows_the_measured_footprint_by_the_difference(inventory):
    plateau = _recorded(16 * 1024 + 8 * 1024 + 3000)
    before = build_plan("twin1", GPUS, SEATS, str(inventory), plateau=plateau)
    raised = [dict(SEATS[0], kv_cache_memory_bytes="12GiB")] + SEATS[1:]
    after = build_plan("twin1", GPUS, raised, str(inventory), plateau=plateau)
    alpha = {plan_id: next(s for s in plan["seats"] if s["name"] == "alpha")
             for plan_id, plan in (("before", before), ("after", after))}
    assert alpha["before"]["overhead_mib"] == alpha["after"]["overhead_mib"] == 3000
    assert alpha["after"]["footprint_mib"] - alpha["before"]["footprint_mib"] == 4 * 1024
    assert alpha["after"]["overhead_source"] == "measured at plateau (it ran with 8192 MiB of KV there)"


@pytest.mark.parametrize("ran, why", [({"image": "vllm/vllm-openai:v0.32.0"}, "image vllm/vllm-openai:v0.32.0"),
                                      ({"max_model_len": 16384}, "max_model_len 16384 (the plan: 32768)")])
def test_a_measurement_of_another_launch_falls_back_to_the_default_and_says_so(inventory, ran, why):
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), plateau=_recorded(16 * 1024 + 8 * 1024 + 3000, **ran))
    alpha = next(s for s in plan["seats"] if s["name"] == "alpha")
    assert alpha["overhead_mib"] == 2304 and why in alpha["overhead_source"]
    assert alpha["overhead_source"].startswith("default: at the plateau it ran ")


def test_a_plateau_of_a_seat_no_longer_listed_is_refused_unless_retired_or_accepted(inventory):
    plateau = _recorded(30000)
    renamed = [dict(SEATS[0], name="alpha2", port=8111)] + SEATS[1:]
    with pytest.raises(PlanError, match="it shows seat alpha, which the inventory does not list"):
        build_plan("twin1", GPUS, renamed, str(inventory), plateau=plateau)
    plan = build_plan("twin1", GPUS, renamed, str(inventory), plateau=plateau,
                      accept={"unknown_plateau_seats": ["alpha"]})
    assert plan["gpus"][0]["background_mib"] == 30000, "accepted: its memory counts as another tenant's"
    # retired, or replaced (a model swap): the window stops it before anything boots, so what it
    # held is free for the plan, not another tenant's
    swapped = [dict(SEATS[0], name="alpha2", replaces="alpha")] + SEATS[1:]
    for seats, extra, said in ((renamed, {"retire": ["alpha"]}, "- **retired**: alpha: stopped and removed"),
                               (swapped, {}, "- **model swap**: alpha2 replaces alpha: the replaced seat is stopped "
                                             "first and kept dormant")):
        plan = build_plan("twin1", GPUS, seats, str(inventory), plateau=plateau, **extra)
        assert plan["gpus"][0]["background_mib"] == 0, "its memory is freed by the window"
        assert said in plan_markdown(plan)


def test_a_snapshot_of_another_host_is_refused_unless_accepted(inventory):
    cards = dict(_cards(), snapshot={"host": "twin9", "path": "/x/cards.json"})
    with pytest.raises(PlanError, match=r"the reading of the cards: recorded on host twin9, not twin1 "
                                        r"\(/x/cards.json\); expected a snapshot of this host, or "
                                        r"llmfleet_plan_accept.snapshot_host: twin9"):
        build_plan("twin1", GPUS, SEATS, str(inventory), cards=cards)
    assert build_plan("twin1", GPUS, SEATS, str(inventory), cards=cards, accept={"snapshot_host": "twin9"})


def test_the_plan_says_what_the_placement_search_proved(inventory):
    plan = build_plan("twin1", GPUS, SEATS, str(inventory))
    assert "(proven optimal)" in plan_markdown(plan)
    worst = plan["worst_spare_mib"]
    plan.update(optimal=False, bound_mib=worst)
    assert "proven the best worst spare; the moves are the fewest found" in plan_markdown(plan)
    plan["bound_mib"] = worst + 1234
    assert ("NOT proven optimal: within 1,234 MiB of the best, no placement does better than "
            "{:,} MiB".format(worst + 1234)) in plan_markdown(plan)


def _holding(where, source="nvml"):
    """A reading of the cards where each seat of ``where`` holds 20 GiB on the GPU named."""
    return {"source": source, "gpus": [
        {"index": g["index"], "uuid": g["uuid"], "memory_total_mib": 81559, "memory_reserved_mib": 0,
         "memory_used_mib": 20480 * sum(1 for gpu in where.values() if gpu == g["uuid"]),
         "processes": [{"used_mib": 20480, "compose_service": seat} for seat, gpu in where.items()
                       if gpu == g["uuid"]]} for g in GPUS]}


def test_moves_are_counted_from_the_cards_not_from_the_inventory(inventory):
    # the inventory says alpha and beta run on GPU 0; the cards show alpha on GPU 0, beta on GPU 1
    cards = _holding({"alpha": "GPU-a", "beta": "GPU-b"})
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), cards=cards)
    seats = {s["name"]: s for s in plan["seats"]}
    assert seats["beta"]["current_gpus"] == ["GPU-b"] and seats["alpha"]["current_gpus"] == ["GPU-a"]
    assert seats["beta"]["now"] == {"gpus": ["GPU-b"], "held_mib": 20480, "max_model_len": None,
                                    "kv_cache_memory_bytes": None, "kv_cache_tokens": None,
                                    "max_concurrency": None}, "as it runs now, beside the plan"
    assert "| beta | 1 → %d | 20,480 → %s |" % (seats["beta"]["gpu_indices"][0], "{:,}".format(
        seats["beta"]["footprint_mib"])) in plan_markdown(plan)
    assert plan["moves"] == sorted(name for name in ("alpha", "beta") if seats[name]["gpus"] != seats[name]["current_gpus"])
    assert "seat beta: current_gpu says GPU 0, but the cards show it on GPU 1; moves are counted from the cards" \
        in plan["warnings"]
    # a seat the live cards do not show does not run: it boots, it does not move
    quiet = build_plan("twin1", GPUS, SEATS, str(inventory), cards=_holding({}))
    assert quiet["moves"] == [] and all(s["current_gpus"] == [] for s in quiet["seats"])
    assert "seat alpha: current_gpu says GPU 0, but the cards show it running nowhere; moves are counted " \
           "from the cards" in quiet["warnings"]
    # a recorded snapshot that does not show a seat leaves the inventory's word
    recorded = build_plan("twin1", GPUS, SEATS, str(inventory), cards=_holding({}, source="snapshot"))
    assert {s["name"]: s["current_gpus"] for s in recorded["seats"]}["alpha"] == ["GPU-a"]


def test_a_hand_started_seat_shows_the_numbers_its_container_runs_now(inventory):
    cards = _holding({"beta": "GPU-b", "gamma": "GPU-a"}, source="snapshot")
    by_service = {p["compose_service"]: p for gpu in cards["gpus"] for p in gpu["processes"]}
    by_service["beta"]["running"] = {"max_model_len": 8192, "gpu_memory_utilization": 0.35,
                                     "kv_cache_memory_bytes": 21871296102, "kv_cache_tokens": 151872,
                                     "max_concurrency": 18.54}
    # a snapshot is a file: what is not a plausible number is dropped, whatever it says
    by_service["gamma"]["running"] = {"max_model_len": "{{ lookup('pipe', 'id') }}", "kv_cache_tokens": -5,
                                      "max_concurrency": float("nan"), "api_key": "sk-live-0000",
                                      "kv_cache_memory_bytes": True, "kv_cache_dtype": "{{ x }}"}
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), cards=cards)
    seats = {s["name"]: s for s in plan["seats"]}
    assert seats["beta"]["now"] == {"gpus": ["GPU-b"], "held_mib": 20480, "max_model_len": 8192,
                                    "kv_cache_memory_bytes": 21871296102, "kv_cache_tokens": 151872,
                                    "max_concurrency": 18.54}
    assert {field: seats["gamma"]["now"][field] for field in ("max_model_len", "kv_cache_memory_bytes",
                                                              "kv_cache_tokens", "max_concurrency")} == dict.fromkeys(
        ("max_model_len", "kv_cache_memory_bytes", "kv_cache_tokens", "max_concurrency"))
    table = plan_markdown(plan)
    beta = seats["beta"]
    assert "| beta | 1 → %d | 20,480 → %s | 8,192 → 32,768 | 20.37 GiB → %s | 151,872 → %s | 18.54x → %.2fx |" % (
        beta["gpu_indices"][0], "{:,}".format(beta["footprint_mib"]), human_bytes(beta["kv_cache_memory_bytes"], "GiB"),
        "{:,}".format(beta["kv_cache_tokens"]), beta["max_concurrency"]) in table, table
    assert "| gamma | 0 → " in table and "| - → 40,960 | - → " in table
    assert "lookup" not in table and "sk-live" not in table and "{{" not in table


def test_a_seat_that_cannot_be_sized_is_named_with_the_other_problems_at_once(inventory):
    seats = SEATS[:1] + [_seat("lost", "no-such-model", 8109)]
    with pytest.raises(PlanError) as refused:
        build_plan("h1", GPUS, seats, inventory_dir=str(inventory), plateau_kv_planned=True)
    message = str(refused.value)
    assert message.startswith("host h1: 2 problem(s) before planning:"), message
    assert "seat_plan_plateau_kv_planned" in message and "seat lost" in message, message


def test_a_container_started_with_docker_run_is_its_seats_by_container_name(inventory):
    cards = _holding({})
    cards["gpus"][0]["processes"] = [{"used_mib": 3840, "container": "asr", "compose_service": None}]
    cards["gpus"][0]["memory_used_mib"] = 3840
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), cards=cards)
    asr = next(s for s in plan["seats"] if s["name"] == "asr")
    assert asr["now"]["gpus"] == ["GPU-a"] and asr["now"]["held_mib"] == 3840
    assert plan["gpus"][0]["background_mib"] == 0, "its memory is the seat's, not another tenant's"


# --- measured demand beside the rule (a demand snapshot from playbooks/calibrate.yml) ----------

def _demand_snapshot(tmp_path, host="twin1", **seats):
    path = tmp_path / ("demand-%s.json" % host)
    path.write_text(json.dumps({"format": "llmfleet.seats/demand/1", "host": host,
                                "window": {"seconds": 604800, "end": 1.8e9},
                                "seats": [dict({"seat": name}, **figures) for name, figures in seats.items()]}))
    return str(path)


def test_a_seat_sized_by_demand_gets_the_budget_its_peak_needs_and_the_plan_shows_both(inventory, tmp_path):
    snapshot = _demand_snapshot(
        tmp_path,
        beta={"peak_kv_tokens": 90_000, "peak_kv_usage": 0.77, "requests": 48112,
              "runaways": {"longer_than": 20000, "replies": 9}},
        gamma={"peak_kv_tokens": 4_000, "peak_kv_usage": 0.06, "requests": 310, "runaways": None})
    seats = [dict(SEATS[1], kv_sizing="demand"), SEATS[2]]
    plan = build_plan("twin1", GPUS, seats, str(inventory), demand_snapshot=snapshot, demand_factor=1.25)
    beta, gamma = ({s["name"]: s for s in plan["seats"]}[name] for name in ("beta", "gamma"))
    config = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    by_demand = size_kv_for_demand(config, 32768, 112_500, vllm_version=beta["vllm_release"]["version"])
    assert beta["kv_cache_memory_bytes"] == by_demand["kv_cache_memory_bytes"] and beta["kv_cache_tokens"] >= 112_500
    assert beta["kv_rule"] == "demand: peak 90,000 tokens x 1.25"
    assert beta["calibration"]["by_demand_bytes"] == beta["kv_cache_memory_bytes"]
    assert beta["calibration"]["by_rule_bytes"] < beta["kv_cache_memory_bytes"], "the rule's 1.25 x 32k is less"
    # gamma stays on its own factor, with what its demand would need beside it
    assert gamma["kv_rule"] == "exception 1.07x" and gamma["calibration"]["sized_by"] == "rule"
    assert gamma["calibration"]["by_demand_bytes"] < gamma["kv_cache_memory_bytes"]
    text = plan_markdown(plan)
    assert "### Measured demand beside the plan" in text
    row = next(line for line in text.splitlines() if line.startswith("| beta | 48,112 | 90,000 tokens (77% of its KV"))
    assert "| **demand** |" in row and "9 replies longer than 20,000 tokens: an output cap (max_new_tokens) at 20,000" in row
    assert "its KV was never more than 6% used" in next(line for line in text.splitlines() if line.startswith("| gamma | 310"))


@pytest.mark.parametrize("change, message", [
    ({"snapshot": None}, "seat beta: kv_sizing: demand, but no demand snapshot is given (llmfleet_demand_snapshot"),
    ({"figures": {}}, "seat beta: kv_sizing: demand, but the demand snapshot has no figures for it"),
    ({"figures": {"beta": {"peak_kv_tokens": None, "detail": "no traffic in the 7d before the window's end"}}},
     "seat beta: kv_sizing: demand, but the demand snapshot has no peak KV tokens for it (no traffic in the 7d"),
    ({"figures": {"beta": {"peak_kv_tokens": 0, "requests": 0, "detail": "no traffic in the 7d before the window's end"}}},
     "seat beta: kv_sizing: demand, but the demand snapshot saw no request to it (no traffic in the 7d"),
    ({"figures": {"beta": {"peak_kv_tokens": "lots"}}},
     "llmfleet_demand_snapshot: seat beta: peak_kv_tokens: expected a count >= 0, got 'lots'"),
    ({"host": "fv-ml1"}, "was measured for host 'fv-ml1', not twin1"),
    ({"factor": float("inf")}, "llmfleet_demand_factor: expected a finite number >= 1"),
    ({"factor": 0.5}, "llmfleet_demand_factor: expected a finite number >= 1 and <= 1024, got 0.5"),
])
def test_a_demand_the_plan_cannot_use_is_refused_naming_the_variable(inventory, tmp_path, change, message):
    figures = change.get("figures", {"beta": {"peak_kv_tokens": 90_000, "requests": 12}})
    snapshot = _demand_snapshot(tmp_path, host=change.get("host", "twin1"), **figures)
    with pytest.raises(PlanError, match=re.escape(message)):
        build_plan("twin1", GPUS, [dict(SEATS[1], kv_sizing="demand")], str(inventory),
                   demand_snapshot=change.get("snapshot", snapshot), demand_factor=change.get("factor", 1.25))


def test_a_file_that_is_not_a_demand_snapshot_is_refused(inventory, tmp_path):
    other = tmp_path / "plateau.json"
    other.write_text(json.dumps({"gpus": []}))
    with pytest.raises(PlanError, match=re.escape("llmfleet_demand_snapshot: %s is not a demand snapshot" % other)):
        build_plan("twin1", GPUS, [SEATS[1]], str(inventory), demand_snapshot=str(other))


def test_a_calibration_yet_to_measure_a_demand_seat_plans_it_by_the_rule_and_says_so(inventory, tmp_path):
    seats = [dict(SEATS[1], kv_sizing="demand")]
    plan = build_plan("twin1", GPUS, seats, str(inventory), demand_snapshot=str(tmp_path / "not-yet.json"),
                      demand_required=False)
    beta = plan["seats"][0]
    assert beta["kv_rule"] == "rule 1.25x (kv_sizing: demand, none measured yet)" and beta["calibration"] is None
    with pytest.raises(PlanError, match=re.escape("llmfleet_demand_snapshot: cannot read %s" % (tmp_path / "not-yet.json"))):
        build_plan("twin1", GPUS, seats, str(inventory), demand_snapshot=str(tmp_path / "not-yet.json"))


def test_the_sizing_takes_another_hosts_demand_only_when_the_operator_says_so(inventory, tmp_path):
    snapshot = _demand_snapshot(tmp_path, host="fv-ml1", beta={"peak_kv_tokens": 90_000, "requests": 12})
    seats = [dict(SEATS[1], kv_sizing="demand")]
    with pytest.raises(PlanError, match=re.escape("was measured for host 'fv-ml1', not twin1")):
        size_seats("twin1", GPUS, seats, str(inventory), demand_snapshot=snapshot)
    sized = size_seats("twin1", GPUS, seats, str(inventory), demand_snapshot=snapshot, snapshot_host="fv-ml1")
    assert sized["seats"][0]["kv_rule"] == "demand: peak 90,000 tokens x 1.25"


def test_the_watch_kept_in_a_plateau_snapshot_is_shown_beside_the_next_plan(inventory):
    watch = {"window": {"since": 1.8e9, "settle_s": 3600, "at": 1.8e9 + 86400, "settled_from": "2027-01-15T09:00:00Z"},
             "gpus": [{"index": 0, "uuid": "GPU-a", "plateau_used_mib": 41000, "least_free_mib": 40559,
                       "creep_mib_per_hour": 0.0, "predicted_spare_mib": 41500,
                       "flags": ["seat beta holds 20,480 MiB, 1,480 MiB above | its planned footprint"]},
                      {"index": 1, "uuid": "GPU-b", "plateau_used_mib": 3840, "least_free_mib": 77719,
                       "creep_mib_per_hour": None, "predicted_spare_mib": None, "flags": []}],
             "seats": [{"seat": "beta", "index": 0, "uuid": "GPU-a", "held_mib": 20480, "planned_mib": 19000,
                        "over_plan_mib": 1480}],
             "flagged": [0]}
    plateau = dict(_holding({"alpha": "GPU-a", "beta": "GPU-a"}), watch=watch,
                   snapshot={"path": "/srv/reports/plateau-twin1.json"})
    plan = build_plan("twin1", GPUS, SEATS, str(inventory), plateau=plateau)
    assert plan["last_watch"]["flagged"] == [0] and plan["last_watch"]["snapshot"] == "/srv/reports/plateau-twin1.json"
    text = plan_markdown(plan)
    assert "### How the cards settled after the last window" in text
    assert "Read at 2027-01-16 08:00 UTC, from 2027-01-15 09:00 UTC (1h of boot transient left out)" in text
    # a flag's text is one cell, whatever it holds
    assert "| 0 | 41,000 | 40,559 | 41,500 | +0.0 | seat beta holds 20,480 MiB, 1,480 MiB above \\| its planned" in text
    assert "| 1 | 3,840 | 77,719 | - | - | settled as planned |" in text
    assert "Seats holding more than their planned footprint then: beta on GPU 0 20,480 MiB (+1,480)." in text
    assert "How the cards settled" not in plan_markdown(build_plan("twin1", GPUS, SEATS, str(inventory)))


def test_a_watch_that_is_not_a_watchs_verdict_is_refused(inventory):
    plateau = dict(_holding({}), watch={"window": {"since": "yesterday"}, "gpus": [], "seats": []})
    with pytest.raises(PlanError, match=re.escape("host twin1: plateau: watch.window: expected {since, settle_s, at}")):
        build_plan("twin1", GPUS, SEATS, str(inventory), plateau=plateau)
