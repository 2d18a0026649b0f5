"""gpu_plateau's edges, against a local HTTP server standing where Prometheus would: what it
refuses before it asks anything, a window's report as its input, and a card without series. The
figures themselves are held to a real Prometheus in tests/integration/test_gpu_plateau_prometheus.py."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plateau import (
    GPU_PLATEAU_SPEC,
    gpu_plateau,
    planned_footprints,
    plateau_snapshot,
    seat_verdicts,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import read_snapshot_file, seat_mib
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
    ({"prometheus_url": None}, "prometheus_url: expected the Prometheus that scrapes the host's DCGM exporter "
                               "(or source=beszel and beszel_url)"),
    ({"source": "beszel", "beszel_url": "fv-mon:8090", "beszel_system": "abc123"},
     "beszel_url: expected an http:// or https:// URL, got 'fv-mon:8090'"),
    ({"source": "beszel", "beszel_url": "http://fv-mon:8090"}, "beszel_system: expected with source=beszel"),
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


def _card(uuid, index, plateau, least_free, spare=None):
    return {"index": index, "uuid": uuid, "metrics": True, "transient_peak_used_mib": plateau, "plateau_used_mib": plateau,
            "least_free_mib": least_free, "creep_mib_per_hour": 0.0, "predicted_spare_mib": spare, "settled": True,
            "flags": [], "detail": ""}


GPU1 = "GPU-5b0c6e8e-0000-4000-8000-000000000001"
READING = {"source": "nvml", "driver_version": "580.95.05", "gpus": [
    {"index": 0, "uuid": GPU0, "memory_total_mib": 97887, "memory_used_mib": 50780, "memory_free_mib": 46575,
     "memory_reserved_mib": 532, "attributed_mib": 50480, "unattributed_mib": 300,
     "processes": [{"pid": 11, "used_mib": 20480, "seat": "gen-small", "container": "vllm-gen-small"},
                   {"pid": 12, "used_mib": 30000, "compose_service": "coder", "container": "fv-coder-1"}]},
    {"index": 1, "uuid": GPU1, "memory_total_mib": 97887, "memory_used_mib": 200, "memory_free_mib": 97155,
     "memory_reserved_mib": 532, "processes": []}]}


def test_a_seat_above_its_footprint_flags_its_card_and_one_not_running_is_named():
    cards = [_card(GPU0, 0, 50780, 46575), _card(GPU1, 1, 200, 97155)]
    planned = planned_footprints([{"name": "gen-small", "gpus": [GPU0], "footprint_mib": 19000},
                                  {"name": "coder", "gpus": [GPU0], "footprint_mib": 29800},
                                  {"name": "judge", "gpus": [GPU1], "footprint_mib": 8000}])
    verdicts = seat_verdicts(READING, cards, planned, tolerance_mib=512)
    assert [(v["seat"], v["held_mib"], v["over_plan_mib"]) for v in verdicts] == [
        ("coder", 30000, 200), ("gen-small", 20480, 1480), ("judge", None, None)]
    # 200 MiB over is within the tolerance; 1,480 is not
    assert cards[0]["flags"] == ["seat gen-small holds 20,480 MiB, 1,480 MiB above its planned footprint of 19,000 MiB"]
    assert cards[1]["flags"] == ["seat judge is not in the host's reading of this card (planned 8,000 MiB)"]


def test_the_snapshot_is_the_reading_raised_to_the_plateau_and_the_next_plan_reads_it(tmp_path):
    # GPU 0 held 700 MiB more at its plateau than the reading shows now; GPU 1 no more
    cards = [_card(GPU0, 0, 51480, 45800, spare=47000), _card(GPU1, 1, 150, 97205)]
    cards[0]["flags"].append("45800 MiB free at the plateau, 1200 MiB below the plan's predicted spare")
    window = {"since": 1.8e9, "settle_s": 3600, "at": 1.8e9 + 86400}
    snapshot = plateau_snapshot(READING, cards, [], "fv-ml1", window)
    path = tmp_path / "plateau-fv-ml1.json"
    path.write_text(json.dumps(snapshot))
    kept = read_snapshot_file(str(path))   # the format the plan reads
    gpu0, gpu1 = kept["gpus"]
    assert (gpu0["memory_used_mib"], gpu0["memory_free_mib"], gpu0["unattributed_mib"]) == (51480, 45800, 1000)
    assert gpu0["plateau_above_reading_mib"] == 700 and gpu1["plateau_above_reading_mib"] == 0
    assert gpu1["memory_used_mib"] == 200, "a reading above the plateau is kept as read"
    assert seat_mib(kept) == {"gen-small": {GPU0: 20480}, "coder": {GPU0: 30000}}, "each seat's share is as read"
    assert (kept["host"], kept["taken_at"], kept["source"]) == ("fv-ml1", "2027-01-16T08:00:00Z", "nvml")
    assert kept["watch"]["window"]["settled_from"] == "2027-01-15T09:00:00Z" and kept["watch"]["flagged"] == [0]
    assert kept["watch"]["gpus"][0]["flags"] == cards[0]["flags"]


@pytest.mark.parametrize("change, message", [
    ({"reading": {"gpus": "none"}}, "reading: expected a gpu_info result with a gpus list"),
    ({"reading": READING, "host": None}, "host: expected the inventory host the reading is of, with reading"),
    ({"reading": READING, "host": "fv-ml1", "seats": [{"name": "x", "gpus": [GPU0]}]},
     "seats[0]: expected a plan's seat with its name, gpus (UUIDs) and footprint_mib"),
])
def test_a_reading_or_seats_it_cannot_hold_to_the_plan_are_refused_before_any_query(change, message):
    with serving() as server:
        with pytest.raises(PrometheusError, match="^" + re.escape(message)):
            gpu_plateau(params(server.url, **dict({"host": "fv-ml1"}, **change)))
        assert server.asked == []
