"""The one HTTP client refuses a URL that carries a user or password: every error it raises
names its URL, so a password there would be printed with each."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.demand import seat_demand
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Client


@pytest.mark.parametrize("url", ["http://admin:s3cretpw@127.0.0.1:9090", "https://s3cretpw@mon.example:443/prom"])
def test_a_url_with_a_password_is_refused_without_printing_it(url):
    with pytest.raises(ValueError) as refused:
        Client(url)
    assert "s3cretpw" not in str(refused.value)
    assert str(refused.value).startswith("expected a URL without a user or password in it")


def test_seat_demand_refuses_it_in_one_line_naming_the_option():
    with pytest.raises(ValueError) as refused:
        seat_demand({"prometheus_url": "http://admin:s3cretpw@127.0.0.1:9", "seats": [{"name": "chat"}],
                     "window": "7d", "step": "1m", "at": None, "runaway_tokens": 32768, "timeout": 5,
                     "validate_certs": True})
    message = str(refused.value)
    assert message.startswith("prometheus_url: expected a URL without a user or password") and "s3cretpw" not in message
