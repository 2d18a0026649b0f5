"""_placement: exact search against exhaustive search (hypothesis), constructed instances with a
known optimum, determinism, moves, multi-GPU seats, and every refusal."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmfleet.seats.plugins.module_utils import _placement
from ansible_collections.llmfleet.seats.plugins.module_utils._placement.packer import max_weight_assignment
from ansible_collections.llmfleet.seats.plugins.module_utils._placement.problem import Problem
from ansible_collections.llmfleet.seats.plugins.module_utils._placement.solver import Solver
from ansible_collections.llmfleet.seats.plugins.module_utils._placement import (
    PlacementError,
    PlacementInfeasible,
    place,
)

H200, RTX = 143771, 97887


# ---- an independent oracle: every assignment, straight from the contract ---------------------
def _as_list(value):
    return None if value is None else (list(value) if isinstance(value, list) else [value])


def exhaustive(gpus, seats):
    """(best worst spare, fewest moves at it) over every assignment, or None if none exists."""
    capacity = {g["id"]: g["capacity_mib"] for g in gpus}
    usable = [g["id"] for g in gpus if not g.get("keep_clear")]
    options = []
    for seat in seats:
        count = seat.get("gpu_count") or len(_as_list(seat.get("gpu")) or [0])
        if seat.get("gpu") is not None:
            options.append([tuple(_as_list(seat["gpu"]))])
        else:
            allowed = [g for g in usable if g not in (seat.get("avoid_gpus") or [])]
            options.append(list(itertools.combinations(allowed, count)))
    best = None
    for combo in itertools.product(*options):
        load = dict.fromkeys(capacity, 0)
        moves = 0
        for seat, chosen in zip(seats, combo):
            for gpu in chosen:
                load[gpu] += seat["need_mib"]
            current = _as_list(seat.get("current_gpu"))
            if current is not None and set(current) != set(chosen):
                moves += 1
        worst = min(capacity[g] - load[g] for g in usable)
        if best is None or (-worst, moves) < (-best[0], best[1]):
            best = (worst, moves)
    return best


def check_result(gpus, seats, result):
    """The result is a real assignment: constraints hold and the figures add up."""
    capacity = {g["id"]: g["capacity_mib"] for g in gpus}
    clear = {g["id"] for g in gpus if g.get("keep_clear")}
    load = dict.fromkeys(capacity, 0)
    for seat in seats:
        chosen = _as_list(result["assignment"][seat["name"]])
        count = seat.get("gpu_count") or len(_as_list(seat.get("gpu")) or [0])
        assert len(chosen) == len(set(chosen)) == count
        assert not set(chosen) & clear
        assert not set(chosen) & set(seat.get("avoid_gpus") or [])
        if seat.get("gpu") is not None:
            assert set(chosen) == set(_as_list(seat["gpu"]))
        for gpu in chosen:
            load[gpu] += seat["need_mib"]
        current = _as_list(seat.get("current_gpu"))
        moved = current is not None and set(current) != set(chosen)
        assert moved == (seat["name"] in result["moves"])
    assert result["spare_mib"] == {g: capacity[g] - load[g] for g in capacity}
    usable = [g for g in capacity if g not in clear]
    assert result["worst_spare_mib"] == min(result["spare_mib"][g] for g in usable)
    assert result["upper_bound_mib"] >= result["worst_spare_mib"]
    assert result["worst_spare_mib"] <= result["bound_mib"] <= result["upper_bound_mib"]
    assert not result["optimal"] or result["bound_mib"] == result["worst_spare_mib"]


@st.composite
def instances(draw):
    ngpus = draw(st.integers(1, 4))
    gpus = [{"id": "g%d" % i, "capacity_mib": draw(st.sampled_from([60, 80, 100, 120])),
             "keep_clear": draw(st.booleans()) if ngpus > 1 else False} for i in range(ngpus)]
    usable = [g["id"] for g in gpus if not g["keep_clear"]] or [gpus[0]["id"]]
    gpus[int(usable[0][1:])]["keep_clear"] = False
    ids = [g["id"] for g in gpus]
    seats = []
    for i in range(draw(st.integers(0, 6))):
        seat = {"name": "s%d" % i, "need_mib": draw(st.integers(0, 70))}
        count = draw(st.sampled_from([1, 1, 1, 2])) if len(usable) > 1 else 1
        if count > 1:
            seat["gpu_count"] = count
        kind = draw(st.sampled_from(["free", "free", "pin", "avoid"]))
        if kind == "pin":
            pin = draw(st.permutations(usable))[:count]
            seat["gpu"] = pin if count > 1 else pin[0]
        elif kind == "avoid" and len(usable) > count:
            seat["avoid_gpus"] = [draw(st.sampled_from(usable))]
        if draw(st.booleans()):
            current = draw(st.permutations(ids))[:draw(st.sampled_from([count, count, 1]))]
            seat["current_gpu"] = current if len(current) > 1 else current[0]
        seats.append(seat)
    return gpus, seats


@pytest.fixture(params=["physical-first", "matching-only"])
def move_search(request, monkeypatch):
    """Run the move search as shipped, and with its symmetric (matching) phase alone."""
    if request.param == "matching-only":
        monkeypatch.setattr(_placement, "_PHYSICAL_SHARE", 0)
    return request.param


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(instances())
def test_matches_exhaustive_search(move_search, instance):
    gpus, seats = instance
    result = place(gpus, seats, min_spare_mib=-10 ** 6)
    assert result["optimal"] is True
    check_result(gpus, seats, result)
    assert (result["worst_spare_mib"], len(result["moves"])) == exhaustive(gpus, seats)


def random_instance(rng):
    """Up to 7 seats on up to 4 GPUs: pins, avoid lists, multi-GPU seats, current GPUs that
    may be kept clear or of another count; hypothesis favours small cases, this does not."""
    gpus = [{"id": "g%d" % i, "capacity_mib": rng.choice([80, 100, 100, 120])}
            for i in range(rng.randint(1, 4))]
    if len(gpus) > 2 and rng.random() < 0.2:
        rng.choice(gpus)["keep_clear"] = True
    usable = [g["id"] for g in gpus if not g.get("keep_clear")]
    seats = []
    for i in range(rng.randint(0, 7)):
        seat = {"name": "s%d" % i, "need_mib": rng.randint(0, 60)}
        count = 2 if len(usable) > 1 and rng.random() < 0.15 else 1
        if count > 1:
            seat["gpu_count"] = count
        if rng.random() < 0.15:
            pin = rng.sample(usable, count)
            seat["gpu"] = pin if count > 1 else pin[0]
        elif rng.random() < 0.25 and len(usable) > count:
            seat["avoid_gpus"] = [rng.choice(usable)]
        if rng.random() < 0.6:
            current = rng.sample([g["id"] for g in gpus], count if rng.random() < 0.9 else 1)
            seat["current_gpu"] = current if len(current) > 1 else current[0]
        seats.append(seat)
    return gpus, seats


def test_matches_exhaustive_search_on_seeded_random_instances(move_search):
    rng = random.Random(31)
    for _instance in range(1200):
        gpus, seats = random_instance(rng)
        result = place(gpus, seats, min_spare_mib=-10 ** 6)
        check_result(gpus, seats, result)
        assert result["optimal"] is True
        assert (result["worst_spare_mib"], len(result["moves"])) == exhaustive(gpus, seats), \
            (gpus, seats)


@settings(max_examples=200, deadline=None)
@given(instances(), st.integers(-20, 80))
def test_refuses_exactly_when_min_spare_cannot_be_kept(instance, min_spare):
    gpus, seats = instance
    worst = exhaustive(gpus, seats)[0]
    if worst >= min_spare:
        assert place(gpus, seats, min_spare_mib=min_spare)["worst_spare_mib"] == worst
        return
    with pytest.raises(PlacementInfeasible) as refused:
        place(gpus, seats, min_spare_mib=min_spare)
    assert refused.value.shortfall_mib > 0 and refused.value.gpus
    assert "short by %d MiB" % refused.value.shortfall_mib in str(refused.value)
    for gpu in refused.value.gpus:
        assert gpu in str(refused.value)


# ---- constructed instances: a perfect packing makes the fluid bound the optimum ------------
def perfect_packing(seed, capacities, spare):
    """Seats that fill every GPU to exactly ``spare``, shuffled; and where they came from."""
    rng = random.Random(seed)
    seats, origin = [], {}
    for gpu, capacity in enumerate(capacities):
        fill = capacity - spare
        cuts = sorted(rng.sample(range(1, fill), rng.randint(3, 5) - 1))
        for part, (low, high) in enumerate(zip([0] + cuts, cuts + [fill])):
            name = "seat-%d-%d" % (gpu, part)
            seats.append({"name": name, "need_mib": high - low})
            origin[name] = "GPU-%d" % gpu
    rng.shuffle(seats)
    return [{"id": "GPU-%d" % i, "capacity_mib": c} for i, c in enumerate(capacities)], seats, origin


@pytest.mark.parametrize("seed, capacities, spare", [
    (1, [H200] * 8, 7000),
    (2, [RTX] * 4 + [H200] * 4, 4096),
    (5, [H200] * 8, 0),
    (9, [RTX] * 8, 12345),
])
def test_large_constructed_instances_reach_and_prove_the_known_optimum(seed, capacities, spare):
    gpus, seats, _origin = perfect_packing(seed, capacities, spare)
    assert 24 <= len(seats) <= 40
    result = place(gpus, seats)
    check_result(gpus, seats, result)
    assert result["worst_spare_mib"] == spare == result["upper_bound_mib"]
    assert result["optimal"] is True


def test_the_layout_already_running_is_kept_when_it_is_optimal():
    gpus, seats, origin = perfect_packing(1, [H200] * 8, 7000)
    for seat in seats:
        seat["current_gpu"] = origin[seat["name"]]
    result = place(gpus, seats)
    assert result["moves"] == [] and result["worst_spare_mib"] == 7000
    assert result["assignment"] == origin


def test_two_seats_swapped_out_of_a_perfect_layout_take_two_moves_back():
    gpus, seats, origin = perfect_packing(3, [H200] * 8, 5000)
    by_name = {s["name"]: s for s in seats}
    on_0 = sorted((s for s in seats if origin[s["name"]] == "GPU-0"), key=lambda s: s["need_mib"])
    on_1 = sorted((s for s in seats if origin[s["name"]] == "GPU-1"), key=lambda s: s["need_mib"])
    big, small = on_0[-1], on_1[0]
    gap = big["need_mib"] - small["need_mib"]
    # one move could only fix it with a seat of exactly `gap` MiB on GPU-0 after the swap
    assert gap > 0 and gap not in {s["need_mib"] for s in on_0 if s is not big} | {small["need_mib"]}
    for seat in seats:
        seat["current_gpu"] = origin[seat["name"]]
    by_name[big["name"]]["current_gpu"], by_name[small["name"]]["current_gpu"] = "GPU-1", "GPU-0"
    result = place(gpus, seats)
    assert result["worst_spare_mib"] == 5000 and result["optimal"] is True
    assert len(result["moves"]) == 2


@pytest.mark.parametrize("seed", [3, 8])
def test_same_answer_whatever_order_the_seats_come_in(seed):
    rng = random.Random(seed)
    gpus = [{"id": "GPU-%d" % i, "capacity_mib": H200} for i in range(8)]
    seats = [{"name": "seat-%02d" % i, "need_mib": rng.randint(2000, 40000),
              "current_gpu": "GPU-%d" % rng.randrange(8)} for i in range(20)]
    first = place(gpus, seats)
    rng.shuffle(seats)
    again = place(gpus, seats)
    assert first == again and first["optimal"] is True


# ---- rules the search must respect ----------------------------------------------------------
def test_pins_avoid_lists_and_kept_clear_gpus_hold():
    gpus = [{"id": "a", "capacity_mib": 100}, {"id": "b", "capacity_mib": 100},
            {"id": "c", "capacity_mib": 100}, {"id": "d", "capacity_mib": 100, "keep_clear": True}]
    seats = [{"name": "asr", "need_mib": 10, "gpu": "a"},
             {"name": "big", "need_mib": 70, "avoid_gpus": ["a", "b"]},
             {"name": "mid", "need_mib": 50}, {"name": "low", "need_mib": 40}]
    result = place(gpus, seats)
    check_result(gpus, seats, result)
    assert result["assignment"]["asr"] == "a" and result["assignment"]["big"] == "c"
    assert result["spare_mib"]["d"] == 100  # kept clear, and not the worst
    assert result["worst_spare_mib"] == 30


def test_multi_gpu_seat_takes_distinct_gpus_and_keeps_its_rank_order():
    gpus = [{"id": "GPU-%d" % i, "capacity_mib": 100} for i in range(4)]
    seats = [{"name": "tp2", "need_mib": 60, "gpu_count": 2, "current_gpu": ["GPU-3", "GPU-1"]},
             {"name": "one", "need_mib": 60}, {"name": "two", "need_mib": 60}]
    result = place(gpus, seats)
    assert result["assignment"]["tp2"] == ["GPU-3", "GPU-1"]  # as it runs, so no move
    assert result["moves"] == [] and result["worst_spare_mib"] == 40


def test_hungarian_assignment_is_a_maximum():
    rng = random.Random(7)
    for size in range(1, 6):
        for _trial in range(30):
            weights = [[rng.randint(0, 5) for _col in range(size)] for _row in range(size)]
            chosen = max_weight_assignment(weights)
            assert sorted(chosen) == list(range(size))
            best = max(sum(weights[r][c] for r, c in enumerate(perm))
                       for perm in itertools.permutations(range(size)))
            assert sum(weights[r][c] for r, c in enumerate(chosen)) == best


def test_a_spent_node_budget_says_so_and_still_returns_a_valid_assignment():
    gpus, seats, _origin = perfect_packing(3, [H200] * 8, 5000)
    result = place(gpus, seats, node_limit=50)
    check_result(gpus, seats, result)
    assert result["optimal"] is False and result["worst_spare_mib"] <= 5000
    assert result["bound_mib"] >= 5000, "a certified gap: the best (5000 MiB) is within the bound"


def test_a_spent_budget_before_min_spare_is_reached_is_an_error_not_a_guess():
    gpus, seats, _origin = perfect_packing(3, [H200] * 8, 5000)
    with pytest.raises(PlacementInfeasible, match="spent its node budget"):
        place(gpus, seats, min_spare_mib=5000, node_limit=50)


def test_a_spent_budget_certifies_its_gap_against_every_assignment():
    rng = random.Random(53)
    spent = gaps = 0
    for _instance in range(600):
        gpus, seats = random_instance(rng)
        result = place(gpus, seats, min_spare_mib=-10 ** 6, node_limit=rng.randint(1, 8))
        check_result(gpus, seats, result)
        worst, moves = exhaustive(gpus, seats)
        assert result["worst_spare_mib"] <= worst <= result["bound_mib"], (gpus, seats)
        if result["optimal"]:
            assert (result["worst_spare_mib"], len(result["moves"])) == (worst, moves)
        spent += not result["optimal"]
        gaps += result["bound_mib"] > result["worst_spare_mib"]
    assert spent > 100 and gaps > 50, "the budgets are small enough to run out"


def test_the_pigeonhole_bound_on_large_seats_binds_where_the_fluid_bound_cannot():
    # 300 MiB asked of 400: fluid says 25 spare, but two of the five seats share a GPU
    gpus = [{"id": "g%d" % i, "capacity_mib": 100} for i in range(4)]
    seats = [{"name": "s%d" % i, "need_mib": 60} for i in range(5)]
    result = place(gpus, seats, min_spare_mib=-100)
    assert result["upper_bound_mib"] == result["worst_spare_mib"] == -20
    assert result["optimal"] is True and result["search_nodes"] == 0


def rack(seed):
    """64 seats on 16 H200s, one kept clear: 85 % of the memory asked, needs uniform over a
    range, every seat running somewhere now, three tensor-parallel, two pinned, five with an
    avoid list."""
    rng = random.Random(seed)
    gpus = [{"id": "GPU-%d" % i, "capacity_mib": H200, "keep_clear": i == 15} for i in range(16)]
    usable = [gpu["id"] for gpu in gpus[:15]]
    seats = [{"name": "seat-%02d" % i, "need_mib": rng.randint(8000, 56000),
              "current_gpu": rng.choice(usable)} for i in range(64)]
    for seat in seats[:3]:
        seat["gpu_count"] = 2
        seat["current_gpu"] = rng.sample(usable, 2)
    for seat in seats[3:5]:
        seat["gpu"] = seat["current_gpu"]
    for seat in seats[5:10]:
        seat["avoid_gpus"] = [gpu for gpu in usable[:2] if gpu != seat["current_gpu"]]
    scale = 0.85 * H200 * 15 / sum(s["need_mib"] * s.get("gpu_count", 1) for s in seats)
    for seat in seats:
        seat["need_mib"] = int(seat["need_mib"] * scale)
    return gpus, seats


def test_a_rack_sized_host_is_answered_within_the_budget_with_a_certified_gap():
    gpus, seats = rack(4)
    result = place(gpus, seats)
    check_result(gpus, seats, result)
    # each node of a host this size counts 8 steps, so the last one may overshoot by 7
    assert result["search_nodes"] <= _placement.DEFAULT_NODE_LIMIT + 8
    assert 0 <= result["bound_mib"] - result["worst_spare_mib"] <= 256
    assert len(result["moves"]) < 61, "the local search on moves keeps some seats where they run"
    random.Random(4).shuffle(seats)
    assert place(gpus, seats) == result, "a spent budget is as deterministic as a proof"


def test_the_moves_local_search_keeps_the_worst_spare_and_never_adds_a_move():
    rng = random.Random(17)
    fewer = 0
    for _instance in range(40):
        gpus = [{"id": "GPU-%d" % i, "capacity_mib": H200} for i in range(6)]
        seats = [{"name": "s%02d" % i, "need_mib": rng.randint(2000, 40000),
                  "current_gpu": "GPU-%d" % rng.randrange(6)} for i in range(20)]
        for seat in rng.sample(seats, 4):
            seat["avoid_gpus"] = ["GPU-%d" % rng.randrange(6)]
        solver = Solver(Problem(gpus, seats, 0), _placement.DEFAULT_NODE_LIMIT)
        where = solver.greedy()
        worst, moves = solver.worst_of(where), solver.moves_of(where)
        kept = solver.keep_more(worst, {name: list(on) for name, on in where.items()})
        assert solver.worst_of(kept) >= worst and solver.moves_of(kept) <= moves
        assert all(seat.allowed >> kept[seat.name][0] & 1 for seat in solver.singles), \
            "every seat stays on a GPU it may use"
        fewer += solver.moves_of(kept) < moves
    assert fewer >= 20, "it finds seats that can go back where they run"


def test_no_seats_and_no_usable_gpus_are_answers_not_errors():
    assert place([{"id": "a", "capacity_mib": 10}], [])["worst_spare_mib"] == 10
    only_clear = place([{"id": "a", "capacity_mib": 10, "keep_clear": True}], [])
    assert only_clear["spare_mib"] == {"a": 10} and only_clear["optimal"] is True


# ---- refusals: which GPUs, how many MiB short, which seats ----------------------------------
def test_refuses_a_gpu_whose_pinned_seats_overflow_it():
    gpus = [{"id": "GPU-0", "capacity_mib": 97887}, {"id": "GPU-1", "capacity_mib": 97887}]
    seats = [{"name": "parakeet-nemo", "need_mib": 3840, "gpu": "GPU-0"},
             {"name": "meromero-rp", "need_mib": 90000, "gpu": "GPU-0"},
             {"name": "gen-small", "need_mib": 20000}]
    with pytest.raises(PlacementInfeasible) as refused:
        place(gpus, seats, min_spare_mib=5000)
    assert str(refused.value) == (
        "GPU GPU-0: the seats pinned to it (parakeet-nemo, meromero-rp) need 93840 MiB and "
        "min_spare_mib is 5000, but it has 97887 MiB: short by 953 MiB")
    assert (refused.value.gpus, refused.value.shortfall_mib, refused.value.seats) == \
        (["GPU-0"], 953, ["parakeet-nemo", "meromero-rp"])


def test_refuses_a_seat_no_allowed_gpu_can_hold():
    gpus = [{"id": "a", "capacity_mib": 100}, {"id": "b", "capacity_mib": 120}]
    seats = [{"name": "huge", "need_mib": 110, "avoid_gpus": ["b"]}]
    with pytest.raises(PlacementInfeasible) as refused:
        place(gpus, seats)
    assert "seat huge needs 110 MiB per GPU plus min_spare_mib 0; the roomiest GPU it may use, " \
           "a, has 100 MiB after pinned seats: short by 10 MiB" == str(refused.value)
    assert refused.value.seats == ["huge"]


def test_refuses_seats_confined_to_gpus_too_small_for_them_together():
    gpus = [{"id": "a", "capacity_mib": 100}, {"id": "b", "capacity_mib": 100},
            {"id": "c", "capacity_mib": 100}]
    seats = [{"name": "x", "need_mib": 70, "avoid_gpus": ["c"]},
             {"name": "y", "need_mib": 70, "avoid_gpus": ["c"]},
             {"name": "z", "need_mib": 70, "avoid_gpus": ["c"]}]
    with pytest.raises(PlacementInfeasible) as refused:
        place(gpus, seats, min_spare_mib=10)
    message = str(refused.value)
    assert message.startswith("GPUs a, b have 200 MiB besides the 0 MiB of pinned seats, but the "
                              "seats that may only use them (x, y, z) need 210 MiB plus "
                              "min_spare_mib 10 on each")
    assert refused.value.shortfall_mib == 30 and refused.value.gpus == ["a", "b"]


def test_refuses_seats_that_fit_in_total_but_not_as_whole_seats():
    gpus = [{"id": "a", "capacity_mib": 100}, {"id": "b", "capacity_mib": 100}]
    seats = [{"name": n, "need_mib": 60} for n in ("x", "y", "z")]
    with pytest.raises(PlacementInfeasible) as refused:
        place(gpus, seats)
    message = str(refused.value)
    assert "no placement leaves 0 MiB spare on every GPU; the best possible leaves a worst " \
           "spare of -20 MiB (short by 20 MiB)" in message
    assert "In total the seats need 180 MiB of the 200 MiB" in message
    assert refused.value.shortfall_mib == 20 and len(refused.value.gpus) == 1
    assert len(refused.value.seats) == 2


@pytest.mark.parametrize("gpus, seats, message", [
    ([], [], "gpus: expected a non-empty list"),
    ([{"id": "a", "capacity_mib": 10}, {"id": "a", "capacity_mib": 10}], [],
     "gpu a: id: expected unique GPU ids, a appears twice"),
    ([{"id": "a", "capacity_mib": -1}], [], "gpu a: capacity_mib: expected a non-negative integer, got -1"),
    ([{"id": "a", "capacity_mib": 10, "keep_clear": "yes"}], [],
     "gpu a: keep_clear: expected true or false, got 'yes'"),
    ([{"id": "a", "capacity_mib": 10}], [{"name": "x", "need_mib": 1}, {"name": "x", "need_mib": 1}],
     "seat x: name: expected unique seat names, x appears twice"),
    ([{"id": "a", "capacity_mib": 10}], [{"name": "x", "need_mib": "9GiB"}],
     "seat x: need_mib: expected a non-negative integer, got '9GiB'"),
    ([{"id": "a", "capacity_mib": 10}], [{"name": "x", "need_mib": 1, "gpu": "b"}],
     "seat x: gpu: expected one of the GPU ids a, got 'b'"),
    ([{"id": "a", "capacity_mib": 10}], [{"name": "x", "need_mib": 1, "current_gpu": "z"}],
     "seat x: current_gpu: expected one of the GPU ids a, got 'z'"),
    ([{"id": "a", "capacity_mib": 10, "keep_clear": True}, {"id": "b", "capacity_mib": 10}],
     [{"name": "x", "need_mib": 1, "gpu": "a"}],
     "seat x: gpu: expected a GPU that is not kept clear, a is kept clear"),
    ([{"id": "a", "capacity_mib": 10}, {"id": "b", "capacity_mib": 10}],
     [{"name": "x", "need_mib": 1, "gpu": "a", "avoid_gpus": ["a"]}],
     "seat x: gpu: pinned to a, which its avoid_gpus also lists"),
    ([{"id": "a", "capacity_mib": 10}, {"id": "b", "capacity_mib": 10}],
     [{"name": "x", "need_mib": 1, "gpu": ["a"], "gpu_count": 2}],
     "seat x: gpu: expected 2 GPU(s) for gpu_count 2, got 1"),
    ([{"id": "a", "capacity_mib": 10}, {"id": "b", "capacity_mib": 10, "keep_clear": True}],
     [{"name": "tp", "need_mib": 1, "gpu_count": 2}],
     "seat tp: gpu_count: needs 2 distinct GPUs but may only use 1 (a)"),
    ([{"id": "a", "capacity_mib": 10}], [{"name": "x", "need_mib": 1, "gpu_count": 0}],
     "seat x: gpu_count: expected a positive integer, got 0"),
    ([{"id": "a", "capacity_mib": 10}], ["x"], "seats[0]: expected a mapping with name and need_mib"),
])
def test_bad_input_is_one_clear_error(gpus, seats, message):
    with pytest.raises(PlacementError) as refused:
        place(gpus, seats)
    assert message in str(refused.value)
    assert not isinstance(refused.value, PlacementInfeasible)


def test_every_input_problem_is_reported_at_once():
    with pytest.raises(PlacementError) as refused:
        place([{"id": "a", "capacity_mib": 10}],
              [{"name": "x", "need_mib": -1}, {"name": "y", "need_mib": 1, "gpu": "q"}],
              min_spare_mib="lots")
    message = str(refused.value)
    for part in ("min_spare_mib: expected an integer", "seat x: need_mib", "seat y: gpu"):
        assert part in message


def test_the_shortfall_counts_a_pinned_seats_share_of_the_gpus():
    """Found by hypothesis: a two-GPU seat pinned across the binding GPU takes 11 MiB of it, so
    the two confined seats (50 MiB) are 1 MiB short of its 49, not 10 MiB over."""
    gpus = [{"id": "g0", "capacity_mib": 60}, {"id": "g1", "capacity_mib": 60},
            {"id": "g2", "capacity_mib": 60, "keep_clear": True}]
    seats = [{"name": "s0", "need_mib": 22, "avoid_gpus": ["g0"]},
             {"name": "s2", "need_mib": 11, "gpu_count": 2, "gpu": ["g0", "g1"]},
             {"name": "s3", "need_mib": 28, "avoid_gpus": ["g0"]}]
    with pytest.raises(PlacementInfeasible) as refused:
        place(gpus, seats)
    assert refused.value.shortfall_mib == 1 and refused.value.gpus == ["g1"]
    assert "GPUs g1 have 49 MiB besides the 11 MiB of pinned seats" in str(refused.value)
