"""The rebalance role's filters."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.seats.plugins.filter.rebalance import FilterModule

FILTERS = FilterModule().filters()

UNCHANGED = {"path": "/c/a/.env", "changed": False, "created": False, "backup": None}
CHANGED = {"path": "/c/a/.env", "changed": True, "created": False, "backup": "/c/a/.env.bak-20261005-rebal"}
CREATED = {"path": "/c/b/.env", "changed": True, "created": True, "backup": None}


def test_a_dead_runs_changes_win_file_by_file():
    this_run = {"a": {".env": UNCHANGED, "compose.yaml": dict(CHANGED, path="/c/a/compose.yaml",
                                                              backup="/c/a/compose.yaml.bak-x")},
                "c": {".env": dict(CHANGED, path="/c/c/.env", backup="/c/c/.env.bak-20261005-rebal")}}
    adopted = {"a": {".env": CHANGED, "compose.yaml": dict(UNCHANGED, path="/c/a/compose.yaml")},
               "b": {".env": CREATED}}
    merged = FILTERS["journal_files"](this_run, adopted)
    assert merged["a"][".env"] is CHANGED, "the dead run's backup holds the original"
    assert merged["a"]["compose.yaml"]["backup"] == "/c/a/compose.yaml.bak-x", "this run changed it"
    assert merged["b"][".env"] is CREATED and merged["c"] == this_run["c"]
    assert FILTERS["changed_seat_files"](merged) == ["a", "b", "c"]
    assert FILTERS["seat_file_backups"](merged) == [
        "/c/a/.env.bak-20261005-rebal", "/c/a/compose.yaml.bak-x", "/c/c/.env.bak-20261005-rebal"]


def test_smoke_results_become_gates():
    gates = FILTERS["smoke_gates"]([{"model": "char-rp", "check": "reasoning", "ok": False,
                                     "detail": "reasoning landed in content", "latency_s": 1.5,
                                     "reasoning_key": None}])
    assert gates == [{"seat": "route char-rp", "gate": "gateway_reasoning", "ok": False,
                      "measured": {"latency_s": 1.5, "reasoning_key": None}, "expected": "ok",
                      "detail": "reasoning landed in content"}]


def _result(model, check, ok, detail=""):
    return {"model": model, "check": check, "ok": ok, "detail": detail, "latency_s": 0.1, "reasoning_key": None}


def test_the_gateway_baseline_passes_a_broken_route_only_when_the_operator_named_it():
    baseline = [_result("char-rp", "reasoning", False, "reasoning landed in content"), _result("coder", "chat", True)]
    gates = FILTERS["smoke_gates"](baseline, phase="before")
    assert [(g["seat"], g["gate"], g["ok"]) for g in gates] == [
        ("route char-rp", "gateway_reasoning_before", False), ("route coder", "gateway_chat_before", True)]
    accepted = FILTERS["smoke_gates"](baseline, accepted=["char-rp"], phase="before")
    assert accepted[0]["ok"] and accepted[0]["detail"] == (
        "broken before the window too, accepted (seat_rebalance_gateway_broken_routes): reasoning landed in content")


def test_after_the_window_a_check_says_whether_it_passed_before():
    baseline = [_result("char-rp", "reasoning", False, "inline think"), _result("coder", "chat", True)]
    after = [_result("char-rp", "reasoning", False, "inline think"), _result("coder", "chat", False, "HTTP 500")]
    unnamed = FILTERS["smoke_gates"](after, before=baseline)
    assert [(g["ok"], g["detail"]) for g in unnamed] == [
        (False, "broken before the window: inline think"), (False, "passed before the window: HTTP 500")]
    named = FILTERS["smoke_gates"](after, before=baseline, accepted=["char-rp", "coder"])
    assert named[0]["ok"] and not named[1]["ok"], "an accepted route the window broke still fails"
    assert named[1]["detail"] == "passed before the window: HTTP 500"


def test_cards_summary_names_who_holds_memory():
    cards = {"gpus": [{"index": 0, "uuid": "GPU-0", "memory_total_mib": 100, "memory_used_mib": 60,
                       "memory_free_mib": 40, "processes": [
                           {"pid": 1, "used_mib": 50, "compose_service": "coder"},
                           {"pid": 7, "used_mib": 10}]}]}
    assert FILTERS["cards_summary"](cards)[0]["holders_mib"] == {"coder": 50, "pid 7": 10}


@pytest.mark.parametrize("bad", [None, [], "x"])
def test_bad_input_is_refused_by_name(bad):
    with pytest.raises(AnsibleFilterError, match="journal_files"):
        FILTERS["journal_files"](bad, {})
    with pytest.raises(AnsibleFilterError, match="changed_seat_files"):
        FILTERS["changed_seat_files"](bad)
