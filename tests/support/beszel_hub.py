"""A Beszel hub as its PocketBase API answers for system stats, on a free loopback port (a Beszel
hub does not run here): those of ``records`` in the time range asked, a page at a time, each
query kept with its Authorization header. ``record()`` makes one record as Beszel's agent writes it."""

from __future__ import annotations

import datetime
import json
import re
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hub(ThreadingHTTPServer):
    """Beszel's hub: ``records`` (oldest first) served ``per_page`` at a time; keeps each query."""
    daemon_threads = True

    def __init__(self, records, per_page=500):
        super().__init__(("127.0.0.1", 0), HubHandler)
        self.records, self.per_page, self.asked = records, per_page, []

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class HubHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        self.server.asked.append((self.headers.get("Authorization"), query))
        page, size = int(query["page"]), min(int(query["perPage"]), self.server.per_page)
        # the hub answers the time range the filter asks for, as PocketBase does; its times sort as text
        start, end = re.search(r'created >= "([^"]+)" && created <= "([^"]+)"', query["filter"]).groups()
        chosen = [item for item in self.server.records if start <= item["created"] <= end]
        items = chosen[(page - 1) * size:page * size]
        body = json.dumps({"page": page, "perPage": size, "totalItems": len(chosen),
                           "totalPages": max(1, -(-len(chosen) // size)), "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def record(seconds, used_mib, total_mib=97887):
    """One system_stats record at ``seconds``: ``used_mib`` is one GPU's (index 0) or a list, one
    per index. Beszel stores nvidia-smi's MiB divided by 1.024."""
    created = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.000Z")
    used = used_mib if isinstance(used_mib, list) else [used_mib]
    return {"created": created, "stats": {"cpu": 3.1, "g": {
        str(index): {"n": "NVIDIA RTX PRO 6000", "mu": mib / 1.024, "mt": total_mib / 1.024, "u": 40}
        for index, mib in enumerate(used)}}}
