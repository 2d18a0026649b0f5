# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The one way the collection reaches Docker: the ``docker`` CLI on the host, with the engine
named by ``docker_host`` (else ``$DOCKER_HOST``, else the local socket), run through
``command``: argument lists, never shell lines. Used by the cards (who holds a GPU), the
compose runtime (validate, start, stop, inspect, logs) and the gates."""

from __future__ import annotations

import json
import os
import shutil

from ansible_collections.llmfleet.seats.plugins.module_utils._common import command
from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import CommandError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
# docker's State.StartedAt (RFC 3339 in UTC): a container's last start, sortable as text
STARTED_AT_RE = lazy_regex(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z\Z")


class DockerError(CommandError):
    """docker could not be run, or did not answer; the message says which command and why."""


class Docker:
    def __init__(self, docker_host=None, binary=None, timeout=120):
        self.docker_host = docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST
        self.binary = binary or shutil.which("docker") or "docker"
        self.timeout = timeout

    def run(self, args, timeout=None, merge_output=False):
        """``(rc, stdout, stderr)`` of ``docker ARGS``; DockerError when it cannot be run.
        With ``merge_output`` stderr is folded into stdout in the order it was written."""
        try:
            return command.run([self.binary] + list(args), timeout or self.timeout, env=self._env(), merge_output=merge_output)
        except CommandError as exc:
            raise DockerError(str(exc)) from None

    def _env(self):
        return dict(os.environ, DOCKER_HOST=self.docker_host)

    def inspect(self, names):
        """``({id: docker inspect object}, None)`` for the containers that exist (names or ids),
        or ``({}, why)`` when the engine cannot be asked."""
        if not names:
            return {}, None
        try:
            rc, out, err = self.run(["inspect", "--type", "container"] + list(names), timeout=30)
        except DockerError as exc:
            return {}, str(exc)
        # With unknown names docker exits 1 but still prints the ones it found.
        try:
            answer = json.loads(out or "[]")
        except ValueError:
            answer = None
        if not isinstance(answer, list) or (rc != 0 and not answer and "No such" not in err):
            why = (err or out).strip().splitlines()
            return {}, "the Docker engine at %s did not answer: %s" % (
                self.docker_host, why[0] if why else "exit %d" % rc)
        return {attrs["Id"]: attrs for attrs in answer if isinstance(attrs, dict) and attrs.get("Id")}, None

    def inspect_one(self, name):
        """One container's ``docker inspect`` object, or None when it does not exist."""
        found, _why = self.inspect([name])
        return next(iter(found.values()), None)

    def logs(self, container, since=None, timeout=60):
        """A container's whole log, stdout and stderr in the order it wrote them."""
        args = ["logs"] + (["--since", since] if since else []) + [container]
        rc, out, _err = self.run(args, timeout=timeout, merge_output=True)
        if rc != 0:
            raise DockerError("docker logs failed (rc=%d): %s" % (rc, out.strip()[-500:]))
        return out

    def log_head(self, container, limit, since=None, timeout=30):
        """The first ``limit`` bytes (at most) of a container's log, stdout and stderr in the
        order it wrote them; the rest is never read, however long the log. DockerError when
        docker cannot be run or answers with an error before any log."""
        argv = [self.binary, "logs"] + (["--since", since] if since else []) + [container]
        try:
            rc, out = command.head(argv, limit, timeout, env=self._env())
        except CommandError as exc:
            raise DockerError(str(exc)) from None
        if rc not in (None, 0):  # None: stopped once the bytes wanted were read
            raise DockerError("docker logs failed (rc=%d): %s" % (rc, out.strip()[-300:]))
        return out

    def labelled(self, label, fields, labels=()):
        """``{label value: {field: value}}`` for every container (running or not) carrying
        ``label``, with the ``docker ps`` fields asked for (e.g. State, Status, Names) and the
        values of its ``labels`` (each empty where it has none)."""
        template = "\t".join(["{{.Label \"%s\"}}" % label] + ["{{.%s}}" % field for field in fields]
                             + ["{{.Label \"%s\"}}" % name for name in labels])
        rc, out, err = self.run(["ps", "--all", "--filter", "label=" + label, "--format", template],
                                timeout=60)
        if rc != 0:
            raise DockerError("docker ps failed (rc=%d): %s" % (rc, (err or out).strip()))
        found = {}
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) == len(fields) + len(labels) + 1 and parts[0]:
                found[parts[0]] = dict(zip(list(fields) + list(labels), parts[1:]))
        return found
