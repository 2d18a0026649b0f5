# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A plan seat (``seat_plan``'s ``plan.seats[]``) as the plan makes it and a render may take it:
one check, here where the plan seat is defined. Every seat's fields, then its engine's table
(``PLAN_SEAT_FIELDS``, each row's kind) and what its fields must agree on
(``check_plan_seat``). A plan seat reaches a render as a module's argument, so it may have been
edited by hand; whatever passes here can be written into a file as it is."""

from __future__ import annotations

import ipaddress

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    BIND_ADDRESS,
    CONTROL_RE,
    HEALTH_PATH_EXPECTED,
    HEALTH_PATH_RE,
    NETWORK_NAME_RE,
    SEAT_NAME_EXPECTED,
    SEAT_NAME_RE,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.fields import field_problems

# An environment variable's name as the rendered files may carry it.
PLAIN_KEY_RE = lazy_regex(r"\A[A-Za-z_][A-Za-z0-9_.-]*\Z")


def check_plan_seat(seat, error):
    """``seat`` when it is a plan seat a render may write as it is; else ``error`` (an exception
    class) naming the seat, the field, what was expected and what it got."""
    def fail(field, expected, got):
        raise error("seat %s: %s: expected %s, got %r" % (
            seat.get("name", "?") if isinstance(seat, dict) else "?", field, expected, got))

    if not isinstance(seat, dict):
        fail("seat", "a plan seat (a dict)", seat)
    name = seat.get("name")
    if not isinstance(name, str) or not SEAT_NAME_RE.match(name):
        fail("name", SEAT_NAME_EXPECTED + " (it names the seat's project and unit)", name)
    if not isinstance(seat.get("engine"), str) or seat["engine"] not in ENGINES:
        fail("engine", " or ".join(repr(engine) for engine in ENGINES), seat.get("engine"))
    port = seat.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port <= 65535:
        fail("port", "a TCP port (1-65535)", port)
    gpus = seat.get("gpus")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, str) and g for g in gpus):
        fail("gpus", "a non-empty list of GPU UUIDs", gpus)
    launch = seat.get("launch")
    if not isinstance(launch, dict):
        fail("launch", "the plan seat's launch inputs (a dict)", launch)
    if not isinstance(launch.get("image"), str) or not launch["image"]:
        fail("launch.image", "a non-empty string", launch.get("image"))
    environment = launch.get("environment") or {}
    if not isinstance(environment, dict) or not all(
            isinstance(k, str) and PLAIN_KEY_RE.match(k) and isinstance(v, str) and not CONTROL_RE.search(v)
            for k, v in environment.items()):
        fail("launch.environment", "{NAME: text} (the plan's normal form)", environment)
    names = launch.get("secret_environment") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and PLAIN_KEY_RE.match(n) for n in names):
        fail("launch.secret_environment", "a list of variable names", names)
    for field in ("volumes", "command"):
        items = launch.get(field) or []
        if not isinstance(items, list) or not all(isinstance(i, str) and not CONTROL_RE.search(i) for i in items):
            fail("launch.%s" % field, "a list of strings", items)
    for field in ("health_interval", "health_start_period"):
        if not isinstance(launch.get(field, "1s"), str):
            fail("launch.%s" % field, "a docker duration", launch.get(field))
    if not isinstance(seat.get("container", ""), str):
        fail("container", "a container name", seat.get("container"))
    # it becomes a string literal in the healthcheck's code
    health_path = seat.get("health_path", "/health")
    if not isinstance(health_path, str) or not HEALTH_PATH_RE.match(health_path):
        fail("health_path", HEALTH_PATH_EXPECTED, health_path)
    address = launch.get("bind_address", BIND_ADDRESS)
    if not _address(address):
        fail("launch.bind_address", "an IPv4 or IPv6 address", address)
    joined = launch.get("networks") or []
    if not isinstance(joined, list) or not all(
            isinstance(n, dict) and set(n) == {"name", "external"} and isinstance(n["name"], str)
            and NETWORK_NAME_RE.match(n["name"]) and isinstance(n["external"], bool) for n in joined):
        fail("launch.networks", "a list of {name: a docker network name, external: true|false}", joined)
    engine = engine_of(seat)
    problems = field_problems(engine.PLAN_SEAT_FIELDS, seat)
    if problems:
        fail(*problems[0])
    engine.check_plan_seat(seat, fail)
    return seat


def _address(address):
    """Whether ``address`` is an address literal (no zone: it is written into a file as it is)."""
    if not isinstance(address, str) or "%" in address:
        return False
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True
