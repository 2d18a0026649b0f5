"""The one HTTP client refuses a URL that carries a user or password: every error it raises
names its URL, so a password there would be printed with each. Over https it checks the server's
certificate unless told not to."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.demand import seat_demand
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Client, Unreachable


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


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802  (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def self_signed_server(tmp_path):
    """An https server on a loopback port whose certificate no authority signed."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=127.0.0.1", "-days", "1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server = http.server.HTTPServer(("127.0.0.1", 0), _Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield "https://127.0.0.1:%d" % server.server_port
    finally:
        server.shutdown()
        server.server_close()


def test_https_checks_the_certificate_unless_told_not_to(self_signed_server):
    with pytest.raises(Unreachable) as refused:
        Client(self_signed_server, timeout=10).call("GET", "/")
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value), refused.value
    assert Client(self_signed_server, timeout=10, validate_certs=False).call("GET", "/") == (200, "ok")
