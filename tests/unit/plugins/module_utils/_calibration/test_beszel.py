"""gpu_plateau where the operator's monitoring is Beszel: a local HTTP server answers as a Beszel
hub's PocketBase API does (system_stats records, a page at a time, each GPU's mu and mt in MiB
divided by 1.024), and the plateau, least free memory and creep are the records' own."""

from __future__ import annotations

import re

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration import beszel
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plateau import GPU_PLATEAU_SPEC, gpu_plateau
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import PrometheusError
from support.beszel_hub import Hub, record as _record
from support.local_http import serving

GPU0 = "GPU-5b0c6e8e-0000-4000-8000-000000000000"
SINCE = 1.8e9
SYSTEM = "k3xq9a7b2c4d6e8"


def params(url, **change):
    defaults = {key: spec.get("default") for key, spec in GPU_PLATEAU_SPEC.items()}
    defaults.update(source="beszel", beszel_url=url, beszel_token="pb-token-0123456789", beszel_system=SYSTEM,
                    gpus=[{"index": 0, "uuid": GPU0, "spare_mib": 2000}], since=SINCE, at=SINCE + 7200,
                    settle="1h", creep_over="30m")
    return dict(defaults, **change)


def test_the_plateau_is_the_records_own_after_the_transient_and_pages_are_followed():
    # a boot spike in the first hour, then a creep of 600 MiB that settles at 95,300 MiB
    records = [_record(SINCE + 60 * minute, 96000 if minute == 5 else min(94700 + 20 * (minute - 60), 95300)
                       if minute >= 60 else 90000) for minute in range(0, 121)]
    with serving(Hub(records, per_page=50)) as hub:
        result = gpu_plateau(params(hub.url))
    card = result["gpus"][0]
    assert (card["transient_peak_used_mib"], card["plateau_used_mib"], card["least_free_mib"]) == (96000, 95300, 2587)
    assert card["creep_mib_per_hour"] == 0.0 and card["settled"] is True, "flat for the last 30 minutes"
    assert card["flags"] == []
    assert [query["page"] for _auth, query in hub.asked] == ["1", "2", "3"]
    auth, query = hub.asked[0]
    assert auth == "Bearer pb-token-0123456789"
    assert query["filter"] == ('system = "%s" && type = "1m" && created >= "2027-01-15 08:00:00.000Z" && '
                               'created <= "2027-01-15 10:00:00.000Z"' % SYSTEM)
    assert "used MiB (each step's most): most 96,000 MiB" in result["svg"] and "(Beszel)" in result["svg"]


def test_a_card_still_creeping_in_beszels_records_is_flagged_with_its_rate():
    records = [_record(SINCE + 60 * minute, 90000 + 2 * minute) for minute in range(0, 121)]
    with serving(Hub(records)) as hub:
        card = gpu_plateau(params(hub.url))["gpus"][0]
    assert card["creep_mib_per_hour"] == pytest.approx(120.0, abs=1.0) and card["settled"] is False
    assert card["flags"][0].startswith("still creeping: +120")


@pytest.mark.parametrize("change, message", [
    ({"beszel_system": 'x" || type != "'}, "beszel_system: expected the Beszel system's record id"),
    ({"beszel_record_type": "5m"}, "beszel_record_type: expected one of 1m, 10m, 20m, 120m, 480m, got '5m'"),
    ({"beszel_url": None}, "beszel_url: expected with source=beszel"),
])
def test_what_cannot_be_asked_of_a_hub_is_refused_before_it_is_asked(change, message):
    with serving(Hub([])) as hub:
        with pytest.raises(PrometheusError, match="^" + re.escape(message)):
            gpu_plateau(params(hub.url, **change))
        assert hub.asked == []


def test_more_records_than_a_window_should_hold_ask_for_a_coarser_kind():
    records = [_record(SINCE + minute, 90000) for minute in range(0, 30)]
    with serving(Hub(records, per_page=1)) as hub:
        with pytest.raises(PrometheusError, match="has more than 3 1m records from .*; ask a coarser beszel_record_type"):
            saved = beszel.PAGE_SIZE, beszel.MAX_PAGES
            beszel.PAGE_SIZE, beszel.MAX_PAGES = 1, 3
            try:
                gpu_plateau(params(hub.url))
            finally:
                beszel.PAGE_SIZE, beszel.MAX_PAGES = saved
