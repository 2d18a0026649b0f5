"""A test's own HTTP server on a free loopback port, served from a thread for the length of a
``with`` block (real HTTP, no network beyond this machine):

    with serving(MyServer(...)) as server:
        ... server.server_address[1] ...

``Canned`` is such a server that answers every GET alike and keeps what was asked.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serving(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Canned(ThreadingHTTPServer):
    """Answers every GET with ``status`` and ``body`` (bytes) as ``kind``, and keeps each
    query asked (its parameters, a dict) in ``asked``; the default body is Prometheus's
    answer with no series."""
    daemon_threads = True

    def __init__(self, status=200, body=b'{"status": "success", "data": {"resultType": "vector", "result": []}}',
                 kind="application/json"):
        super().__init__(("127.0.0.1", 0), _CannedHandler)
        self.status, self.body, self.kind, self.asked = status, body, kind, []

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class _CannedHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.asked.append(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)))
        self.send_response(self.server.status)
        self.send_header("Content-Type", self.server.kind)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)


def canned(**kwargs):
    """``with canned(status=..., body=...) as server:`` a ``Canned`` server, served."""
    return serving(Canned(**kwargs))
