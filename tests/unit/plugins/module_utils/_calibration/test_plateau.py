"""gpu_plateau's edges, against a local HTTP server standing where Prometheus would: what it
refuses before it asks anything, a window's report as its input, and a card without series. The
figures themselves are held to a real Prometheus in tests/integration/test_gpu_plateau_prometheus.py."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plateau import GPU_PLATEAU_SPEC, gpu_plateau
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import PrometheusError
from support.local_http import canned as serving

GPU0 = "GPU-5b0c6e8e-0000-4000-8000-000000000000"


def params(url, **change):
    defaults = {key: spec.get("default") for key, spec in GPU_PLATEAU_SPEC.items()}
    defaults.update(prometheus_url=url, gpus=[{"index": 0, "uuid": GPU0, "spare_mib": 512}], since=1.8e9, at=1.8e9 + 7200)
    return dict(defaults, **change)


@pytest.mark.parametrize("change, message", [
    ({"gpus": [{"uuid": "0"}]}, "gpus[0].uuid: expected the card's UUID (GPU-...), got '0'"),
    ({"gpus": [{"uuid": GPU0, "spare_mib": "lots"}]}, "gpus[0].spare_mib: expected the plan's spare at plateau"),
    ({"at": 1.8e9 + 60}, "at: the plateau is read after since + settle (1h after 1800000000); at 1800000060 is before that"),
    ({"since": float("nan")}, "since: expected a time in Unix seconds (a finite number > 0), got nan"),
    ({"settle": "an hour"}, "settle: expected a duration such as 90s"),
    ({"creep_mib_per_hour": float("inf")}, "creep_mib_per_hour: expected a finite number >= 0, got inf"),
    ({"margin_mib": -1}, "margin_mib: expected MiB >= 0, got -1"),
    ({"gpus": None, "since": None}, "gpus and since: expected the host's cards and when the window ended, or report"),
])
def test_what_cannot_be_asked_is_refused_in_one_line_before_any_query(change, message):
    with serving() as server:
        with pytest.raises(PrometheusError, match="^" + re.escape(message)):
            gpu_plateau(params(server.url, **change))
        assert server.asked == []


def test_a_windows_report_gives_when_it_ended_and_the_plans_cards(tmp_path):
    report = tmp_path / "report.json"
    window = {"status": "applied", "finished": "2027-01-15T08:00:00Z",
              "plan": {"gpus": [{"index": 0, "uuid": GPU0, "spare_mib": 60}]}}
    report.write_text(json.dumps({"run_id": "r1", "check_mode": False, "hosts": {"fv-ml1": window}}))
    with serving() as server:
        result = gpu_plateau(params(server.url, gpus=None, since=None, report=str(report), host="fv-ml1"))
        with pytest.raises(PrometheusError, match="report: .* has no window of host fv-ml2 .each run writes its own"):
            gpu_plateau(params(server.url, gpus=None, since=None, report=str(report), host="fv-ml2"))
    assert result["window"]["since"] == 1800000000.0  # 2027-01-15T08:00:00Z
    card = result["gpus"][0]
    assert (card["predicted_spare_mib"], card["metrics"]) == (60, False)
    assert card["detail"] == "no DCGM_FI_DEV_FB_USED series with UUID %s after the boot transient" % GPU0
    assert 'UUID="%s"' % GPU0 in server.asked[0]["query"], "the UUID went in as a quoted PromQL string"


@pytest.mark.parametrize("check_mode, status, why", [
    (True, "planned", "a dry run"), (False, "rolled_back", "rolled_back"), (False, "failed", "failed")])
def test_a_window_that_left_no_plan_in_place_is_not_what_the_cards_are_held_to(tmp_path, check_mode, status, why):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"run_id": "r1", "check_mode": check_mode, "hosts": {"fv-ml1": {
        "status": status, "finished": "2027-01-15T08:00:00Z", "plan": {"gpus": [{"index": 0, "uuid": GPU0}]}}}}))
    with serving() as server:
        with pytest.raises(PrometheusError, match=re.escape("holds a window of host fv-ml1 that left no plan in place "
                                                            "(%s)" % why)):
            gpu_plateau(params(server.url, gpus=None, since=None, report=str(report), host="fv-ml1"))
        assert server.asked == []


@pytest.mark.parametrize("own_headroom_seat, below_margin", [(None, True), ("big", False)])
def test_the_margin_is_not_asked_of_a_card_a_seat_claims_whole(own_headroom_seat, below_margin):
    # every query answers 100: 100 MiB free at the plateau, under the 512 MiB margin
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [1.8e9 + 7200, "100"]}]}}).encode()
    gpus = [{"index": 0, "uuid": GPU0, "spare_mib": 100, "own_headroom_seat": own_headroom_seat}]
    with serving(body=body) as server:
        card = gpu_plateau(params(server.url, gpus=gpus, margin_mib=512))["gpus"][0]
    assert card["least_free_mib"] == 100
    assert any("below the margin of 512 MiB" in flag for flag in card["flags"]) is below_margin
    assert any(flag.startswith("still creeping") for flag in card["flags"]), "the creep is judged on every card"
