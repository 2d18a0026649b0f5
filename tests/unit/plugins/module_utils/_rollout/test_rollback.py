"""Where a rollback left a host: every file and every touched seat, judged from the rollback's
results and what docker lists afterwards."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.rollback import (
    RollbackError,
    rollback_outcome,
)

ROOT = "/srv/compose"


def _journaled(seat, env_changed=True, created=False):
    def entry(name, changed):
        path = "%s/%s/%s" % (ROOT, seat, name)
        return {"path": path, "changed": changed, "created": created and changed,
                "backup": None if created or not changed else path + ".bak-20261201-rebal"}
    return {".env": entry(".env", env_changed), "compose.yaml": entry("compose.yaml", created)}


def _restored(seat, journaled, failed_msg=None):
    result = {"item": {"key": seat, "value": journaled}, "changed": failed_msg is None}
    if failed_msg:
        result["msg"] = failed_msg
    else:
        result["files"] = {name: {"path": e["path"], "changed": e["changed"]}
                           for name, e in journaled.items()}
    return result


def test_a_complete_rollback():
    journal = {"gamma": _journaled("gamma"), "delta": _journaled("delta", created=True),
               "beta": _journaled("beta", env_changed=False)}
    outcome = rollback_outcome(
        journal, [_restored(seat, files) for seat, files in journal.items()],
        removed=[{"item": "delta", "changed": True}], brought_back=[{"item": "gamma", "changed": True}],
        states={"gamma": "running (healthy)", "beta": "running (healthy)"},
        running_before=["beta", "gamma"], touched=["delta", "gamma"], timeout=1800)
    assert outcome["complete"] and outcome["problems"] == []
    states = {(f["seat"], f["file"]): f["state"] for f in outcome["files"]}
    assert states == {("beta", ".env"): "as before", ("beta", "compose.yaml"): "as before",
                      ("delta", ".env"): "removed", ("delta", "compose.yaml"): "removed",
                      ("gamma", ".env"): "restored", ("gamma", "compose.yaml"): "as before"}
    assert [(s["seat"], s["wanted"], s["state"]) for s in outcome["seats"]] == [
        ("delta", "absent", "absent"), ("gamma", "running and healthy", "running (healthy)")]


def test_a_seat_not_healthy_in_time_and_files_that_could_not_be_restored_are_named():
    journal = {"gamma": _journaled("gamma"), "alpha": _journaled("alpha")}
    outcome = rollback_outcome(
        journal, [_restored("gamma", journal["gamma"]),
                  _restored("alpha", journal["alpha"], failed_msg="restore..env: backup gone")],
        removed=[], brought_back=[{"item": "gamma", "changed": False,
                                   "msg": "Error response: container gamma is not healthy"}],
        states={"gamma": "running (health: starting)"},
        running_before=["alpha", "gamma"], touched=["alpha", "gamma"], timeout=15)
    assert not outcome["complete"]
    by_file = {(f["seat"], f["file"]): f for f in outcome["files"]}
    assert by_file[("alpha", ".env")]["state"] == "NOT restored"
    assert by_file[("alpha", ".env")]["detail"] == "restore..env: backup gone"
    assert by_file[("gamma", ".env")]["ok"]
    seats = {s["seat"]: s for s in outcome["seats"]}
    assert seats["gamma"]["detail"] == "not healthy within the rollback's 15 s"
    assert seats["alpha"] == {"seat": "alpha", "wanted": "running and healthy", "state": "absent",
                              "ok": False, "detail": "not started: its files could not be restored"}
    assert outcome["problems"] == [
        "alpha .env: NOT restored (restore..env: backup gone)",
        "alpha compose.yaml: NOT restored (restore..env: backup gone)",
        "alpha: wanted running and healthy, is absent (not started: its files could not be restored)",
        "gamma: wanted running and healthy, is running (health: starting) "
        "(not healthy within the rollback's 15 s)"]


def test_a_seat_that_exited_says_what_compose_said():
    journal = {"gamma": _journaled("gamma")}
    outcome = rollback_outcome(
        journal, [_restored("gamma", journal["gamma"])], removed=[],
        brought_back=[{"item": "gamma", "changed": True, "msg": "container gamma exited (1)\n"}],
        states={"gamma": "exited: Exited (1) 2 seconds ago"}, running_before=["gamma"],
        touched=["gamma"], timeout=1800)
    (gamma,) = outcome["seats"]
    assert (gamma["state"], gamma["ok"], gamma["detail"]) == (
        "exited: Exited (1) 2 seconds ago", False, "container gamma exited (1)")


def test_inputs_that_are_not_the_tasks_results_are_refused():
    with pytest.raises(RollbackError, match="restore: expected the journal's"):
        rollback_outcome([], [], [], [], {}, [], [], 1)
    with pytest.raises(RollbackError, match="expected a loop's results"):
        rollback_outcome({}, ["gamma"], [], [], {}, [], [], 1)
    with pytest.raises(RollbackError, match="states: expected seat_runtime_info's seats"):
        rollback_outcome({}, [], [], [], ["gamma running"], [], [], 1)
