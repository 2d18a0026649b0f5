"""seat_gates' main() for the phases its action plugin computes on the controller: the same
result as the action's work (one function behind both), and the same refusals."""

from __future__ import annotations


import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from support.module_args import run_main

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import (
    SEAT_GATES_REQUIRED_IF,
    SEAT_GATES_SPEC,
    seat_gates as computed,
)
from ansible_collections.llmfleet.seats.plugins.modules import seat_gates

U0, U1 = "GPU-0", "GPU-1"
CARDS = {"gpus": [{"index": 0, "uuid": U0, "memory_total_mib": 81559, "memory_free_mib": 80000, "processes": []},
                  {"index": 1, "uuid": U1, "memory_total_mib": 81559, "memory_free_mib": 900, "processes": []}]}
PLAN_GPUS = [{"index": 0, "uuid": U0, "spare_mib": 40000}, {"index": 1, "uuid": U1, "spare_mib": 2000}]
SEATS = [{"name": "asr", "engine": "fixed", "gpus": [U0], "footprint_mib": 3840},
         {"name": "tts", "engine": "fixed", "gpus": [U1], "footprint_mib": 3840}]


def run(capsys, **args):
    return run_main(seat_gates.main, capsys, args)


def here(**args):
    validation = ArgumentSpecValidator(SEAT_GATES_SPEC, required_if=SEAT_GATES_REQUIRED_IF).validate(args)
    assert not validation.error_messages
    return computed(validation.validated_parameters)


@pytest.mark.parametrize("args", [
    {"phase": "before_start", "seats": SEATS, "cards": CARDS},
    {"phase": "after_boot_memory", "plan_gpus": PLAN_GPUS, "gpus": [U0, U1], "cards": CARDS},
    {"phase": "plateau", "plan_gpus": PLAN_GPUS, "gpus": [U0], "cards": CARDS},
    {"phase": "after_boot_memory", "plan_gpus": PLAN_GPUS, "gpus": [U0, U1], "cards": CARDS, "spare_gate": False},
], ids=["before_start", "after_boot_memory", "plateau", "margin_alone"])
def test_the_module_and_the_controller_give_one_result(capsys, args):
    code, result = run(capsys, **args)
    assert result == here(**args)
    assert code == (1 if result.get("failed") else 0)
    wanted = [True] if args["phase"] == "plateau" else [True, True] if "spare_gate" in args else [True, False]
    assert [g["ok"] for g in result["gates"]] == wanted


def test_a_computed_phase_without_its_cards_is_refused(capsys):
    code, result = run(capsys, phase="plateau", plan_gpus=PLAN_GPUS)
    assert code == 1 and result["msg"] == "phase is plateau but all of the following are missing: cards"
