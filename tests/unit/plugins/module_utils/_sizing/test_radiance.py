"""radiance 1.8.1's funding formula and pinned-RAM ledger (_sizing.radiance), on the numbers of
a two-card tensor-parallel seat, each figure checked against the formula worked by hand."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.radiance import (
    CHECKPOINT_SLOT_MIB,
    RadianceError,
    funding,
    host_pool_rungs,
    knob_effects,
    pin_ledger,
    plane_from_ledger,
    radiance_budget,
)
from ansible_collections.llmfleet.seats.plugins.filter.radiance import radiance_budget as radiance_filter

MIB = 2 ** 20
TERMS = dict(card_total_mib=[26624, 27320], already_held_mib=512, drift_mib=64, gpu_headroom_mib=96, arena_mib=987,
             step_staging_mib=256, hw_queues_mib=64, prefetch_mib=128, static_weights_mib=6144, plane_mib=40960,
             spare_mib=512, unit_max_mib=384, host_pool_mib=30720, max_num_seqs=4, max_model_len=65536,
             kv_bytes_per_token=36864, block_size=16, tp=2, ple_table_mib=1024, prefix_cache_mib=2048,
             statics_arena_mib=2048, checkpoint_slots="auto", retained=1, ttm_min_mib=68000, ttm_target_mib=70000)


def test_the_formula_on_the_smallest_card():
    capacity = 26624 - 512 - 64 - 96 - 987 - 256 - 64 - 128
    elastic = capacity - 6144
    floor = min(40960 + 512, max(40960 + 2 * 384 - 30720, 0))
    kv_bytes = min(4 * 65536 * 36864, (elastic - floor) * MIB)
    blocks = kv_bytes // (16 * 36864)
    result = funding(TERMS)
    assert (result["capacity_mib"], result["elastic_mib"], result["expert_floor_mib"]) == (capacity, elastic, floor)
    assert (result["kv_bytes"], result["kv_blocks"], result["kv_tokens"]) == (kv_bytes, blocks, blocks * 16)
    assert result["vram_kv_bytes"] == blocks * 16 * 36864 and result["sessions"] == blocks * 16 // 65536
    assert result["binding"] == "supply" and result["binding_card"] == 0
    assert result["funded_fraction"] == round(blocks * 16 / (4 * 65536), 4)
    swapped = funding(dict(TERMS, card_total_mib=[27320, 26624]))
    assert swapped["binding_card"] == 1 and swapped["kv_tokens"] == result["kv_tokens"], "the smallest card binds"


def test_max_num_seqs_raises_demand_not_capacity():
    base, more = funding(TERMS), funding(dict(TERMS, max_num_seqs=8))
    assert more["kv_cap_tokens"] == 2 * base["kv_cap_tokens"]
    assert more["kv_tokens"] == base["kv_tokens"], "supply binds: the printed tokens stay put"


def test_the_host_pool_buys_cache_one_for_one_until_the_host_holds_the_plane():
    base, more = funding(TERMS), funding(dict(TERMS, host_pool_mib=30720 + 1024))
    assert base["expert_floor_mib"] - more["expert_floor_mib"] == 1024
    assert more["kv_bytes"] - base["kv_bytes"] == 1024 * MIB
    whole = 40960 + 2 * 384
    small = dict(TERMS, max_num_seqs=64)  # demand out of the way
    at_plane, beyond = funding(dict(small, host_pool_mib=whole)), funding(dict(small, host_pool_mib=whole + 640))
    assert at_plane["host_holds_plane"] and at_plane["expert_floor_mib"] == 0
    assert beyond["vram_kv_bytes"] == at_plane["vram_kv_bytes"], "+640 MiB of host RAM moves vram_kv by nothing"
    staged = funding(dict(TERMS, file_tier_staging_mib=1024))
    assert staged["expert_floor_mib"] == base["expert_floor_mib"] + 1024, "disk tiering's staging is not host room"


def test_demand_binds_when_the_card_has_room():
    result = funding(dict(TERMS, host_pool_mib=40960, max_num_seqs=2))
    assert result["binding"] == "demand" and result["kv_tokens"] == 2 * 65536 and result["funded_fraction"] == 1


def test_the_ledger_counts_each_rank_pool_and_the_checkpoint_slots_twice_per_sequence():
    ledger = pin_ledger(TERMS)
    slots = 4 * (1 + 1)
    assert ledger["checkpoint_slots"] == slots
    assert ledger["pin_ledger_mib"] == round(2 * 30720 + 1024 + 2048 + 2048 + slots * CHECKPOINT_SLOT_MIB, 2)
    assert ledger["pin_ok"] and ledger["pin_error"] is None
    bump = pin_ledger(dict(TERMS, max_num_seqs=5))
    assert round(bump["pin_ledger_mib"] - ledger["pin_ledger_mib"], 2) == round(2 * CHECKPOINT_SLOT_MIB, 2)
    fixed = pin_ledger(dict(TERMS, checkpoint_slots=3, max_num_seqs=5))
    assert fixed["checkpoint_slots"] == 3


def test_the_ledger_is_refused_naming_the_ttm_variable():
    low = pin_ledger(dict(TERMS, ttm_min_mib=67000))
    assert not low["pin_ok"] and low["pin_error"].startswith(
        "TTM_MIN_MIB 67,000 is below the pinned-RAM ledger 67,455.84 MiB (2 x HOST_POOL_MIB 30,720")
    assert low["pin_error"].endswith("raise TTM_MIN_MIB to at least 67,456 with the pool or the slots")
    tight = pin_ledger(dict(TERMS, ttm_target_mib=68000))
    assert not tight["pin_ok"] and tight["pin_error"].startswith(
        "TTM_TARGET_MIB 68,000 does not clear the pinned-RAM ledger 67,455.84 MiB by the slack of 1,024 MiB")
    assert tight["pin_error"].endswith("raise it to at least 68,480")


def test_what_each_knob_buys():
    effects = {effect["knob"]: effect for effect in knob_effects(TERMS)}
    step = funding(dict(TERMS, host_pool_mib=31744))["kv_tokens"] - funding(TERMS)["kv_tokens"]
    assert effects["HOST_POOL_MIB"]["kv_tokens"] == step > 0 and effects["HOST_POOL_MIB"]["pin_ledger_mib"] == 2048
    assert effects["MAX_SEQS"]["kv_tokens"] == 0 and effects["MAX_SEQS"]["kv_cap_tokens"] == 65536
    assert effects["GPU_HEADROOM_MIB"]["change"] == "96 -> 48" and effects["GPU_HEADROOM_MIB"]["kv_tokens"] > 0
    held = {e["knob"]: e for e in knob_effects(dict(TERMS, host_pool_mib=50000, max_num_seqs=64))}
    assert held["HOST_POOL_MIB"]["kv_tokens"] == 0 and "buys nothing" in held["HOST_POOL_MIB"]["why"]


def test_the_host_pool_ladder_stops_where_it_should():
    rungs = host_pool_rungs(TERMS, 250000)
    assert [r["host_pool_mib"] for r in rungs] == [30720, 31744, 32768] and rungs[-1]["stopped"] == "funded"
    capped = host_pool_rungs(TERMS, 250000, host_limit_mib=70000)
    assert capped[-1] == dict(capped[-1], host_pool_mib=31744, stopped="host_ram") and not capped[-1]["funded"]
    plane = host_pool_rungs(dict(TERMS, max_num_seqs=64), 10 ** 7)
    assert plane[-1]["stopped"] == "plane_on_host" and plane[-1]["host_pool_mib"] >= 40960 + 768


def test_the_plane_from_a_live_ledger():
    assert plane_from_ledger(11008, 30720, 384) == 40960
    derived = dict(TERMS)
    del derived["plane_mib"]
    assert radiance_budget(dict(derived, printed_experts_mib=11008))["plane_mib"] == 40960
    with pytest.raises(RadianceError, match="plane_mib: expected the expert plane"):
        radiance_budget(derived)


@pytest.mark.parametrize("change, field", [
    ({"card_total_mib": []}, "card_total_mib"), ({"host_pool_mib": -1}, "host_pool_mib"),
    ({"max_num_seqs": True}, "max_num_seqs"), ({"checkpoint_slots": "many"}, "checkpoint_slots"),
    ({"max_model_len": float("inf")}, "max_model_len"), ({"kv_bytes_per_token": 36864.5}, "kv_bytes_per_token"),
    ({"static_weights_mib": "6GiB"}, "static_weights_mib"), ({"card_total_mib": [26624, float("nan")]}, "card_total_mib")])
def test_bad_terms_name_the_field(change, field):
    with pytest.raises(RadianceError) as refused:
        radiance_budget(dict(TERMS, **change))
    assert refused.value.field == field and str(refused.value).startswith(field + ": expected")


def test_the_filter_takes_the_modules_arguments_and_defaults():
    given = {key: TERMS[key] for key in ("card_total_mib", "static_weights_mib", "plane_mib", "host_pool_mib",
                                         "max_num_seqs", "max_model_len", "kv_bytes_per_token", "ttm_min_mib",
                                         "ttm_target_mib")}
    result = radiance_filter(given)
    assert result["capacity_mib"] == 26624 - 96 and result["checkpoint_slots"] == 4
    with pytest.raises(RadianceError, match="hostpool: expected one of"):
        radiance_filter(given, hostpool=1)
    with pytest.raises(RadianceError, match="card_total_mib: expected a value"):
        radiance_filter({k: v for k, v in given.items() if k != "card_total_mib"})


@pytest.mark.parametrize("change, field, bound", [
    ({"plane_mib": 23 * 1024 ** 3}, "plane_mib", "an integer from 0 to 67108864 (MiB: was it written in bytes?)"),
    ({"host_pool_mib": 10 ** 18}, "host_pool_mib", "an integer from 0 to 67108864"),
    ({"card_total_mib": [26624, 27320 * MIB]}, "card_total_mib", "an integer from 1 to 1048576"),
    ({"arena_mib": 2 * 1024 ** 2}, "arena_mib", "an integer from 0 to 1048576"),
    ({"max_num_seqs": 10 ** 6}, "max_num_seqs", "an integer from 1 to 65536"),
    ({"max_model_len": 2 ** 30}, "max_model_len", "an integer from 1 to 16777216"),
])
def test_a_term_beyond_its_range_is_refused_naming_the_bound(change, field, bound):
    with pytest.raises(RadianceError) as refused:
        radiance_budget(dict(TERMS, **change))
    assert refused.value.field == field and refused.value.expected.startswith(bound)


def test_a_host_pool_ladder_too_long_is_refused_before_it_is_climbed():
    terms = dict(TERMS, host_pool_mib=1, plane_mib=60 * 1024 ** 2, target_tokens=10 ** 12)
    with pytest.raises(RadianceError, match=r"^host_pool_mib: expected a pool within 4096 rungs of 1024 MiB"):
        radiance_budget(terms)
