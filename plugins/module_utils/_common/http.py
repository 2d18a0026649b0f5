# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The one HTTP client: the seats' /health, /v1/models and probe requests, and the gateway's
chat checks. Every text that leaves it has the API key scrubbed, including the masked forms a
gateway echoes of it. Standard library only (it runs on GPU hosts too)."""

from __future__ import annotations

import json
import re
import socket
import urllib.parse

from ansible_collections.llmfleet.seats.plugins.module_utils._common.check import seconds_problem

EXCERPT_CHARS = 160


def _http_client():
    """``http.client``, imported by the first request: with the ``email`` and ``ssl`` it loads it
    costs ~20 ms, and most module runs that import this file (every engine does) ask no server."""
    import http.client
    return http.client


class Unreachable(Exception):
    """Nothing answered (refused, timed out, cut off); ``detail`` is scrubbed of the key."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


def redact(text, api_key):
    """Remove the key and the masked forms gateways echo of it (LiteLLM: ``sk-a****wxyz``,
    ``sk-...wxyz``) from text meant for the operator."""
    text = str(text)
    if api_key:
        text = text.replace(api_key, "********")
        if len(api_key) > 8:
            # LiteLLM echoes f"{key[:4]}****{key[-4:]}" and f"sk-...{key[-4:]}"
            for tail_form in ("****" + api_key[-4:], "..." + api_key[-4:]):
                text = re.sub(r"[\w-]{0,8}" + re.escape(tail_form), "********", text)
    return text


def reason(error):
    """Why a connection gave no answer, in a few words."""
    if isinstance(error, socket.timeout) or "timed out" in str(error):
        return "no answer in time (timed out)"
    return str(error) or error.__class__.__name__


def excerpt(text, limit=EXCERPT_CHARS):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def error_message(text):
    """The message of an OpenAI-style error body (vLLM, LiteLLM), else the raw text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return _unwrap(str(error.get("message") or error.get("detail") or json.dumps(error)))
    return str(error)


def _unwrap(message):
    """LiteLLM quotes the seat's whole error body inside its message; keep the seat's words."""
    start = message.find('{"error"')
    if start < 0:
        return message
    try:
        inner, end = json.JSONDecoder().raw_decode(message, start)
    except ValueError:
        return message
    return message[:start] + error_message(json.dumps(inner)) + message[end:]


def sse_data(reply):
    """Yield the data of each server-sent event (multi-line data joined with newlines)."""
    lines = []
    while True:
        raw = reply.readline()
        if not raw:
            break
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        # other fields (event:, id:, retry:) and comments (":") carry nothing a check needs
    if lines:
        yield "\n".join(lines)


class Client:
    """Requests to one server (``root``: scheme, host, port and a path prefix)."""

    def __init__(self, root, api_key=None, timeout=60, validate_certs=True):
        parts = urllib.parse.urlsplit(root)
        if parts.username is not None or parts.password is not None:
            # every error names the URL: a password in it would be printed with each
            raise ValueError("expected a URL without a user or password in it (give a token as its own, "
                             "never-printed option), got %s://...@%s" % (parts.scheme, parts.hostname))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("expected an http:// or https:// URL, got %r" % (root,))
        problem = seconds_problem("timeout", timeout)
        if problem:
            raise ValueError(problem)
        self.root = root.rstrip("/")
        self._https = parts.scheme == "https"
        self._netloc = parts.netloc
        self._prefix = parts.path.rstrip("/")
        self.api_key = api_key or None
        self.timeout = timeout
        # only for https: loading the CA bundle takes tens of milliseconds a client, and a module
        # run asks several seats, which speak plain http
        self._ssl = None
        if self._https:
            import ssl
            self._ssl = ssl.create_default_context()
            if not validate_certs:
                self._ssl.check_hostname = False
                self._ssl.verify_mode = ssl.CERT_NONE

    def redact(self, text):
        return redact(text, self.api_key)

    def open(self, method, path, body=None, timeout=None):
        """Send one request; ``(connection, response)`` whatever the status (close the
        connection when done), or Unreachable."""
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        timeout = timeout or self.timeout
        client = _http_client()
        if self._https:
            connection = client.HTTPSConnection(self._netloc, timeout=timeout, context=self._ssl)
        else:
            connection = client.HTTPConnection(self._netloc, timeout=timeout)
        try:
            connection.request(method, self._prefix + path, body=data, headers=headers)
            return connection, connection.getresponse()
        except (client.HTTPException, OSError) as error:
            connection.close()
            raise Unreachable(self.redact("cannot reach %s: %s" % (self.root, reason(error)))) from None

    def call(self, method, path, body=None, timeout=None):
        """``(status, text)`` of one request, or Unreachable."""
        connection, reply = self.open(method, path, body, timeout)
        try:
            return reply.status, reply.read().decode("utf-8", "replace")
        except (_http_client().HTTPException, OSError) as error:
            raise Unreachable(self.redact("reply cut off: %s" % reason(error))) from None
        finally:
            connection.close()

    def call_json(self, method, path, body=None, timeout=None):
        """``(status, parsed JSON or the text)`` of one request, or Unreachable."""
        status, text = self.call(method, path, body, timeout)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text
