"""seat_placement's main(): the DESIGN contract through the module's argument handling, check
mode, refusals with the GPUs, shortfall and seats, and bad input as one clear failure."""

from __future__ import annotations

import json

import pytest
from support.module_args import run_main

from ansible_collections.llmfleet.seats.plugins.modules import seat_placement

CONTRACT_KEYS = {"assignment", "spare_mib", "worst_spare_mib", "moves", "optimal", "bound_mib"}
FV_ML1_GPUS = [{"id": "GPU-%d" % i, "capacity_mib": 97887} for i in range(3)] + [
    {"id": "GPU-3", "capacity_mib": 97887, "keep_clear": True}]


def run(capsys, **args):
    return run_main(seat_placement.main, capsys, args)


def test_places_seats_with_the_contract_keys(capsys):
    code, result = run(capsys, gpus=FV_ML1_GPUS, seats=[
        {"name": "parakeet-nemo", "need_mib": 3840, "gpu": "GPU-0"},
        {"name": "meromero-rp", "need_mib": 41000, "current_gpu": "GPU-1"},
        {"name": "coder", "need_mib": 52000, "current_gpu": "GPU-0"},
        {"name": "gen-small", "need_mib": 38000, "current_gpu": "GPU-1"},
        {"name": "big-tp", "need_mib": 40000, "gpu_count": 2}])
    assert code == 0 and result["changed"] is False
    assert CONTRACT_KEYS <= set(result)
    assert result["optimal"] is True
    assert result["assignment"]["parakeet-nemo"] == "GPU-0"
    tp_gpus = result["assignment"]["big-tp"]
    assert len(set(tp_gpus)) == 2 and "GPU-3" not in tp_gpus  # two distinct, never the clear one
    assert "GPU-3" not in json.dumps(result["assignment"])
    assert result["spare_mib"]["GPU-3"] == 97887
    assert result["worst_spare_mib"] == min(result["spare_mib"][g] for g in ("GPU-0", "GPU-1", "GPU-2"))
    # per_gpu agrees with the contract keys
    for row in result["per_gpu"]:
        assert row["spare_mib"] == result["spare_mib"][row["id"]]
        assert row["used_mib"] == row["capacity_mib"] - row["spare_mib"]
        for name in row["seats"]:
            target = result["assignment"][name]
            assert row["id"] in (target if isinstance(target, list) else [target])


def test_fewest_moves_among_the_best_worst_spares(capsys):
    code, result = run(capsys, gpus=[{"id": "a", "capacity_mib": 100}, {"id": "b", "capacity_mib": 100}],
                       seats=[{"name": "x", "need_mib": 60, "current_gpu": "a"},
                              {"name": "y", "need_mib": 30},
                              {"name": "z", "need_mib": 50, "current_gpu": "a"}])
    assert code == 0
    assert result["worst_spare_mib"] == 20 and len(result["moves"]) == 1


def test_check_mode_gives_the_same_answer(capsys):
    args = {"gpus": FV_ML1_GPUS, "seats": [{"name": "s%d" % i, "need_mib": 9000 + 997 * i,
                                            "current_gpu": "GPU-%d" % (i % 3)} for i in range(9)]}
    normal = run(capsys, **args)[1]
    checked = run(capsys, _ansible_check_mode=True, **args)[1]
    assert normal == checked and normal["optimal"] is True


def test_gpu_ids_and_refs_given_as_numbers_match(capsys):
    code, result = run(capsys, gpus=[{"id": 0, "capacity_mib": 100}, {"id": 1, "capacity_mib": 100}],
                       seats=[{"name": "x", "need_mib": 10, "gpu": 1, "avoid_gpus": [0]}])
    assert code == 0 and result["assignment"] == {"x": "1"}


def test_no_room_fails_with_gpus_shortfall_and_seats(capsys):
    code, result = run(capsys, gpus=[{"id": "a", "capacity_mib": 100}, {"id": "b", "capacity_mib": 100}],
                       seats=[{"name": n, "need_mib": 60} for n in ("x", "y", "z")],
                       min_spare_mib=5)
    assert code == 1 and result["failed"] is True
    assert "short by 25 MiB" in result["msg"]
    assert result["shortfall_mib"] == 25 and len(result["short_gpus"]) == 1
    assert len(result["short_seats"]) == 2


@pytest.mark.parametrize("args, message", [
    ({"gpus": [{"id": "a", "capacity_mib": 10}], "seats": [{"name": "x", "need_mib": 1, "gpu": "q"}]},
     "seat x: gpu: expected one of the GPU ids a, got 'q'"),
    ({"gpus": [{"id": "a", "capacity_mib": 10}], "seats": [{"name": "x", "need_mib": 1}],
      "search_node_limit": 0},
     "search_node_limit: expected a positive number of search steps, got 0"),
    ({"gpus": [{"id": "a", "capacity_mib": 10}], "seats": [{"name": "x"}]},
     "missing required arguments: need_mib"),
])
def test_bad_input_fails_once_with_a_named_message(capsys, args, message):
    code, result = run(capsys, **args)
    assert code == 1 and result["failed"] is True
    assert message in result["msg"]
    assert "Traceback" not in result["msg"]
