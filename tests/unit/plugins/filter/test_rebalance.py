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
