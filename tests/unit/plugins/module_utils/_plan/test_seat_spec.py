"""seat_spec: the fv-ml1 inventory in normal form (GPU references as UUIDs, sizes in bytes,
the KV rule and its exceptions), and bad input reported all at once, each problem naming the
host, the seat and the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import (
    SeatSpecError,
    gateway_seats,
    normalize_host,
    seat_secrets,
)

FV_ML1 = yaml.safe_load((Path(__file__).resolve().parents[5] / "inventories" / "fv-ml1" /
                         "host_vars" / "fv-ml1.yml").read_text())
UUID = {gpu["index"]: gpu["uuid"] for gpu in FV_ML1["llmfleet_gpus"]}
GIB, MIB = 1024 ** 3, 1024 ** 2


def spec_of(seats, gpus=None):
    return normalize_host("fv-ml1", gpus or FV_ML1["llmfleet_gpus"], seats,
                          FV_ML1["llmfleet_kv_factor"])


def problems(seats, gpus=None):
    with pytest.raises(SeatSpecError) as refused:
        spec_of(seats, gpus)
    return str(refused.value)


def vllm_seat(**fields):
    seat = {"name": "gen-small", "engine": "vllm", "model": "Qwen/Qwen3.5-2B",
            "model_config": "models/qwen3.5-2b/config.json", "max_model_len": 262144,
            "image": "vllm/vllm-openai:v0.33.0", "port": 8011}
    seat.update(fields)
    return seat


def test_the_fv_ml1_inventory_in_normal_form():
    spec = spec_of(FV_ML1["llmfleet_seats"])
    seats = {seat["name"]: seat for seat in spec["seats"]}
    assert [gpu["keep_clear"] for gpu in spec["gpus"]] == [False, False, False, True]
    # seed 000's exceptions: meromero and gen-small keep Prime's pins, voices gets 1.07x
    assert seats["meromero-rp"]["kv_cache_memory_bytes"] == 22 * GIB
    assert seats["gen-small"]["kv_cache_memory_bytes"] == int(5.5 * GIB)
    assert (seats["voices"]["kv_rule"], seats["voices"]["kv_factor"]) == ("exception", 1.07)
    assert (seats["coder"]["kv_rule"], seats["coder"]["kv_factor"]) == ("rule", 1.25)
    assert seats["parakeet-nemo"]["memory_cap_bytes"] == 3840 * MIB
    assert seats["parakeet-nemo"]["gpu"] == [UUID[0]]  # "leave parakeet on GPU 0", by UUID
    # the 2026-10-05 2249 layout, indices turned into UUIDs
    assert seats["gen-small"]["current_gpu"] == [UUID[1]]
    assert seats["cyberprev"]["current_gpu"] == [UUID[0]]
    for seat in spec["seats"]:
        assert all(ref.startswith("GPU-") for ref in (seat["gpu"] or []) + (seat["current_gpu"] or []))


def test_references_by_index_or_uuid_agree_and_tp_seats_take_n_gpus():
    by_index = spec_of([vllm_seat(gpu=[1, 2], current_gpu=[2, 1], avoid_gpus=[0],
                                  tensor_parallel_size=2)])["seats"][0]
    by_uuid = spec_of([vllm_seat(gpu=[UUID[1], UUID[2]], current_gpu=[UUID[2], UUID[1]],
                                 avoid_gpus=[UUID[0]], tensor_parallel_size=2)])["seats"][0]
    assert by_index == by_uuid
    assert by_index["gpu"] == [UUID[1], UUID[2]] and by_index["gpu_count"] == 2
    assert by_index["avoid_gpus"] == [UUID[0]]


def test_defaults_are_filled_in():
    seat = spec_of([vllm_seat()])["seats"][0]
    assert seat["kv_cache_dtype"] == "auto" and seat["tensor_parallel_size"] == 1
    assert seat["served_model_names"] == ["gen-small"] and seat["extra_args"] == []
    assert seat["kv_rule"] == "rule" and seat["kv_factor"] == 1.25
    assert seat["gpu"] is None and seat["current_gpu"] is None


def test_every_problem_is_reported_at_once_with_host_seat_and_field():
    message = problems([
        vllm_seat(name="Gen", max_model_len=-3, port=70000, gpu=7, avoid_gpu=[1]),
        vllm_seat(name="both", port=8012, kv_cache_memory_bytes="8.5G", kv_factor=1.1),
        {"name": "asr", "engine": "fixed", "image": "i:1", "port": 8090, "gpu": 3},
        vllm_seat(name="tp", port=8013, tensor_parallel_size=2, gpu=[0]),
        vllm_seat(name="dup", port=8090),
        {"name": "e", "engine": "sglang"},
    ])
    expected = [
        "host fv-ml1: llmfleet_seats[0].name: expected lowercase letters, digits, '-' or '_'",
        "host fv-ml1: llmfleet_seats[0].avoid_gpu: expected a known field for a vllm seat (typo?), got [1]",
        "host fv-ml1: llmfleet_seats[0].port: expected an integer from 1 to 65535, got 70000",
        "host fv-ml1: llmfleet_seats[0].gpu: expected a GPU index (0, 1, 2, 3) or UUID of this host, got 7",
        "host fv-ml1: llmfleet_seats[0].max_model_len: expected an integer from 1 to 16777216, got -3",
        "host fv-ml1: seat both: llmfleet_seats[1].kv_cache_memory_bytes: expected either a pinned "
        "budget or kv_factor, not both",
        "host fv-ml1: seat both: llmfleet_seats[1].kv_cache_memory_bytes: '8.5G' mixes decimals "
        "with the binary suffix G",
        "host fv-ml1: seat asr: llmfleet_seats[2].memory_cap_bytes: expected the tenant's fixed memory cap",
        "host fv-ml1: seat asr: llmfleet_seats[2].gpu: expected a GPU that is not kept clear",
        "host fv-ml1: seat tp: llmfleet_seats[3].gpu: expected 2 GPU(s), one per tensor-parallel rank, got [0]",
        "host fv-ml1: seat e: llmfleet_seats[5].engine: expected 'vllm' or 'fixed' or 'radiance', got 'sglang'",
        "host fv-ml1: llmfleet_seats: port 8090 is used by seat asr (llmfleet_seats[2]) on 127.0.0.1:8090 and "
        "seat dup (llmfleet_seats[4]) on 127.0.0.1:8090; expected a different port or bind_address per seat "
        "(0.0.0.0 or :: holds the port on every address)",
    ]
    for line in expected:
        assert line in message
    assert message.startswith("%d problem(s) in the inventory:" % message.count("\n- "))
    assert "Traceback" not in message


def test_gpu_list_problems_name_the_entry_and_field():
    gpus = copy.deepcopy(FV_ML1["llmfleet_gpus"])
    gpus[1]["uuid"] = "nope"
    gpus[2]["memory_total_mib"] = 0
    gpus[3]["index"] = 0
    message = problems([], gpus)
    assert "host fv-ml1: llmfleet_gpus[1].uuid: expected a GPU UUID such as GPU-5a1c0c6e-..., got 'nope'" in message
    assert "host fv-ml1: llmfleet_gpus[2].memory_total_mib: expected an integer from 1 to 1073741824, got 0" in message
    assert "host fv-ml1: llmfleet_gpus.index: expected a different index per GPU, got 0" in message


def test_a_host_without_a_seat_list_is_refused():
    assert "host fv-ml1: llmfleet_seats: expected a list of seats, at least one" in problems("x")
    assert "host fv-ml1: llmfleet_seats: expected a list of seats, at least one" in problems([])


def test_seat_secrets_of_one_seat_or_of_every_seat():
    seats = [vllm_seat(name="coder", secret_environment={"HF_TOKEN": "hf_aaaaaaaa"}),
             vllm_seat(name="gen-small", environment={"UPSTREAM_API_KEY": "sk-bbbbbbbb", "LOG_LEVEL": "info"}),
             vllm_seat(name="plain")]
    defaults = {"vllm": {"secret_environment": {"SHARED_TOKEN": "tttttttt"}}}
    assert seat_secrets(seats, "coder") == {"HF_TOKEN": "hf_aaaaaaaa"}
    assert seat_secrets(seats, "nobody") == {}
    every = seat_secrets(seats, seat_defaults=defaults)
    assert every == {"coder": {"HF_TOKEN": "hf_aaaaaaaa"},  # its own secret_environment replaces the default one
                     "gen-small": {"UPSTREAM_API_KEY": "sk-bbbbbbbb", "SHARED_TOKEN": "tttttttt"},
                     "plain": {"SHARED_TOKEN": "tttttttt"}}
    assert all(seat_secrets(seats, name, defaults) == every[name] for name in every), "one seat's is its part of every seat's"


@pytest.mark.parametrize("first, second", [("127.0.0.1", "10.0.0.5"), ("::1", "127.0.0.1"), ("10.0.0.5", "fd00::5")])
def test_seats_on_one_port_and_different_addresses_do_not_clash(first, second):
    spec = spec_of([vllm_seat(name="a", port=9100, bind_address=first),
                    vllm_seat(name="b", port=9100, bind_address=second)])
    assert [(seat["bind_address"], seat["port"]) for seat in spec["seats"]] == [(first, 9100), (second, 9100)]


@pytest.mark.parametrize("first, second, shown", [
    ("127.0.0.1", "127.0.0.1", "127.0.0.1:9100 and seat b (llmfleet_seats[1]) on 127.0.0.1:9100"),
    ("0.0.0.0", "10.0.0.5", "0.0.0.0:9100 and seat b (llmfleet_seats[1]) on 10.0.0.5:9100"),
    ("10.0.0.5", "::", "10.0.0.5:9100 and seat b (llmfleet_seats[1]) on [::]:9100"),
    ("::", "0.0.0.0", "[::]:9100 and seat b (llmfleet_seats[1]) on 0.0.0.0:9100"),
])
def test_seats_on_one_port_clash_on_one_address_or_every_interface(first, second, shown):
    message = problems([vllm_seat(name="a", port=9100, bind_address=first),
                        vllm_seat(name="b", port=9100, bind_address=second)])
    assert message == (
        "1 problem(s) in the inventory:\n- host fv-ml1: llmfleet_seats: port 9100 is used by seat a "
        "(llmfleet_seats[0]) on %s; expected a different port or bind_address per seat (0.0.0.0 or :: holds "
        "the port on every address)" % shown)


def test_a_plans_seats_as_the_route_audit_takes_them_with_each_seats_own_key_alone():
    plan_seats = [
        {"name": "coder", "engine": "vllm", "port": 8012, "served_model_names": ["coder"], "max_model_len": 65536,
         "launch": {"max_new_tokens": 8192}},
        {"name": "asr", "engine": "fixed", "port": 8190, "launch": {}},
    ]
    secrets = {"coder": {"VLLM_API_KEY": "sk-coder", "HF_TOKEN": "hf-not-a-route-key"}, "asr": {"API_KEY": "x"}}
    assert gateway_seats(plan_seats, "10.251.50.54", secrets) == [
        {"name": "coder", "host": "10.251.50.54", "port": 8012, "served_model_names": ["coder"],
         "max_model_len": 65536, "max_new_tokens": 8192, "api_key": "sk-coder"},
        {"name": "asr", "host": "10.251.50.54", "port": 8190, "served_model_names": [],
         "max_model_len": None, "max_new_tokens": None, "api_key": None}]


def test_a_seat_the_plan_moves_to_another_port_is_found_where_it_ran():
    plan_seats = [{"name": "coder", "engine": "vllm", "port": 8112, "launch": {}},
                  {"name": "voices", "engine": "vllm", "port": 8013, "launch": {}},
                  {"name": "new", "engine": "vllm", "port": 8014, "launch": {}}]
    # what seat_runtime_info read before the window: a host's answer, so only a port counts
    published = {"coder": 8012, "voices": 8013, "new": "8014", "gone": 8015}
    seats = {seat["name"]: seat for seat in gateway_seats(plan_seats, "10.251.50.54", None, published)}
    assert (seats["coder"]["previous_host"], seats["coder"]["previous_port"]) == ("10.251.50.54", 8012)
    assert "previous_port" not in seats["voices"] and "previous_port" not in seats["new"]


def test_a_seat_replaces_one_no_longer_listed_and_the_plan_seat_says_which():
    spec = spec_of([vllm_seat(name="charrp-moe", replaces="charrp-dense")])
    assert spec["seats"][0]["replaces"] == "charrp-dense"
    assert spec_of([vllm_seat()])["seats"][0]["replaces"] is None


def test_what_a_seat_cannot_replace_is_refused_with_every_problem_at_once():
    message = problems([vllm_seat(name="charrp-moe", replaces="gen-small", port=8016),
                        vllm_seat(name="gen-small", replaces="Old Seat"),
                        vllm_seat(name="tp-seat", replaces="charrp-dense", runtime="systemd", port=8020),
                        vllm_seat(name="twin-a", replaces="gone", port=8021),
                        vllm_seat(name="twin-b", replaces="gone", port=8022)])
    assert ("host fv-ml1: seat charrp-moe: llmfleet_seats[0].replaces: expected a seat llmfleet_seats no longer "
            "lists (the replaced seat is kept dormant, not placed): remove gen-small from llmfleet_seats, got "
            "'gen-small'") in message
    assert "host fv-ml1: seat gen-small: llmfleet_seats[1].replaces: expected the name of the seat this one " \
           "takes the place of (lowercase letters" in message
    assert "llmfleet_seats[2].replaces: expected only on a compose seat" in message
    assert ("host fv-ml1: llmfleet_seats: seat gone is replaced by seat twin-a (llmfleet_seats[3]) and seat "
            "twin-b (llmfleet_seats[4]); expected one seat in its place") in message
    with pytest.raises(SeatSpecError, match=r"replaces: expected a seat that is not also retired"):
        normalize_host("fv-ml1", FV_ML1["llmfleet_gpus"], [vllm_seat(replaces="charrp-dense")],
                       retire=["charrp-dense"])
