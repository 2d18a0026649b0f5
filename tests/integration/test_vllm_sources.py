"""The differential harnesses read a release's few files out of its wheel with range requests
(tests/differential/vllm_sources.py), here against a local index: only the members asked for
are fetched, once; a server that ignores ranges still yields them, from a whole download."""

from __future__ import annotations

import http.server
import io
import json
import random
import sys
import threading
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "differential"))
from vllm_sources import release_files, wheel_name  # noqa: E402

WHEEL = "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
MEMBERS = {"vllm/v1/core/kv_cache_utils.py": "BLOCKS = 16\n", "vllm/config/vllm.py": "IN_FLIGHT = 2\n"}


def _wheel():
    body = io.BytesIO()
    with zipfile.ZipFile(body, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in MEMBERS.items():
            archive.writestr(name, text)
        # the bulk of a real wheel: compiled kernels nobody reads
        archive.writestr("vllm/_C.abi3.so", random.Random(0).randbytes(4 << 20), zipfile.ZIP_STORED)
    return body.getvalue()


@pytest.fixture
def index(request):
    wheel, honours_ranges = _wheel(), request.param
    served = {"requests": [], "bytes": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the handler's name is http.server's
            asked = self.headers.get("Range")
            served["requests"].append((self.path, asked))
            if self.path == "/pypi/vllm/json":
                files = [{"filename": WHEEL, "url": "../../files/" + WHEEL, "size": len(wheel),
                          "packagetype": "bdist_wheel"}]
                self._send(200, json.dumps({"releases": {"9.9.9": files}}).encode())
            elif asked and honours_ranges:
                first, last = asked.removeprefix("bytes=").split("-")
                self._send(206, wheel[int(first):int(last) + 1],
                           {"Content-Range": "bytes %s-%s/%d" % (first, last, len(wheel))})
            else:
                self._send(200, wheel)

        def _send(self, status, body, headers=None):
            served["bytes"] += len(body) if self.path != "/pypi/vllm/json" else 0
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield "http://127.0.0.1:%d/pypi/vllm/json" % server.server_address[1], served, len(wheel)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("index", [True], indirect=True)
def test_only_the_members_asked_for_are_fetched_and_only_once(index, tmp_path):
    url, served, size = index
    root = release_files("9.9.9", {"vllm/v1/core/kv_cache_utils.py", "vllm/not/in/this/release.py"}, tmp_path, url)
    assert (root / "vllm/v1/core/kv_cache_utils.py").read_text() == MEMBERS["vllm/v1/core/kv_cache_utils.py"]
    assert not (root / "vllm/config/vllm.py").exists() and not (root / "vllm/not/in/this/release.py").exists()
    assert wheel_name(root) == WHEEL
    assert served["bytes"] < size // 10, "the kernels were downloaded"
    asked = len(served["requests"])
    assert release_files("9.9.9", {"vllm/v1/core/kv_cache_utils.py", "vllm/not/in/this/release.py"}, tmp_path,
                         url) == root
    assert len(served["requests"]) == asked, "a file already kept, or one the release lacks, was asked for again"
    release_files("9.9.9", {"vllm/config/vllm.py"}, tmp_path, url)
    assert (root / "vllm/config/vllm.py").read_text() == MEMBERS["vllm/config/vllm.py"]


@pytest.mark.parametrize("index", [False], indirect=True)
def test_a_server_that_ignores_ranges_still_yields_the_files(index, tmp_path):
    url, served, size = index
    root = release_files("9.9.9", set(MEMBERS), tmp_path, url)
    assert {name: (root / name).read_text() for name in MEMBERS} == MEMBERS
    assert served["bytes"] >= size
