"""The plan's output: its SVG (alone, and beside what the cards held after a window), and its
three files, each written only when it changes and only by seat_plan."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import (
    PlanOutputError,
    plan_svg,
    write_plan_files,
)

PLAN = {"host": "twin1", "worst_spare_mib": 40000, "optimal": True, "moves": [], "warnings": [], "seats": [
    {"name": "alpha", "gpus": ["GPU-a"], "footprint_mib": 30000}, {"name": "asr", "gpus": ["GPU-a"], "footprint_mib": 3840}],
    "gpus": [{"index": 0, "uuid": "GPU-a", "name": "H100", "total_mib": 81559, "keep_clear": False, "seats": ["alpha", "asr"],
              "background_mib": 500, "spare_mib": 47219, "spare_at_boot_mib": 46000}]}
AFTER = [{"index": 0, "uuid": "GPU-a", "memory_total_mib": 81559, "memory_used_mib": 35000, "memory_free_mib": 46559,
          "holders_mib": {"alpha": 30600, "asr": 3840, "pid 77": 560}}]


def test_the_window_svg_shows_what_the_cards_held_after_it_beside_the_plan():
    svg = plan_svg(PLAN, measured=AFTER)
    assert "planned at plateau, and measured after the window" in svg
    assert "<title>alpha: 30,000 MiB</title>" in svg and "<title>alpha: 30,600 MiB</title>" in svg
    assert "measured after the window: not ours 560 | alpha 30,600 | asr 3,840 | free 46,559 MiB" in svg
    assert "measured after the window: not read" in plan_svg(PLAN, measured=[])
    assert "measured" not in plan_svg(PLAN), "a plan alone shows the plan"


def test_the_plan_files_are_the_plans_own_and_written_when_they_change(tmp_path):
    out = tmp_path / "plans"
    changed, paths, diffs = write_plan_files(str(out), "twin1", PLAN, "# twin1\n", plan_svg(PLAN), False)
    names = ["twin1-plan.json", "twin1-plan.md", "twin1-plan.svg"]
    assert changed and paths == [str(out / name) for name in names]
    assert [d["after_header"] for d in diffs] == paths and all(d["before"] == "" for d in diffs)
    assert json.loads((out / "twin1-plan.json").read_text()) == PLAN
    assert (out / "twin1-plan.svg").read_text() == plan_svg(PLAN)
    assert write_plan_files(str(out), "twin1", PLAN, "# twin1\n", plan_svg(PLAN), False) == (False, paths, [])


def test_check_mode_writes_no_plan_file_and_a_file_is_no_directory(tmp_path):
    changed, _paths, _diffs = write_plan_files(str(tmp_path / "dry"), "twin1", PLAN, "#\n", "<svg/>\n", True)
    assert changed and not (tmp_path / "dry").exists()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(PlanOutputError, match="a-file: not a directory; name a directory for the plan files"):
        write_plan_files(str(tmp_path / "a-file"), "twin1", PLAN, "#\n", "<svg/>\n", False)
