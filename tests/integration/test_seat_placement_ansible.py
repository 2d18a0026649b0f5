"""llmfleet.seats.seat_placement through the real `ansible` command: an fv-ml1-shaped host
(three RTX PRO 6000s, GPU 3 kept clear, parakeet pinned to GPU 0) and a refusal."""

from __future__ import annotations

import itertools
import json

from conftest import run_ansible

FV_ML1_GPUS = [{"id": "GPU-%d" % i, "capacity_mib": 97887, "keep_clear": i == 3} for i in range(4)]


def seat_placement(args):
    """`ansible localhost -m llmfleet.seats.seat_placement -a JSON`, parsed with the json callback."""
    proc = run_ansible(["ansible", "localhost", "-m", "llmfleet.seats.seat_placement",
                        "-a", json.dumps(args)],
                       extra_env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                                  "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    plays = json.loads(proc.stdout)["plays"]
    return proc.returncode, plays[0]["tasks"][0]["hosts"]["localhost"]


def test_ad_hoc_run_places_an_fv_ml1_shaped_host():
    # needs at plateau in MiB; the seats run as seed 000 left them
    seats = [
        {"name": "parakeet-nemo", "need_mib": 3840, "gpu": "GPU-0", "current_gpu": "GPU-0"},
        {"name": "cyberprev", "need_mib": 30100, "current_gpu": "GPU-0"},
        {"name": "erp-seat", "need_mib": 17400, "current_gpu": "GPU-0"},
        {"name": "voices", "need_mib": 21900, "current_gpu": "GPU-0"},
        {"name": "coder", "need_mib": 20500, "current_gpu": "GPU-0"},
        {"name": "gen-small", "need_mib": 18700, "current_gpu": "GPU-1"},
        {"name": "meromero-rp", "need_mib": 41900, "current_gpu": "GPU-1"},
        {"name": "intern-decision", "need_mib": 26200, "current_gpu": "GPU-1"},
        {"name": "embed", "need_mib": 3400},
    ]
    rc, result = seat_placement({"gpus": FV_ML1_GPUS, "seats": seats, "min_spare_mib": 1024})
    assert rc == 0, result
    assert result["optimal"] is True and result["changed"] is False
    assert result["assignment"]["parakeet-nemo"] == "GPU-0"
    assert "GPU-3" not in result["assignment"].values() and result["spare_mib"]["GPU-3"] == 97887
    used = {gpu: 0 for gpu in ("GPU-0", "GPU-1", "GPU-2")}
    for seat in seats:
        used[result["assignment"][seat["name"]]] += seat["need_mib"]
    assert {gpu: 97887 - mib for gpu, mib in used.items()} == \
        {gpu: result["spare_mib"][gpu] for gpu in used}
    assert (result["worst_spare_mib"], len(result["moves"])) == best_by_enumeration(seats)


def best_by_enumeration(seats):
    """(best worst spare >= 1024, fewest moves) over every split of the unpinned seats."""
    loose = [s for s in seats if "gpu" not in s]
    best = None
    for split in itertools.product(("GPU-0", "GPU-1", "GPU-2"), repeat=len(loose)):
        used = {"GPU-0": 3840, "GPU-1": 0, "GPU-2": 0}
        for seat, gpu in zip(loose, split):
            used[gpu] += seat["need_mib"]
        worst = min(97887 - mib for mib in used.values())
        moves = sum(1 for seat, gpu in zip(loose, split) if seat.get("current_gpu", gpu) != gpu)
        if best is None or (-worst, moves) < (-best[0], best[1]):
            best = (worst, moves)
    return best


def test_ad_hoc_run_refuses_with_the_gpu_and_the_shortfall():
    rc, result = seat_placement({
        "gpus": FV_ML1_GPUS,
        "seats": [{"name": "parakeet-nemo", "need_mib": 3840, "gpu": "GPU-0"},
                  {"name": "meromero-rp", "need_mib": 95000, "gpu": "GPU-0"}]})
    assert rc != 0 and result["failed"] is True
    assert result["msg"] == ("GPU GPU-0: the seats pinned to it (parakeet-nemo, meromero-rp) need "
                             "98840 MiB and min_spare_mib is 0, but it has 97887 MiB: short by 953 MiB")
    assert result["shortfall_mib"] == 953 and result["short_gpus"] == ["GPU-0"]
