# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common import defaults
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import ladder


def climb(values, passes):
    """The ladder's search against an oracle; the rungs tried, in order."""
    results, tried = {}, []
    while True:
        value = ladder.next_rung(values, results)
        if value is None:
            return tried, results
        assert value not in results, "a rung is tried once"
        results[value] = passes(value)
        tried.append(value)


def test_the_grid_runs_from_what_fits_now_to_the_upper_end_on_the_step():
    assert ladder.rungs(16384, 40960, 4096) == [16384, 20480, 24576, 28672, 32768, 36864, 40960]
    assert ladder.rungs(16384, 30000, 8192) == [16384, 24576, 30000]
    assert ladder.rungs(4096, 4096, 4096) == [4096]
    with pytest.raises(ladder.LadderError, match="ladder_high: expected at least what the seat runs now"):
        ladder.rungs(32768, 16384, 4096)
    with pytest.raises(ladder.LadderError, match="ladder_step: expected a positive integer"):
        ladder.rungs(1, 2, 0)


@pytest.mark.parametrize("seed", range(200))
def test_the_bisection_finds_the_last_passing_rung_in_few_windows(seed):
    rng = random.Random(seed)
    values = ladder.rungs(8192, 8192 + 4096 * rng.randint(0, 40), 4096)
    threshold = rng.choice(values)  # every rung up to it passes
    tried, results = climb(values, lambda value: value <= threshold)
    assert max(v for v in [values[0]] + tried if results.get(v, True)) == threshold
    assert len(tried) <= math.ceil(math.log2(len(values))) + 1


def test_the_upper_end_is_tried_first_and_the_seed_night_is_three_windows():
    values = ladder.rungs(16384, 40960, 4096)
    tried, _results = climb(values, lambda value: value <= 28672)
    assert tried == [40960, 28672, 32768]
    tried, _results = climb(values, lambda value: True)
    assert tried == [40960], "the whole range fits: one window"


def test_a_failed_rung_says_what_failed():
    def section(*failed, error=""):
        return {"gates": [{"seat": "z", "gate": g, "ok": False, "detail": "d"} for g in failed]
                + [{"seat": "z", "gate": "health", "ok": True}], "error": error}
    assert ladder.failure_kind(section("runtime_probe", "memory_per_rank")) == "oom at runtime"
    assert ladder.failure_kind(section("no_oom", "health")) == "oom at boot"
    assert ladder.failure_kind(section("vllm_startup_check")) == "startup check"
    assert ladder.failure_kind(section("health")) == "health"
    assert ladder.failure_kind(section("kv_cache_tokens")) == "gate kv_cache_tokens"
    assert ladder.failure_kind(section(error="the plan refused it")) == "refused: the plan refused it"


PLAN = {"gpus": [{"uuid": "GPU-a", "spare_mib": 1000}, {"uuid": "GPU-b", "spare_mib": 300}],
        "seats": [{"name": "z", "gpus": ["GPU-a", "GPU-b"], "kv_rule": "pinned 4 GiB", "kv_cache_tokens": 58240,
                   "max_model_len": 16384, "kv_cache_memory_bytes": 4 << 30, "launch": {"max_num_seqs": 8}},
                  {"name": "s", "gpus": ["GPU-a"], "kv_rule": "rule 1.25x", "kv_cache_tokens": 40960,
                   "max_model_len": 32768, "kv_cache_memory_bytes": 1 << 30, "launch": {}}]}


def test_the_upper_end_is_the_arithmetic_s():
    assert ladder.upper_bound(PLAN, "z", "max_model_len", 262144) == 58240, "a pinned budget holds 58,240"
    assert ladder.upper_bound(PLAN, "s", "max_model_len", 131072) == 131072, "a sized budget grows"
    assert ladder.upper_bound(PLAN, "z", "max_num_seqs") == 3
    assert ladder.upper_bound(PLAN, "z", "kv_cache_memory_bytes") == (4 << 30) + 300 * 2 ** 20, "the smaller spare"
    assert ladder.current_value(PLAN, "z", "max_num_seqs") == 8
    with pytest.raises(ladder.LadderError, match="seat s: the model's published context window is unknown"):
        ladder.upper_bound(PLAN, "s", "max_model_len", None)
    with pytest.raises(ladder.LadderError, match="seat: expected one of the plan's seats"):
        ladder.upper_bound(PLAN, "nope", "max_model_len", 1)


def test_a_rung_changes_one_seat_s_knob_and_nothing_else():
    seats = [{"name": "z", "max_model_len": 16384}, {"name": "s", "max_model_len": 4096}]
    assert ladder.with_knob(seats, "z", "max_model_len", 28672) == [
        {"name": "z", "max_model_len": 28672}, {"name": "s", "max_model_len": 4096}]
    assert seats[0]["max_model_len"] == 16384
    with pytest.raises(ladder.LadderError, match="ladder_knob: expected one of"):
        ladder.with_knob(seats, "z", "block_size", 16)
    with pytest.raises(ladder.LadderError, match="seat: expected the name of one of the host's llmfleet_seats"):
        ladder.with_knob(seats, "x", "max_model_len", 1)


def test_the_result_keeps_the_best_passing_rung_and_says_what_to_change():
    records = [{"value": 40960, "passed": False}, {"value": 28672, "passed": True}, {"value": 32768, "passed": False}]
    out = ladder.result("z", "max_model_len", 4096, ladder.rungs(16384, 40960, 4096), records)
    assert (out["best"], out["before"], out["suggested"]) == (28672, 16384, {"seat": "z", "max_model_len": 28672})
    none = ladder.result("z", "max_model_len", 4096, [16384, 20480], [{"value": 20480, "passed": False}])
    assert (none["best"], none["suggested"]) == (16384, None)


def test_a_radiance_seats_pool_ladder_moves_the_ttm_variables_with_the_pool():
    plan = {"seats": [{"name": "archon", "engine": "radiance", "host_pool_mib": 30720,
                       "host_pool_rungs": [{"host_pool_mib": 30720}, {"host_pool_mib": 31744}]}], "gpus": []}
    assert ladder.upper_bound(plan, "archon", "host_pool_mib") == 31744
    with pytest.raises(ladder.LadderError, match="ladder_knob: expected host_pool_mib for a radiance seat, got .max_model_len."):
        ladder.upper_bound(plan, "archon", "max_model_len")
    seat = {"name": "archon", "host_pool_mib": 30720, "tensor_parallel_size": 2, "ttm_min_mib": 68000,
            "ttm_target_mib": 70000}
    rung = ladder.with_knob([seat], "archon", "host_pool_mib", 32768)[0]
    assert (rung["host_pool_mib"], rung["ttm_min_mib"], rung["ttm_target_mib"]) == (32768, 72096, 74096)


SEATS = {"twin1": [{"name": "alpha", "engine": "vllm"}, {"name": "asr", "engine": "fixed"}],
         "twin2": [{"name": "rad", "engine": "radiance"}], "twin3": None}


def test_the_ladders_own_variables_are_checked_all_at_once_by_their_names():
    assert ladder.options_problems("alpha", SEATS, "max_model_len", "4096", "0", "/tmp/r") == []
    assert ladder.options_problems("rad", SEATS, "host_pool_mib", 1024, 0, "/tmp/r") == []
    assert ladder.options_problems("asr", SEATS, "max_model_len", "1e3", "1e6", "") == [
        "seat asr: ladder_knob: a fixed seat has no knob to ladder (its memory is its cap)",
        "ladder_step: expected a whole number in the knob's unit (0: the knob's own step), got '1e3'",
        "ladder_high: expected a whole number in the knob's unit (0: the arithmetic's upper end), got '1e6'",
        "llmfleet_report_dir: expected a directory on the controller for ladder.json, got ''"]
    assert ladder.options_problems("rad", SEATS, "max_num_seqs", 1, 0, "/r") == [
        "seat rad: ladder_knob: expected host_pool_mib for a radiance seat, got 'max_num_seqs'"]
    assert ladder.options_problems("alpha", SEATS, "host_pool_mib", 1, 0, "/r") == [
        "seat alpha: ladder_knob: expected max_model_len or max_num_seqs or kv_cache_memory_bytes for a vllm "
        "seat, got 'host_pool_mib'"]
    assert ladder.options_problems("nope", SEATS, "max_model_len", 1, 0, "/r", "twin1") == [
        "seat: expected the name of a seat of twin1 (alpha, asr, rad), got 'nope'"]
    assert ladder.options_problems("alpha", SEATS, "max_model_len", 1, 10 ** 15, "/r") == [
        "ladder_step: expected a step that makes at most 10000 rungs up to ladder_high 1000000000000000, got 1"]
    # 0: the knob's own step, and the rungs it would make are counted with it
    assert ladder.options_problems("alpha", SEATS, "kv_cache_memory_bytes", "0", 10 ** 9, "/r") == [
        "ladder_step: expected a step that makes at most 10000 rungs up to ladder_high 1000000000, got 4096"]
    assert ladder.options_problems("rad", SEATS, "host_pool_mib", 0, 0, "/r") == []


def test_without_a_step_each_knob_climbs_by_its_own():
    assert [ladder.step_of(knob, 0) for knob in ladder.KNOBS] == [
        defaults.LADDER_STEPS[knob] for knob in ladder.KNOBS] == [4096, 4096, 4096, 1024]
    assert ladder.step_of("host_pool_mib", None) == 1024 and ladder.step_of("max_model_len", "8192") == 8192
    with pytest.raises(ladder.LadderError, match="ladder_knob: expected one of max_model_len"):
        ladder.step_of("context", 0)
    with pytest.raises(ladder.LadderError, match="ladder_step: expected a whole number of at least 0"):
        ladder.step_of("max_model_len", "4k")


def test_a_seat_without_the_knob_and_a_grid_too_large_are_refused_before_they_are_built():
    plan = {"seats": [{"name": "asr", "engine": "fixed"}, {"name": "alpha", "engine": "vllm"}]}
    with pytest.raises(ladder.LadderError, match="seat asr: ladder_knob: a fixed seat has no knob"):
        ladder.planned_seat(plan, "asr", "max_model_len")
    with pytest.raises(ladder.LadderError, match="ladder_step: expected a step that makes at most 10000 rungs"):
        ladder.rungs(1, 10 ** 15, 1)
    with pytest.raises(ladder.LadderError, match="ladder_high: expected a whole number of at least 0"):
        ladder.whole_number("1e6", "ladder_high", 0)
    assert ladder.whole_number(" 4096 ", "ladder_step", 1) == 4096
