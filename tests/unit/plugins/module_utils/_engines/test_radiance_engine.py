"""The radiance engine behind the seam: its inventory checks, the plan's refusals (the ledger,
the cards it claims whole, one knob per window), and its boot ledger read and gated."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import REPO_ROOT

from ansible_collections.llmfleet.seats.plugins.module_utils._common.gate import failed
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import radiance
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.radiance_log import RadianceLogError, parse_ledger
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import PlanError, build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import SeatSpecError, normalize_host
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, systemd

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-radiance"
HOST = yaml.safe_load((FLEET / "host_vars" / "twin1.yml").read_text())


def seats(**archon):
    return [dict(seat, **archon) if seat["name"] == "archon" else dict(seat) for seat in HOST["llmfleet_seats"]]


def plan(seat_list=None, **options):
    return build_plan("twin1", HOST["llmfleet_gpus"], seat_list or seats(), inventory_dir=str(FLEET), **options)


def archon_of(made):
    return {seat["name"]: seat for seat in made["seats"]}["archon"]


def test_the_plan_funds_the_seat_from_its_profile_on_its_own_cards():
    made = plan(min_spare_mib=512)
    archon = archon_of(made)
    assert (archon["capacity_mib"], archon["kv_tokens"], archon["binding"]) == (24517, 209488, "supply")
    assert archon["gpu_indices"] == [1, 2] and archon["footprint_mib"] == 26624 - 96
    cards = {gpu["index"]: gpu for gpu in made["gpus"]}
    assert cards[1]["spare_mib"] == 96 and cards[1]["own_headroom_seat"] == "archon"
    assert made["worst_spare_mib"] == cards[0]["spare_mib"], "the cards it claims whole are out of the placement"
    assert archon["launch"]["tensor_parallel_size"] == 2 and archon["pin_ok"]


@pytest.mark.parametrize("change, problem", [
    ({"gpu": None}, "llmfleet_seats[1].gpu: expected the seat's cards"),
    ({"placement": "a b"}, "llmfleet_seats[1].placement: expected radiance's expert placement"),
    ({"checkpoint_slots": -1}, "llmfleet_seats[1].checkpoint_slots: expected an integer from 0 to 16777216"),
    ({"host_pool_mib": "30G"}, "llmfleet_seats[1].host_pool_mib: expected an integer from 1 to 67108864"),
    ({"ttm_min_mib": float("inf")}, "llmfleet_seats[1].ttm_min_mib: expected an integer from 1 to 67108864"),
    ({"placement": "auto\n--vram-kv-mib 1"}, "llmfleet_seats[1].placement: expected radiance's expert placement"),
    ({"placement": "$(reboot)"}, "llmfleet_seats[1].placement: expected radiance's expert placement"),
    ({"model_profile": "models/x\n.json"}, "llmfleet_seats[1].model_profile: expected the model's radiance profile"),
    ({"model": "/srv/m; rm -rf /"}, "llmfleet_seats[1].model: expected the model's path in the image"),
    ({"kv_cache_memory_bytes": "8GiB"}, "llmfleet_seats[1].kv_cache_memory_bytes: expected a known field for a "
                                        "radiance seat"),
])
def test_inventory_problems_name_the_seat_and_field(change, problem):
    raw = [dict(seat) for seat in seats(**change)]
    for seat in raw:
        for key in [k for k, v in seat.items() if v is None]:
            del seat[key]
    with pytest.raises(SeatSpecError) as refused:
        normalize_host("twin1", HOST["llmfleet_gpus"], raw)
    assert "host twin1: seat archon: " + problem in str(refused.value)


def test_a_ledger_ttm_min_does_not_cover_is_refused_before_planning():
    with pytest.raises(PlanError, match=r"seat archon: the pinned-RAM ledger: TTM_MIN_MIB 67,000 is below"):
        plan(seats(ttm_min_mib=67000))


def test_a_profile_that_is_not_one_is_refused_naming_the_term(tmp_path):
    profile = json.loads((FLEET / "models" / "radiance-moe" / "radiance.json").read_text())
    (tmp_path / "p.json").write_text(json.dumps(dict(profile, static_weight_mib=1)))
    with pytest.raises(PlanError, match="static_weight_mib: expected one of .* \\(unknown term\\)"):
        plan(seats(model_profile=str(tmp_path / "p.json")))
    (tmp_path / "q.json").write_text(json.dumps(dict(profile, printed_experts_mib="11G")))
    with pytest.raises(PlanError, match="printed_experts_mib: expected an integer from 0 to 67108864, got '11G'"):
        plan(seats(model_profile=str(tmp_path / "q.json")))


def test_no_other_seat_may_sit_on_a_card_it_claims_whole():
    crowded = seats() + [{"name": "asr", "engine": "fixed", "memory_cap_bytes": "1GiB", "image": "asr:1",
                          "port": 8190, "gpu": 1}]
    with pytest.raises(PlanError, match="seat asr is pinned to GPU GPU-7a1c0003-0000-4000-8000-000000000002, "
                                        "which seat archon claims whole"):
        plan(crowded)


def _running(**knobs):
    """A reading of the cards with archon's container running with ``knobs``."""
    args = ["/srv/models/radiance-moe"]
    values = {"max_num_seqs": 4, "max_model_len": 65536, "gpu_headroom_mib": 96, "host_pool_mib": 30720,
              "prefix_cache_mib": 2048, "placement": "auto", "checkpoint_slots": "auto"}
    values.update(knobs)
    for flag, field in radiance._FLAG_FIELDS:
        args += [flag, str(values[field])]
    gpus = []
    for gpu in HOST["llmfleet_gpus"]:
        processes = [{"pid": 7, "used_mib": 26528, "seat": "archon", "image": "llmfleet/radiance:1.8.1",
                      "args": args}] if gpu["index"] in (1, 2) else []
        gpus.append({"index": gpu["index"], "uuid": gpu["uuid"], "memory_total_mib": gpu["memory_total_mib"],
                     "memory_used_mib": sum(p["used_mib"] for p in processes), "memory_reserved_mib": 0,
                     "memory_free_mib": gpu["memory_total_mib"] - sum(p["used_mib"] for p in processes),
                     "processes": processes})
    return {"gpus": gpus, "source": "nvml"}


def test_the_pool_and_the_placement_never_move_in_one_window():
    with pytest.raises(PlanError, match=r"changes the KV pool \(HOST_POOL_MIB 30720 -> 31744\) and the expert "
                                        r"placement \(auto -> resident\) at once"):
        plan(seats(host_pool_mib=31744, ttm_min_mib=70000, ttm_target_mib=72000, placement="resident"),
             cards=_running())
    assert archon_of(plan(seats(placement="resident"), cards=_running()))["placement"] == "resident"


def test_a_shrinking_pool_warns_of_preempted_sequences_and_credits_the_running_pin():
    made = plan(seats(host_pool_mib=29696), cards=_running())
    assert any("the KV pool shrinks from" in w and "deploy at low traffic" in w for w in made["warnings"])
    assert archon_of(made)["running_pin_ledger_mib"] == 67455.84
    assert not any("shrinks" in w for w in plan(seats(host_pool_mib=31744, ttm_min_mib=70000, ttm_target_mib=72000),
                                                cards=_running())["warnings"])


LOG = """\
radiance[1]: radiance 1.8.1 serving /srv/models/radiance-moe (tp 2, placement auto)
radiance[1]: VRAM budget, per card: [0] 26624 MiB, [1] 27320 MiB
radiance[1]: claimable: 24517 MiB a card = card total 26624 - already held 512 - ...
radiance[1]: elastic: 18373 MiB a card = claimable 24517 - static weights 6144
radiance[1]: experts / kv cache: 11008 MiB / 7365.00 MiB a card (expert floor 11008 MiB)
radiance[1]: kv: the cache can grow to 7.19 GiB a card -- 209488 tokens of context, 3 sessions at 65536
radiance[1]: pinned host memory: 67455.84 MiB (2 x host pool 30720 + ...); TTM limit 70000 MiB
radiance[1]: [0] pools: vram_kv 7722565632 bytes (13093 blocks of 16 tokens), experts 11008 MiB, free 96 MiB
radiance[1]: [1] pools: vram_kv 7722565632 bytes (13093 blocks of 16 tokens), experts 11008 MiB, free 792 MiB
radiance[1]: mover: 3 slots can be lent out of the activation arena (987 MiB)
radiance[1]: mover: lent 1 slots (329.00 MiB) to the expert slab
radiance[1]: mover: lent 1 slots (329.00 MiB) to the expert slab
"""


def test_the_boot_ledger_is_read_and_gated_against_the_plan():
    archon = archon_of(plan())
    ledger = parse_ledger("old run\n" + LOG.replace("7722565632", "1") + LOG)
    assert ledger["pools"] == {0: 7722565632, 1: 7722565632}, "the last boot only"
    assert (ledger["version"], ledger["mover_lent_slots"], ledger["mover_lent_mib"]) == ("1.8.1", 2, 658.0)
    gates = radiance.ledger_gates(archon, ledger)
    assert not failed(gates), failed(gates)
    mover = {g["gate"]: g for g in gates}["mover"]
    assert "re-borrowed 2 slots (658.0 MiB)" in mover["detail"]
    lost = radiance.ledger_gates(archon, parse_ledger(LOG.replace(
        "[1] pools: vram_kv 7722565632", "[1] pools: vram_kv 7183597568")))
    assert [g["gate"] for g in failed(lost)] == ["vram_kv"]
    assert "not [1] (7,183,597,568 bytes): the knob lost to another claim" in failed(lost)[0]["detail"]


def test_a_log_without_a_ledger_says_what_it_says():
    with pytest.raises(RadianceLogError, match="no boot ledger .* it says: ERROR radiance: --vram-kv-mib"):
        parse_ledger("t ERROR radiance: --vram-kv-mib: no longer exists in radiance 1.8.1\n")


def test_the_host_gate_reads_the_hosts_ram():
    archon = archon_of(plan())
    ok = radiance.host_gates(archon, {"host_memory": {"total_mib": 98304, "available_mib": 96256}})
    assert ok[0]["ok"]
    short = radiance.host_gates(dict(archon, running_pin_ledger_mib=10000),
                                {"host_memory": {"total_mib": 98304, "available_mib": 50000}})
    assert not short[0]["ok"] and "(with the 10,000 MiB the seat pins now)" in short[0]["detail"]
    assert not radiance.host_gates(archon, {})[0]["ok"]


class _Client:
    def __init__(self, limit):
        self.limit, self.asked = limit, []

    def call_json(self, method, path, body, timeout=None):
        tokens = len(body["messages"][0]["content"].split()) + body["max_tokens"]
        self.asked.append(tokens)
        return (200, {}) if tokens <= self.limit else (400, {"error": "too long"})


class _Host:
    runtime_probe_fraction, health_timeout = 0.9, 5

    def __init__(self, limit):
        self._client = _Client(limit)

    def client(self, seat):
        return self._client


def test_the_depth_probe_passes_within_the_cache_and_wants_a_refusal_past_it():
    archon = dict(archon_of(plan()), kv_tokens=50000)  # fewer tokens than max_model_len: the cache is the depth
    host = _Host(50000)
    assert not failed(radiance.probe_gates(archon, host))
    assert host._client.asked == [int(50000 * 0.9), 50000 + 16]
    lenient = radiance.probe_gates(archon, _Host(10 ** 6))
    assert [g["gate"] for g in failed(lenient)] == ["probe_refusal"], "an engine that admits past its cache fails"


def test_both_runtimes_render_the_env_files_knobs_and_refer_to_them():
    archon = archon_of(plan())
    files = compose.render(archon, "twin1")
    env = dict(line.split("=", 1) for line in files[".env"].splitlines() if "=" in line and not line.startswith("#"))
    assert (env["HOST_POOL_MIB"], env["MAX_SEQS"], env["PLACEMENT"], env["TTM_MIN_MIB"]) == (
        "'30720'", "'4'", "'auto'", "'68000'")
    service = yaml.safe_load(files["compose.yaml"])["services"]["archon"]
    assert service["environment"] == {"TTM_MIN_MIB": "${TTM_MIN_MIB:?}", "TTM_TARGET_MIB": "${TTM_TARGET_MIB:?}"}
    assert service["command"][service["command"].index("--host-pool-mib") + 1] == "${HOST_POOL_MIB:?}"
    assert "30720" not in files["compose.yaml"], "the numbers live in the .env alone"
    serve = systemd.render(archon, "twin1", None, "/srv/compose/archon")["serve.sh"]
    assert "--env TTM_MIN_MIB \\" in serve and '--host-pool-mib "${HOST_POOL_MIB:?}"' in serve
