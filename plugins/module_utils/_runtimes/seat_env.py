# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What every runtime renders and reads alike: the plan seat checked for rendering, the state
of a seat's container, and its variables file, which holds the numbers a maintenance window changes and the seat's secrets (compose's
``.env``, systemd's ``EnvironmentFile``). Both read ``NAME='value'`` literally, so values are
single-quoted and may carry neither a quote nor a control character; the other files refer
to the variables (``Ref``) and never hold a value that changes."""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    BIND_ADDRESS,
    CONTROL_RE,
    HOST_NAME_EXPECTED,
    HOST_NAME_RE,
    REDACTED,
    SECRET_VAR_PREFIX,
    SEAT_NAME_EXPECTED,
    SEAT_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan_seat import check_plan_seat
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError

_SECRET_LINE_RE = lazy_regex(r"^(%s[A-Za-z0-9_]+)=(.*)$" % SECRET_VAR_PREFIX, re.MULTILINE)
SECRET_CHANGED = "<secret changed>"


class Ref:
    """A reference to one of the seat's variables: ``${NAME:?}``, which compose and the shell
    both refuse to expand when it is unset or empty ("NAME: parameter null or not set"), so a
    seat never runs with an empty value."""

    def __init__(self, name):
        self.name = name

    def text(self):
        return "${%s:?}" % self.name


class Joined:
    """A string made of literal parts and Refs, e.g. ``${SEAT_PORT:?}:${SEAT_PORT:?}``."""

    def __init__(self, parts):
        self.parts = parts


def fail(seat, field, expected, got):
    raise RenderError("seat %s: %s: expected %s, got %r" % (seat.get("name", "?"), field, expected, got))


def validated(seat):
    """A plan seat (seat_plan's ``plan.seats[]``) that renders safely: the plan's own check."""
    return check_plan_seat(seat, RenderError)


def bind_address(seat):
    """The host address the seat's port is published on (the collection's default when the plan
    seat names none), as an address literal."""
    return str(ipaddress.ip_address(seat["launch"].get("bind_address", BIND_ADDRESS)))


def networks(seat):
    """The docker networks the seat joins: ``[{"name", "external"}]``."""
    return seat["launch"].get("networks") or []


def published(seat, inside):
    """``BIND:PORT:INSIDE`` as docker's -p and compose's short syntax read it, the address and
    port from the variables file; an IPv6 address in brackets."""
    bind = [Ref("SEAT_BIND"), ":"] if ipaddress.ip_address(bind_address(seat)).version == 4 else \
        ["[", Ref("SEAT_BIND"), "]:"]
    return Joined(bind + [Ref("SEAT_PORT"), ":", inside])


def secret_names(seat):
    """The names of the seat's secret variables."""
    return seat["launch"].get("secret_environment") or []


def seat_env(seat, secrets=None):
    """The variables of a seat, in file order: what a maintenance window changes, then its
    secrets (``secrets``: name -> value)."""
    seat = validated(seat)
    env = [("SEAT_IMAGE", seat["launch"]["image"]), ("SEAT_BIND", bind_address(seat)),
           ("SEAT_PORT", str(seat["port"]))]
    for index, uuid in enumerate(seat["gpus"]):
        env.append(("SEAT_GPU_%d" % index, uuid))
    env += engine_of(seat).environment(seat)
    secrets = secrets or {}
    for name in secret_names(seat):
        if not isinstance(secrets.get(name), str):
            raise RenderError("seat %s: secret_environment.%s: expected its value (text) in the secrets "
                              "given to the render, got %s" % (seat["name"], name, "none" if name not in secrets
                                                               else "a value of type %s" % type(secrets[name]).__name__))
        env.append((SECRET_VAR_PREFIX + name, secrets[name]))
    for key, value in env:
        if "'" in value or CONTROL_RE.search(value):
            raise RenderError("seat %s: %s: a variables file value cannot carry a single quote or a "
                              "control character safely, got %s" % (seat["name"], key, REDACTED if key.startswith(
                                  SECRET_VAR_PREFIX) else repr(value)))
    return env


def env_text(seat, host=None, secrets=None, extra=()):
    """The variables file's text (``extra``: the runtime's own variables, after the seat's)."""
    env = seat_env(seat, secrets) + list(extra)
    lines = [header(seat, host)] + ["%s='%s'" % (key, value) for key, value in env]
    return "\n".join(lines) + "\n"


def redact_env(text, before=None):
    """The variables file as a diff may show it: every secret replaced by <secret>, or by
    <secret changed> where it differs from ``before`` (the text it replaces)."""
    old = dict(_SECRET_LINE_RE.findall(before)) if before is not None else {}

    def shown(match):
        changed = before is not None and old.get(match.group(1)) != match.group(2)
        return "%s='%s'" % (match.group(1), SECRET_CHANGED if changed else REDACTED)
    return _SECRET_LINE_RE.sub(shown, text)


def health_code(seat, port, quote="'"):
    """The Python that checks the seat's health from inside its container (python3 is in
    vLLM's image; curl is not in every image), ``port`` a Ref or a literal, its strings in
    ``quote`` (the health path's grammar has no quote)."""
    return Joined(["import http.client, sys; c = http.client.HTTPConnection({q}127.0.0.1{q}, ".format(q=quote), port,
                   ", timeout=5); c.request({q}GET{q}, {q}{path}{q}); sys.exit(c.getresponse().status != 200)".format(
                       q=quote, path=seat.get("health_path", "/health"))])


# docker ps's Status ends in the healthcheck's verdict, when the container has one:
# "Up 5 seconds (health: starting)", "Up 2 minutes (healthy)", "Up 1 second (unhealthy)".
_HEALTH = lazy_regex(r"\((healthy|unhealthy|health: starting)\)\s*$")


def container_state(fields):
    """A seat container's state in docker's words, from its ``docker ps`` State and Status:
    ``running (healthy)``, ``running (health: starting)``, ``running`` (no healthcheck),
    ``exited: Exited (1) 3 seconds ago``..."""
    if fields["State"] == "running":
        health = _HEALTH.search(fields["Status"])
        return "running (%s)" % health.group(1) if health else "running"
    return "%s: %s" % (fields["State"], fields["Status"])


def header(seat, host):
    """The comment every seat file starts with; a seat or host name outside its grammar could end
    the comment and start a line of code, so it is refused, not written."""
    if not isinstance(seat.get("name"), str) or not SEAT_NAME_RE.match(seat["name"]):
        fail(seat, "name", SEAT_NAME_EXPECTED, seat.get("name"))
    if host and (not isinstance(host, str) or not HOST_NAME_RE.match(host)):
        fail(seat, "host", HOST_NAME_EXPECTED, host)
    where = " on %s" % host if host else ""
    return ("# Managed by llmfleet.seats: seat %s%s. Rendered from the inventory; edits here are\n"
            "# overwritten by the next rebalance (earlier versions: *.bak-YYYYMMDD-<tag>)."
            % (seat.get("name"), where))
