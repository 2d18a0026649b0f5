"""The boot order of a host's changes: who stops first, and one seat per GPU per wave."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.steps import (
    StepsError,
    rebalance_steps,
)

G0, G1, G2 = "GPU-0", "GPU-1", "GPU-2"


def _seat(name, gpus, footprint):
    return {"name": name, "gpus": gpus, "footprint_mib": footprint}


def _cards(*holders):
    """holders: (gpu uuid, compose service, MiB)"""
    gpus = {}
    for uuid, service, mib in holders:
        gpus.setdefault(uuid, {"uuid": uuid, "processes": []})["processes"].append(
            {"pid": 1, "used_mib": mib, "compose_service": service, "compose_project": service})
    return {"gpus": list(gpus.values())}


PLAN = {"seats": [_seat("coder", [G0], 20000), _seat("voices", [G1], 30000),
                  _seat("gen-small", [G1], 15000), _seat("big-tp", [G1, G2], 40000),
                  _seat("parakeet", [G0], 3840)]}


def test_movers_and_shrinkers_stop_first_growers_do_not():
    cards = _cards((G0, "coder", 25000),      # shrinks 25000 -> 20000 on the same GPU
                   (G0, "voices", 20000),     # moves GPU 0 -> GPU 1 and grows
                   (G1, "gen-small", 10000),  # grows in place
                   (G0, "parakeet", 3840))
    steps = rebalance_steps(dict(PLAN, retire=["old-seat"]), ["coder", "voices", "gen-small"],
                            ["coder", "voices", "gen-small", "parakeet", "old-seat"], cards)
    assert steps["leaving"] == ["old-seat"]
    assert steps["stop_first"] == ["old-seat", "coder", "voices"]
    assert steps["unchanged"] == ["parakeet"]


def test_a_running_seat_the_inventory_dropped_is_only_stopped_when_retired():
    running = ["coder", "voices", "gen-small", "big-tp", "parakeet", "old-seat", "older"]
    with pytest.raises(StepsError, match=r"^host twin1: old-seat, older run here but the inventory no "
                       r"longer lists them; a seat is only stopped when llmfleet_retire names it"):
        rebalance_steps(dict(PLAN, host="twin1"), [], running, {"gpus": []})
    with pytest.raises(StepsError, match=r"older runs here"):
        rebalance_steps(dict(PLAN, host="twin1", retire=["old-seat"]), [], running, {"gpus": []})
    # an empty seat list stops nothing unless every running seat is retired by name
    empty = {"host": "twin1", "seats": []}
    with pytest.raises(StepsError, match="coder, voices, gen-small"[:5]):
        rebalance_steps(empty, [], running, {"gpus": []})
    steps = rebalance_steps(dict(empty, retire=running), [], running, {"gpus": []})
    assert steps["stop_first"] == sorted(running) and steps["waves"] == []


def test_waves_hold_one_seat_per_gpu_and_tp_seats_take_every_gpu():
    steps = rebalance_steps(PLAN, ["coder", "voices", "gen-small", "big-tp"],
                            ["coder", "voices", "gen-small", "big-tp", "parakeet"], {"gpus": []})
    waves = steps["waves"]
    assert waves[0] == ["big-tp", "coder"], "TP first, then the biggest that fits beside it"
    for wave in waves:
        used = [gpu for name in wave for gpu in next(s["gpus"] for s in PLAN["seats"] if s["name"] == name)]
        assert len(used) == len(set(used)), "two seats of one wave share a GPU: %s" % wave
    assert sorted(name for wave in waves for name in wave) == ["big-tp", "coder", "gen-small", "voices"]
    assert waves.index(["voices"]) < waves.index(["gen-small"]), "largest footprint first on a GPU"


def test_a_planned_seat_that_is_not_running_boots_even_with_unchanged_files():
    steps = rebalance_steps(PLAN, [], ["coder", "voices", "gen-small", "big-tp"], {"gpus": []})
    assert steps["waves"] == [["parakeet"]] and steps["stop_first"] == []


def test_nothing_changed_nothing_to_do():
    running = [s["name"] for s in PLAN["seats"]]
    assert rebalance_steps(PLAN, [], running, {"gpus": []}) == {
        "stop_first": [], "waves": [], "leaving": [], "sleeping": {}, "retiring_dormant": [],
        "unchanged": sorted(running)}


def _swap(port=8016, **old_state):
    """charrp-moe replaces charrp-dense, which runs now at ``port`` unless told otherwise."""
    plan = {"host": "ana-ml2", "seats": [dict(_seat("charrp-moe", [G0], 30000), port=8016, replaces="charrp-dense")]}
    running = old_state.get("running", ["charrp-dense"])
    return rebalance_steps(plan, ["charrp-moe"], running, {"gpus": []}, {"charrp-dense": port} if running else {},
                           old_state.get("dormant"))


def test_a_replaced_seat_stops_first_and_sleeps_instead_of_leaving_for_good():
    steps = _swap()
    assert steps["leaving"] == ["charrp-dense"] and steps["stop_first"] == ["charrp-dense"]
    assert steps["sleeping"] == {"charrp-dense": "charrp-moe"}
    assert steps["waves"] == [["charrp-moe"]] and steps["retiring_dormant"] == []
    # once it sleeps, a second window neither wakes it nor stops anything
    again = _swap(running=[], dormant={"charrp-dense": "charrp-moe"})
    assert again["leaving"] == [] and again["sleeping"] == {} and again["stop_first"] == []


def test_a_replacement_on_another_port_is_refused_before_anything_stops():
    with pytest.raises(StepsError, match=r"^host ana-ml2: seat charrp-moe replaces charrp-dense, which publishes "
                       r"port 8017; expected port 8017 on charrp-moe too \(the gateway's routes stay as they are, "
                       r"and a rollback starts charrp-dense there again\)$"):
        _swap(port=8017)


def test_a_dormant_seat_is_retired_only_when_the_plan_retires_it():
    plan = {"host": "ana-ml2", "seats": [dict(_seat("charrp-moe", [G0], 30000), port=8016)]}
    dormant = {"charrp-dense": "charrp-moe", "older": None}
    assert rebalance_steps(plan, [], ["charrp-moe"], {"gpus": []}, {}, dormant)["retiring_dormant"] == []
    steps = rebalance_steps(dict(plan, retire=["charrp-dense"]), [], ["charrp-moe"], {"gpus": []}, {}, dormant)
    assert steps["retiring_dormant"] == ["charrp-dense"] and steps["leaving"] == [] and steps["stop_first"] == []


@pytest.mark.parametrize("plan, changed, message", [
    ({}, [], "plan: expected a seat_plan result"),
    (PLAN, ["nope"], "changed: nope not in the plan"),
])
def test_bad_input_is_named(plan, changed, message):
    with pytest.raises(StepsError, match=message):
        rebalance_steps(plan, changed, [], {"gpus": []})
