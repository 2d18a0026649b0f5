"""seat_demand's edges, against a local HTTP server standing where Prometheus would: what it
refuses before it asks anything, and how a server that is not Prometheus, or refuses a query,
reaches the operator (one line, bounded). The figures themselves are held to a real Prometheus in
tests/integration/test_seat_demand_prometheus.py."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.demand import SEAT_DEMAND_SPEC, seat_demand
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import (
    ERROR_CHARS,
    WIRE_GRACE_S,
    Prometheus,
    PrometheusError,
)
from support.local_http import canned as serving


def params(url, **change):
    defaults = {key: spec.get("default") for key, spec in SEAT_DEMAND_SPEC.items()}
    defaults.update(prometheus_url=url, seats=[{"name": "chat", "model_name": "gen-small", "port": 8001}])
    return dict(defaults, **change)


@pytest.mark.parametrize("change, message", [
    ({"at": float("nan")}, "at: expected a time in Unix seconds (a finite number > 0), got nan"),
    ({"at": float("inf")}, "at: expected a time in Unix seconds (a finite number > 0), got inf"),
    ({"at": -1.0}, "at: expected a time in Unix seconds (a finite number > 0), got -1.0"),
    ({"timeout": 0}, "timeout: expected whole seconds >= 1, got 0"),
    ({"runaway_tokens": 0}, "runaway_tokens: expected an integer >= 1, got 0"),
    ({"step": "1 minute"}, "step: expected a duration such as 90s"),
    ({"instance_host": "fv ml1"}, "instance_host: expected the host part of the seats' scrape targets"),
    ({"instance_host": "fv-ml1\n"}, "instance_host: expected the host part of the seats' scrape targets"),
    ({"instance_host": "fv-ml1", "seats": [{"name": "chat", "model_name": "gen-small"}]},
     "seat chat: port: expected the seat's TCP port (1-65535) to find its scrape target fv-ml1:<port>, got None"),
    ({"seats": [{"name": "chat", "kv_cache_tokens": True}]}, "seat chat: kv_cache_tokens: expected the seat's KV"),
    ({"seats": [{"model_name": "gen-small"}]}, "seats[0].name: expected the seat's name"),
])
def test_what_cannot_be_asked_is_refused_in_one_line_before_any_query(change, message):
    with serving() as server:
        with pytest.raises(PrometheusError, match="^" + re.escape(message)):
            seat_demand(params(server.url, **change))
        assert server.asked == []


def test_a_server_that_is_not_prometheus_is_named_and_its_page_not_quoted_whole():
    page = b"<html><body>" + b"Sign in to continue. " * 200 + b"</body></html>"
    with serving(body=page, kind="text/html") as server:
        with pytest.raises(PrometheusError) as raised:
            seat_demand(params(server.url, at=1.0e9))
    message = str(raised.value)
    assert message.startswith("%s is not a Prometheus server's API (HTTP 200, <html><body>Sign in" % server.url)
    assert "\n" not in message and len(message) < len(server.url) + ERROR_CHARS + 60


def test_a_refused_query_says_the_servers_words_on_one_line_bounded():
    words = "parse error: unexpected character\n" + "x" * 5000
    with serving(status=400, body=json.dumps({"status": "error", "errorType": "bad_data",
                                              "error": words}).encode()) as server:
        with pytest.raises(PrometheusError) as raised:
            Prometheus(server.url).query("up", 1.0e9)
    message = str(raised.value)
    assert message.startswith("the query up was refused (HTTP 400): parse error: unexpected character x")
    assert message.endswith("...") and "\n" not in message and len(message) < ERROR_CHARS + 60


def test_each_query_is_bounded_on_the_server_and_the_wire_waits_longer():
    with serving() as server:
        prom = Prometheus(server.url, timeout=7)
        assert prom.query("up", 1.0e9) == []
    assert server.asked == [{"query": "up", "time": "1000000000.000", "timeout": "7s"}]
    assert prom.client.timeout == 7 + WIRE_GRACE_S


def test_a_name_with_no_series_says_so_and_names_its_target():
    with serving() as server:
        result = seat_demand(params(server.url, at=1.0e9, window="1h", instance_host="fv-ml1"))
    seat = result["seats"][0]
    assert not seat["metrics"] and seat["detail"] == \
        "no vLLM metrics with model_name gen-small at fv-ml1:8001 in the 1h before the window's end"
    # the name and the target went in as quoted PromQL strings
    assert 'model_name="gen-small",instance="fv-ml1:8001"' in server.asked[0]["query"]
