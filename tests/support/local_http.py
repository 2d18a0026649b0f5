"""A test's own HTTP server on a free loopback port, served from a thread for the length of a
``with`` block (real HTTP, no network beyond this machine):

    with serving(MyServer(...)) as server:
        ... server.server_address[1] ...
"""

from __future__ import annotations

import contextlib
import threading


@contextlib.contextmanager
def serving(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
