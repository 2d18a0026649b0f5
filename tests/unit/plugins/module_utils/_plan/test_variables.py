"""The host's own variables: a misspelt llmfleet_*/seat_* name is refused with the nearest
known one, the known names being what the collection's roles, playbooks and inventory reference
read (the filter gathers them from the installed files), and a host name outside its grammar is
refused before it can reach a file."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.filter.seat import known_variables
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import inventory_problems

GPUS = [{"index": 0, "uuid": "GPU-7a1c0001-0000-4000-8000-000000000001", "memory_total_mib": 81559}]
SEATS = [{"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr:1", "port": 8190,
          "container_port": 8000}]


def problems(host="gpu1", seats=None, variables=()):
    return inventory_problems(host, GPUS, SEATS if seats is None else seats, variables=list(variables),
                              known_variables=known_variables())


def test_the_known_names_come_from_the_roles_playbooks_and_inventory_reference():
    known = known_variables()
    # read by the roles' defaults, declared in argument specs, documented in docs/inventory.md
    for name in ("llmfleet_gpus", "llmfleet_kv_factor", "llmfleet_gpu_profile", "llmfleet_report_dir",
                 "seat_plan_cards_source", "seat_rebalance_health_timeout", "seat_ladder_knob"):
        assert name in known, name
    assert not any(name.startswith("seat_plan_problems") for name in known), "private names are not the inventory's"


def test_typos_of_the_collections_variables_are_refused_with_the_nearest_name():
    found = problems(variables=["llmfleet_kv_facter", "llmfleet_gpu_profle", "seat_rebalance_health_timout",
                                "llmfleet_gpus", "ansible_host", "twin_gpus", "seat", "llmfleet_zzz_qqq"])
    assert found == [
        "host gpu1: llmfleet_gpu_profle: unknown variable of llmfleet.seats (did you mean llmfleet_gpu_profile?); "
        "expected a variable that docs/inventory.md or a role's argument spec names",
        "host gpu1: llmfleet_kv_facter: unknown variable of llmfleet.seats (did you mean llmfleet_kv_factor?); "
        "expected a variable that docs/inventory.md or a role's argument spec names",
        "host gpu1: llmfleet_zzz_qqq: unknown variable of llmfleet.seats (no variable of llmfleet.seats has "
        "this name); expected a variable that docs/inventory.md or a role's argument spec names",
        "host gpu1: seat_rebalance_health_timout: unknown variable of llmfleet.seats (did you mean "
        "seat_rebalance_health_timeout?); expected a variable that docs/inventory.md or a role's argument spec names",
    ]


def test_a_typo_is_reported_with_the_seats_problems_at_once():
    found = problems(seats=[dict(SEATS[0], port=0)], variables=["llmfleet_kv_facter"])
    assert len(found) == 2 and "llmfleet_kv_facter" in found[0] and "llmfleet_seats[0].port" in found[1]


def test_a_seats_problem_and_the_plans_options_are_reported_in_one_round():
    found = inventory_problems("gpu1", GPUS, [dict(SEATS[0], port=0)], kv_round_to="half", min_spare_mib=-1,
                               accept={"gpu_profil": "h100"}, variables=["llmfleet_kv_facter"],
                               known_variables=known_variables())
    assert len(found) == 5, found
    assert "host gpu1: llmfleet_kv_facter: unknown variable" in found[0]
    assert found[1] == "host gpu1: seat asr: llmfleet_seats[0].port: expected an integer from 1 to 65535, got 0"
    assert "host gpu1: seat_plan_min_spare_mib: expected an integer from 0 up, got -1" in found
    assert any(line.startswith("host gpu1: llmfleet_kv_round_to: cannot read 'half'") for line in found), found
    assert any(line.startswith("host gpu1: llmfleet_plan_accept: expected a dict with ") for line in found), found
    assert all("\n" not in line for line in found)


def test_the_plans_options_are_checked_against_the_gpus_beside_a_broken_seat():
    found = inventory_problems("gpu1", GPUS, [dict(SEATS[0], name="Bad")], boot_margin_mib=90000)
    assert len(found) == 2 and "llmfleet_seats[0].name" in found[0], found
    assert found[1] == ("host gpu1: seat_plan_boot_margin_mib: expected less than the smallest GPU (81559 MiB), "
                        "got 90000")


def test_a_host_name_outside_its_grammar_is_refused_on_one_line():
    for host in ("gpu1\nExecStartPre=/bin/touch /tmp/x", "gpu1\r", "-gpu", "gpu 1", "g\u00f6pu", "", "a" * 254):
        found = problems(host=host)
        assert len(found) == 1 and "inventory host name: expected a host name of letters, digits" in found[0], host
        assert "\n" not in found[0] and "\r" not in found[0]
        assert found[0].startswith("host %r: " % host)
    assert problems(host="gpu-1.fleet.example") == [] and problems(host="10.0.0.7") == []


def test_an_empty_seat_list_is_refused_in_the_plan():
    assert problems(seats=[]) == [
        "host gpu1: llmfleet_seats: expected a list of seats, at least one (a seat no longer wanted is listed in "
        "llmfleet_retire, a host with none left is not a GPU host of the play), got []"]
