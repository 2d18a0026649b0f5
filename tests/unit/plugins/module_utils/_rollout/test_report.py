"""The report a person reads after the window: each host's section merged into report.json,
report.md rendered from all of them, a second identical write changing nothing; and only the
report's own files, never the plan's."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import write_plan_files
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.report import ReportError, write_report

# a real plan: the report renders it with the plan's own Markdown and SVG
PLAN = build_plan("twin1", [{"index": 0, "uuid": "GPU-a", "name": "H100", "memory_total_mib": 81559}],
                  [{"name": "alpha", "engine": "fixed", "memory_cap_bytes": "30000MiB", "image": "alpha:1.0", "port": 8090},
                   {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr:1.0", "port": 8091}],
                  "/nonexistent")
AFTER = [{"index": 0, "uuid": "GPU-a", "memory_total_mib": 81559, "memory_used_mib": 35000, "memory_free_mib": 46559,
          "holders_mib": {"alpha": 30600, "asr": 3840, "pid 77": 560}}]
SECTION = {"status": "rolled_back", "error": "gate failed: gamma health", "gates": [
    {"seat": "gamma", "gate": "health", "ok": False, "measured": 503, "expected": 200,
     "detail": "GET /health answered 503 after 10 s (timeout 10 s)"}],
    "actions": ["started in wave 1: gamma", "files restored: gamma"], "backups": [],
    "rollback": {"complete": True, "problems": [], "files": [
        {"seat": "gamma", "file": ".env", "path": "/srv/compose/gamma/.env", "state": "restored",
         "ok": True, "detail": "from /srv/compose/gamma/.env.bak-20261201-rebal"}],
        "seats": [{"seat": "gamma", "wanted": "running and healthy", "state": "running (healthy)",
                   "ok": True, "detail": ""}]}}


def test_sections_merge_and_a_second_write_changes_nothing(tmp_path):
    changed, paths = write_report(str(tmp_path), "run-1", "twin1", SECTION, False, False)
    assert changed and paths == sorted([str(tmp_path / "report.json"), str(tmp_path / "report.md")])
    write_report(str(tmp_path), "run-1", "twin2", dict(SECTION, status="unchanged", rollback={}), False, False)
    report = json.loads((tmp_path / "report.json").read_text())
    assert sorted(report["hosts"]) == ["twin1", "twin2"] and report["run_id"] == "run-1"
    markdown = (tmp_path / "report.md").read_text()
    assert "| twin1 | **rolled_back** | 0/1 | gamma health |" in markdown
    assert "### Rollback: complete, the host is as it was" in markdown
    assert "| gamma | `.env` | restored | yes | from /srv/compose/gamma/.env.bak-20261201-rebal |" in markdown
    assert write_report(str(tmp_path), "run-1", "twin2", dict(SECTION, status="unchanged", rollback={}),
                        False, False)[0] is False
    # a new run starts a new report
    write_report(str(tmp_path), "run-2", "twin1", SECTION, False, False)
    assert list(json.loads((tmp_path / "report.json").read_text())["hosts"]) == ["twin1"]


def test_the_window_writes_its_own_files_and_none_of_the_plans(tmp_path):
    changed, paths = write_report(str(tmp_path), "run-1", "twin1", dict(SECTION, plan=PLAN, after=AFTER), False, False)
    assert changed and paths == sorted(str(tmp_path / name) for name in ("report.json", "report.md", "twin1.svg"))
    svg = (tmp_path / "twin1.svg").read_text()
    assert "measured after the window" in svg and "<title>alpha: 30,600 MiB</title>" in svg
    assert "| 0 `GPU-a` | alpha | fixed cap |" in (tmp_path / "report.md").read_text(), "the plan's own table"
    # seat_plan writes its files into the same directory; the window leaves them as they are
    _changed, plan_files, _diffs = write_plan_files(str(tmp_path), "twin1", PLAN, "# plan\n", "<svg/>\n", False)
    assert not set(plan_files) & set(paths), "one writer per file"
    assert (tmp_path / "twin1-plan.svg").read_text() == "<svg/>\n"
    write_report(str(tmp_path), "run-1", "twin1", dict(SECTION, plan=PLAN, after=AFTER), False, False)
    assert (tmp_path / "twin1-plan.svg").read_text() == "<svg/>\n"


def test_check_mode_writes_nothing(tmp_path):
    changed, _paths = write_report(str(tmp_path / "r"), "run-1", "twin1", SECTION, True, True)
    assert changed and not (tmp_path / "r").exists()


def test_a_bad_status_or_a_foreign_file_is_refused(tmp_path):
    with pytest.raises(ReportError, match="section.status: expected one of planned, unchanged"):
        write_report(str(tmp_path), "run-1", "twin1", dict(SECTION, status="done"), False, False)
    (tmp_path / "report.json").write_text("not json")
    with pytest.raises(ReportError, match="report.json is not a report"):
        write_report(str(tmp_path), "run-1", "twin1", SECTION, False, False)


def test_the_boots_show_each_seats_seconds_beside_the_floor(tmp_path):
    boots = {"elapsed_s": 66.0, "floor_s": 60.0, "seats": [
        {"seat": "coder", "gpus": ["GPU-a"], "after": [], "started_s": 0.0, "boot_s": 40.0, "outcome": "ready"},
        {"seat": "voices", "gpus": ["GPU-b"], "after": [], "started_s": 0.0, "boot_s": 30.0, "outcome": "ready"},
        {"seat": "small", "gpus": ["GPU-a"], "after": ["coder"], "started_s": 41.0, "boot_s": 20.0,
         "outcome": "ready"},
        {"seat": "late", "gpus": ["GPU-b"], "after": ["voices"], "started_s": None, "boot_s": None,
         "outcome": "not started"}]}
    write_report(str(tmp_path), "run-1", "twin1", dict(SECTION, boots=boots), False, False)
    markdown = (tmp_path / "report.md").read_text()
    assert ("66.0 s from the first start to the last seat done; the floor, the busiest GPU's boots "
            "one after another, is 60.0 s (1.10 x the floor).") in markdown
    assert "| small | GPU-a | coder | 41.0 | 20.0 | ready |" in markdown
    assert "| late | GPU-b | voices | - | - | not started |" in markdown

    failed = {"elapsed_s": 4.0, "floor_s": 0.0, "seats": [
        {"seat": "voices", "gpus": ["GPU-a"], "after": [], "started_s": 0.0, "boot_s": None, "outcome": "failed"}]}
    write_report(str(tmp_path), "run-2", "twin1", dict(SECTION, boots=failed), False, False)
    assert "4.0 s from the first start until the boots stopped; no seat finished its boot." in (
        tmp_path / "report.md").read_text()

    # a figure Ansible masked (a secret's value occurs in it) is shown as it came, not divided
    masked = dict(boots, elapsed_s="VALUE_SPECIFIED_IN_NO_LOG_PARAMETER", floor_s="********.5")
    write_report(str(tmp_path), "run-3", "twin1", dict(SECTION, boots=masked), False, False)
    assert ("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER s from the first start to the last seat done; the floor, the "
            "busiest GPU's boots one after another, is ********.5 s.") in (tmp_path / "report.md").read_text()


def test_what_the_gateways_clients_saw_is_shown_per_route(tmp_path):
    load = {"seconds": 74.3, "routes": [
        {"route": "alpha", "sent": 118, "failed": 0, "longest_gap_s": 1.41, "longest_gap_ended_at_s": 37.2,
         "failures": []},
        {"route": "alpha-solo", "sent": 96, "failed": 21, "longest_gap_s": 12.6, "longest_gap_ended_at_s": 40.1,
         "failures": ["HTTP 500: Connection error.", "HTTP 503: a | b"]}]}
    write_report(str(tmp_path), "run-1", "twin1", dict(SECTION, gateway_load=load), False, False)
    markdown = (tmp_path / "report.md").read_text()
    assert "### Through the gateway during the window\n\n74.3 s of requests on each route" in markdown
    assert "| alpha | 118 | 0 | 1.41 | 37.2 |  |" in markdown
    assert "| alpha-solo | 96 | **21** | 12.6 | 40.1 | HTTP 500: Connection error.; HTTP 503: a \\| b |" in markdown
    assert json.loads((tmp_path / "report.json").read_text())["hosts"]["twin1"]["gateway_load"] == load

    write_report(str(tmp_path), "run-2", "twin1", dict(SECTION, gateway_load={"error": "timed out"}), False, False)
    assert "The load through the gateway could not tell: timed out" in (tmp_path / "report.md").read_text()
    write_report(str(tmp_path), "run-3", "twin1", SECTION, False, False)
    assert "Through the gateway" not in (tmp_path / "report.md").read_text()


def test_the_gateways_routes_after_the_window_say_what_matched_and_what_did_not(tmp_path):
    routes = {"path": "/srv/litellm/config.yaml", "host": "10.251.50.54", "targets": [
        {"route": "alpha", "target": "http://10.251.50.54:8101/v1", "status": "ok", "detail": "seat alpha",
         "limits": {"max_input_tokens": 12288}},
        {"route": "alpha-solo", "target": "http://10.251.50.54:8101/v1", "status": "over_limit",
         "detail": "model_info.max_input_tokens 49152 is more than seat alpha serves (max_model_len 12288)",
         "limits": {"max_input_tokens": 12288}}]}
    write_report(str(tmp_path), "run-1", "twin1", dict(SECTION, gateway_routes=routes), False, False)
    markdown = (tmp_path / "report.md").read_text()
    assert "2 route(s) of /srv/litellm/config.yaml to this host's seats: **1 not as they should be**." in markdown
    assert "| alpha-solo | http://10.251.50.54:8101/v1 | **over_limit** | max_input_tokens: 12288 |" in markdown
    assert "the change it needs" not in markdown, "nothing to change is not a heading"
    change = {"route": "alpha-solo", "where": "model_list[1].model_info.max_input_tokens", "kind": "model_info",
              "line": 14, "old": 49152, "new": 12288}
    write_report(str(tmp_path), "run-1b", "twin1", dict(SECTION, gateway_routes=dict(routes, changes=[change])),
                 False, False)
    assert "- line 14, route alpha-solo, model_list[1].model_info.max_input_tokens: `49152` -> `12288`" in \
        (tmp_path / "report.md").read_text()
    # a config that names the host otherwise matches nothing: that is said, not "all as they should be"
    write_report(str(tmp_path), "run-2", "twin1", dict(SECTION, gateway_routes=dict(routes, targets=[])), False, False)
    markdown = (tmp_path / "report.md").read_text()
    assert "No route of /srv/litellm/config.yaml points at 10.251.50.54" in markdown
    assert "all as they should be" not in markdown
    write_report(str(tmp_path), "run-3", "twin1", dict(SECTION, gateway_routes={"path": "x", "error": "no such file"}),
                 False, False)
    assert "The routes could not be audited: no such file" in (tmp_path / "report.md").read_text()
