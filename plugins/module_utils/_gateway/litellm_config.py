# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Audit where a LiteLLM ``config.yaml`` sends traffic, and repoint what moved.

A route's ``model_info`` limits are held to its seat: ``max_input_tokens`` and ``max_tokens``
at most the seat's ``max_model_len``, ``max_output_tokens`` at most its output cap
(``max_new_tokens``, else the context). A gateway that admits longer requests than the seat
serves turns them into the seat's 400s; each api_base finding says the limits its seat has.

Every ``model_list[].litellm_params.api_base`` and every
``general_settings.pass_through_endpoints[].target`` must name a seat's host and port. After a
seat moves, an api_base-only substitution leaves pass-through targets dead, so both
are audited, and a moved address is rewritten in place: only the characters of ``host:port``
inside the scalar change, so comments, quoting and layout survive byte for byte.

Standard library only. The caller passes ``yaml_nodes``, a function from text to YAML nodes
(PyYAML's ``yaml.compose`` with its pure-Python SafeLoader): the nodes carry the character
offsets the targeted edits need, and are read by duck typing (``id``, ``value``,
``start_mark``, ``end_mark``).
"""

from __future__ import annotations

import hashlib
import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import current_mode, replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.backup import (
    BackupError,
    backup_path_for,
    check_backup_name_parts,
    make_backup,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# A LiteLLM secret reference: resolved from the gateway's environment at start-up.
ENV_REFERENCE = "os.environ/"
_URL_RE = lazy_regex(r"^(?P<scheme>https?)://(?P<authority>(?P<host>\[[^\]]+\]|[^/:?#\s]+)"
                     r"(?::(?P<port>\d+))?)(?P<rest>[/?#].*)?$")
DEFAULT_PORTS = {"http": 80, "https": 443}

OK = "ok"                   # a seat's current address, serving the route's model
MOVED = "moved"             # a seat's previous address: repoint it to where the seat is now
WRONG_SEAT = "wrong_seat"   # a seat's address, but that seat does not serve the route's model
UNKNOWN = "unknown"         # no seat, now or before, has this address
EXTERNAL = "external"       # an allowed non-seat host (external_hosts)
UNRESOLVED = "unresolved"   # os.environ/... or not a URL: cannot be checked from the file
NO_KEY = "no_key"           # a keyed seat's address, and the route sends no api_key
WRONG_KEY = "wrong_key"     # a keyed seat's address, and the route's literal api_key is another
OVER_LIMIT = "over_limit"   # the route's model_info admits more tokens than its seat serves
PROBLEMS = (MOVED, WRONG_SEAT, UNKNOWN, NO_KEY, WRONG_KEY, OVER_LIMIT)
# model_info's token limits, each with the seat's limit it may not exceed
LIMIT_KEYS = {"max_input_tokens": "max_model_len", "max_tokens": "max_model_len",
              "max_output_tokens": "output_cap"}


class RouteAuditError(ValueError):
    """Input that cannot be audited; the message names the seat or file and the field."""


def normalize_seats(seats):
    """Validate ``seats`` ({name, host, port, served_model_names, previous_host,
    previous_port}); returns new dicts with hosts lower-cased and previous_* filled in."""
    if not isinstance(seats, list) or not seats:
        raise RouteAuditError("seats: expected a non-empty list of {name, host, port}")
    normalized, names, addresses = [], set(), {}
    for index, seat in enumerate(seats):
        if not isinstance(seat, dict):
            raise RouteAuditError("seats[%d]: expected a dict with name, host and port, got %r"
                                  % (index, seat))
        name = seat.get("name")
        if not isinstance(name, str) or not name:
            raise RouteAuditError("seats[%d].name: expected the seat's name, got %r" % (index, name))
        if name in names:
            raise RouteAuditError("seats[%d] (%s): the name is listed twice" % (index, name))
        names.add(name)
        host = _host(seat.get("host"), "seat %s: host" % name)
        port = _port(seat.get("port"), "seat %s: port" % name)
        served = seat.get("served_model_names") or []
        if isinstance(served, str) or not isinstance(served, list) or \
                not all(isinstance(item, str) and item for item in served):
            raise RouteAuditError("seat %s: served_model_names: expected a list of names, got %r"
                                  % (name, served))
        address = (host, port)
        if address in addresses:
            raise RouteAuditError("seat %s: %s:%d is also seat %s's address"
                                  % (name, host, port, addresses[address]))
        addresses[address] = name
        previous_host = seat.get("previous_host")
        previous_port = seat.get("previous_port")
        limits = {}
        for field in ("max_model_len", "max_new_tokens"):
            value = seat.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise RouteAuditError("seat %s: %s: expected a positive count of tokens, got %r" % (name, field, value))
            limits[field] = value
        normalized.append({
            "name": name, "host": host, "port": port, "served_model_names": list(served),
            "max_model_len": limits["max_model_len"],
            "output_cap": limits["max_new_tokens"] or limits["max_model_len"],
            "key_digest": _seat_key_digest(seat.get("api_key"), name),
            "previous_host": host if previous_host is None
            else _host(previous_host, "seat %s: previous_host" % name),
            "previous_port": port if previous_port is None
            else _port(previous_port, "seat %s: previous_port" % name),
        })
    return normalized


def _seat_key_digest(key, name):
    """A seat's api_key as the audit keeps it: a digest to compare a route's literal key with,
    never the key. None for a seat without one."""
    if key is None or key == "":
        return None
    if not isinstance(key, str):
        raise RouteAuditError("seat %s: api_key: expected the seat's key as text (its value is not shown)" % name)
    return _digest(key)


def _digest(key):
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _route_key(params):
    """What a route sends as its key: (None, None) for none, ("environment", None) for an
    os.environ/ reference (resolved by the gateway, not checkable here), ("literal", digest)."""
    key = _scalar(_child(params, "api_key"))
    if key is None or not key.strip():
        return None, None
    if key.strip().startswith(ENV_REFERENCE):
        return "environment", None
    return "literal", _digest(key)


def literal_keys(text, yaml_nodes):
    """The api_key values written into ``text`` itself (not os.environ/ references): the caller
    keeps them out of everything it prints (a diff of the file, a message)."""
    model_list = _child(yaml_nodes(text), "model_list")
    keys = []
    for entry in model_list.value if model_list is not None and model_list.id == "sequence" else ():
        key = _scalar(_child(_child(entry, "litellm_params"), "api_key"))
        if key and key.strip() and not key.strip().startswith(ENV_REFERENCE):
            keys.append(key)
    return keys


def _host(value, what):
    if not isinstance(value, str) or not value.strip() or re.search(r"[\s/]", value.strip()):
        raise RouteAuditError("%s: expected a host name or address as the gateway writes it,"
                              " got %r" % (what, value))
    return value.strip().lower()


def _port(value, what):
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise RouteAuditError("%s: expected a TCP port (1-65535), got %r" % (what, value))
    return value


def split_url(url):
    """``http://h:8016/v1`` -> dict(scheme, host, port, authority, explicit_port), else None."""
    match = _URL_RE.match(url.strip()) if isinstance(url, str) else None
    if not match:
        return None
    port = match.group("port")
    return {"scheme": match.group("scheme"), "host": match.group("host").lower(),
            "port": int(port) if port else DEFAULT_PORTS[match.group("scheme")],
            "authority": match.group("authority"), "explicit_port": port is not None}


# ---------------------------------------------------------------------------------------------
# reading the file
# ---------------------------------------------------------------------------------------------

def _child(node, key):
    if node is None or node.id != "mapping":
        return None
    for key_node, value_node in node.value:
        if key_node.id == "scalar" and key_node.value == key:
            return value_node
    return None


def _scalar(node):
    return node.value if node is not None and node.id == "scalar" else None


def find_targets(text, yaml_nodes, path="config.yaml"):
    """Every api_base and pass-through target in the file, with its position in ``text``."""
    try:
        root = yaml_nodes(text)
    except Exception as exc:  # the composer's own error types: report them, never a traceback
        raise RouteAuditError("%s: not readable as YAML: %s" % (path, _one_line(exc))) from None
    if root is None:
        return []
    if root.id != "mapping":
        raise RouteAuditError("%s: expected a LiteLLM config (a mapping with model_list),"
                              " got a YAML %s" % (path, root.id))
    targets = []
    model_list = _child(root, "model_list")
    for index, entry in enumerate(_items(model_list, path, "model_list")):
        params = _child(entry, "litellm_params")
        node = _child(params, "api_base")
        if node is None:
            continue  # a cloud route: no seat behind it
        target = _target(node, "api_base", "model_list[%d]" % index,
                         route=_scalar(_child(entry, "model_name")), model=_scalar(_child(params, "model")))
        target["route_key"], target["key_digest"] = _route_key(params)
        target["model_info"], target["limit_spans"] = _model_info(_child(entry, "model_info"))
        targets.append(target)
    general = _child(root, "general_settings")
    endpoints = _child(general, "pass_through_endpoints")
    for index, entry in enumerate(_items(endpoints, path,
                                         "general_settings.pass_through_endpoints")):
        node = _child(entry, "target")
        if node is None:
            continue
        targets.append(_target(node, "pass_through", "pass_through_endpoints[%d]" % index,
                               route=_scalar(_child(entry, "path")), model=None))
    return targets


def _model_info(node):
    """``(limits, spans)``: the token limits a route declares in its ``model_info``, as written (a
    limit that is not a whole number is kept as text, and judged as over any seat's), and each
    one's character range in the text (for a limit written as a plain scalar)."""
    declared, spans = {}, {}
    for key in LIMIT_KEYS:
        child = _child(node, key)
        value = _scalar(child)
        if value is not None:
            declared[key] = int(value) if value.strip().isdigit() else value
            if child.style is None:
                spans[key] = (child.start_mark.index, child.end_mark.index)
    return declared, spans


def _items(node, path, what):
    if node is None or (node.id == "scalar" and node.value in ("", "~", "null")):
        return []
    if node.id != "sequence":
        raise RouteAuditError("%s: %s: expected a list, got a YAML %s" % (path, what, node.id))
    return node.value


def _target(node, kind, where, route, model):
    value = _scalar(node)
    return {"kind": kind, "where": where, "route": route, "model": model, "target": value, "model_info": {},
            "line": node.start_mark.line + 1,
            "span": (node.start_mark.index, node.end_mark.index) if value is not None else None}


def _one_line(exc):
    return " ".join(str(exc).split())


# ---------------------------------------------------------------------------------------------
# judging
# ---------------------------------------------------------------------------------------------

def served_name(model):
    """``hosted_vllm/char-rp-thinking`` -> ``char-rp-thinking`` (the provider prefix goes)."""
    if not isinstance(model, str) or not model:
        return None
    return model.split("/", 1)[1] if "/" in model else model


def judge(target, seats, external_hosts=()):
    """Add ``status``, ``seat``, ``new_target`` and ``detail`` to one target from find_targets."""
    finding = dict(target, status=None, seat=None, new_target=None, detail="", limits=None)
    finding.pop("span", None)
    finding.pop("limit_spans", None)
    finding.pop("key_digest", None)  # findings are returned and printed: no trace of a key
    value = target["target"]
    address = split_url(value)
    if address is None:
        finding["status"] = UNRESOLVED
        finding["detail"] = ("resolved from the gateway's environment; not checked"
                             if isinstance(value, str) and value.startswith(ENV_REFERENCE)
                             else "not an http(s) URL: %r" % (value,))
        return finding
    here = (address["host"], address["port"])
    seat_here = next((seat for seat in seats if (seat["host"], seat["port"]) == here), None)
    moved_away = [seat for seat in seats if seat is not seat_here
                  and (seat["previous_host"], seat["previous_port"]) == here]
    name = served_name(target["model"]) if target["kind"] == "api_base" else None
    serving = [seat for seat in seats if name in seat["served_model_names"]] if name else []
    # A route that names its model can only mean a seat that serves it (or lists no names).
    moved_away = [seat for seat in moved_away if _may_serve(seat, name)]
    if seat_here is not None and _may_serve(seat_here, name):
        return _judge_key(finding, target, seat_here)
    if moved_away:
        return _moved(finding, moved_away, address)
    if seat_here is not None:
        return _found(finding, WRONG_SEAT, seat_here, "seat %s at %s:%d does not serve %s%s"
                      % (seat_here["name"], here[0], here[1], name,
                         ";" + _served_by(serving) if serving else ""))
    if address["host"] in external_hosts:
        return _found(finding, EXTERNAL, None, "external host %s" % address["host"])
    return _found(finding, UNKNOWN, None, "no seat at %s:%d%s"
                  % (here[0], here[1], ";" + _served_by(serving) if serving else ""))


def _judge_key(finding, target, seat):
    """A route to a seat with an api_key must send it: the seat answers 401 to anything else,
    which only the smoke gates after the window would show. Neither key is ever shown."""
    if target["kind"] != "api_base":
        return _found(finding, OK, seat, "seat %s" % seat["name"])
    if seat["key_digest"] is None:
        return _judge_limits(finding, target, seat)
    if target["route_key"] is None:
        return _found(finding, NO_KEY, seat, "seat %s has an api_key; route %s must carry the seat's key"
                      " (litellm_params.api_key, e.g. os.environ/NAME)" % (seat["name"], target["route"]))
    if target["route_key"] == "literal" and target["key_digest"] != seat["key_digest"]:
        return _found(finding, WRONG_KEY, seat, "route %s carries an api_key that is not seat %s's key;"
                      " it must carry the seat's key" % (target["route"], seat["name"]))
    return _judge_limits(finding, target, seat)


def _judge_limits(finding, target, seat):
    """A route to a seat is held to the seat's limits: the most its model_info may declare."""
    finding["limits"] = {key: seat[LIMIT_KEYS[key]] for key in LIMIT_KEYS if seat[LIMIT_KEYS[key]] is not None}
    over = ["model_info.%s %s is more than seat %s serves (%s %d)" % (
        key, value, seat["name"], "max_model_len" if LIMIT_KEYS[key] == "max_model_len" else "output cap",
        finding["limits"][key])
        for key, value in sorted(target.get("model_info", {}).items())
        if key in finding["limits"] and not (isinstance(value, int) and value <= finding["limits"][key])]
    if over:
        return _found(finding, OVER_LIMIT, seat, "; ".join(over))
    return _found(finding, OK, seat, "seat %s" % seat["name"])


def _may_serve(seat, name):
    return name is None or not seat["served_model_names"] or name in seat["served_model_names"]


def _served_by(serving):
    return " it is served by %s" % ", ".join(
        "seat %s at %s:%d" % (seat["name"], seat["host"], seat["port"]) for seat in serving)


def _found(finding, status, seat, detail):
    finding.update(status=status, seat=seat["name"] if seat else None, detail=detail)
    return finding


def _moved(finding, candidates, address):
    if len(candidates) > 1:
        return _found(finding, UNKNOWN, None, "seats %s all moved away from %s:%d; cannot tell"
                      " which one this is" % (", ".join(seat["name"] for seat in candidates),
                                              address["host"], address["port"]))
    seat = candidates[0]
    finding["new_target"] = repoint(finding["target"], seat["host"], seat["port"])
    return _found(finding, MOVED, seat, "seat %s moved from %s:%d to %s:%d"
                  % (seat["name"], address["host"], address["port"], seat["host"], seat["port"]))


def repoint(url, host, port):
    """The same URL with only ``host:port`` replaced (path, query and scheme kept)."""
    address = split_url(url)
    keep_default = not address["explicit_port"] and port == DEFAULT_PORTS[address["scheme"]]
    authority = host if keep_default else "%s:%d" % (host, port)
    start = url.index(address["authority"])
    return url[:start] + authority + url[start + len(address["authority"]):]


# ---------------------------------------------------------------------------------------------
# the audit and the rewrite
# ---------------------------------------------------------------------------------------------

def audit(text, seats, yaml_nodes, external_hosts=(), path="config.yaml", scope_hosts=()):
    """Judge every target in ``text`` (with ``scope_hosts``, only those on these hosts);
    returns ``(findings, spans)``: spans[i] is ``(the character range of findings[i]'s scalar in
    ``text`` or None when not a plain string, {model_info limit: its range})``."""
    seats = normalize_seats(seats)
    external = {host.lower() for host in external_hosts or ()}
    targets = find_targets(text, yaml_nodes, path)
    if scope_hosts:
        scope = {_host(host, "scope_hosts") for host in scope_hosts}
        targets = [target for target in targets if (split_url(target["target"]) or {}).get("host") in scope]
    return [judge(target, seats, external) for target in targets], \
        [(target["span"], target.get("limit_spans") or {}) for target in targets]


def rewrite(text, findings, spans, yaml_nodes, path="config.yaml"):
    """Repoint every MOVED finding in place; returns ``(new_text, rewrites)``.

    Only the ``host:port`` characters inside each scalar change. The result is composed again
    and every rewritten target must read back as its new URL, or nothing is returned."""
    edits = {}
    for finding, (span, _limit_spans) in zip(findings, spans):
        if finding["status"] != MOVED or span is None:
            continue
        start, end = span
        raw = text[start:end]
        old_authority = split_url(finding["target"])["authority"]
        new_authority = split_url(finding["new_target"])["authority"]
        if raw.count(old_authority) != 1:
            raise RouteAuditError("%s line %d (%s): cannot find %s once in %r to repoint it"
                                  % (path, finding["line"], finding["where"], old_authority, raw))
        edits[span] = (raw.replace(old_authority, new_authority), {
            "where": finding["where"], "kind": finding["kind"], "route": finding["route"], "line": finding["line"],
            "old": finding["target"], "new": finding["new_target"]})
    return _apply(text, edits, yaml_nodes, path)


def rewrite_limits(text, findings, spans, yaml_nodes, path="config.yaml"):
    """Set every model_info limit a route to a seat declares to what its seat serves (the
    seat's ``limits``), in place; returns ``(new_text, rewrites)``. A limit the route does not
    declare is left undeclared; one not written as a plain scalar is refused by name."""
    edits = {}
    for finding, (_span, limit_spans) in zip(findings, spans):
        for key, serves in sorted((finding.get("limits") or {}).items()):
            declared = finding["model_info"].get(key)
            if declared is None or declared == serves:
                continue
            if key not in limit_spans:
                raise RouteAuditError("%s line %d (%s): model_info.%s is not a plain number to set to %d; set it "
                                      "by hand" % (path, finding["line"], finding["where"], key, serves))
            edits[limit_spans[key]] = (str(serves), {
                "where": "%s.model_info.%s" % (finding["where"], key), "kind": "model_info", "route": finding["route"],
                "line": finding["line"], "old": declared, "new": serves})
    return _apply(text, edits, yaml_nodes, path)


def _apply(text, edits, yaml_nodes, path):
    """``edits`` ({(start, end): (replacement, rewrite record)}) made to ``text``, read back."""
    new_text, offset = text, 0
    rewrites = []
    for (start, end), (replacement, record) in sorted(edits.items()):
        new_text = new_text[:start + offset] + replacement + new_text[end + offset:]
        offset += len(replacement) - (end - start)
        rewrites.append(record)
    if rewrites:
        _verify(new_text, rewrites, yaml_nodes, path)
    return new_text, rewrites


def _verify(new_text, rewrites, yaml_nodes, path):
    read_back = {}
    for target in find_targets(new_text, yaml_nodes, path):
        read_back[(target["kind"], target["where"])] = target["target"]
        for key, value in target["model_info"].items():
            read_back[("model_info", "%s.model_info.%s" % (target["where"], key))] = value
    for item in rewrites:
        if read_back.get((item["kind"], item["where"])) != item["new"]:
            raise RouteAuditError("%s line %d (%s): the rewrite would read back as %r, expected"
                                  " %r; nothing was written"
                                  % (path, item["line"], item["where"],
                                     read_back.get((item["kind"], item["where"])), item["new"]))


def problems_message(findings, path="config.yaml"):
    """One line naming every target that does not point at the seat it should, or ''."""
    bad = [finding for finding in findings if finding["status"] in PROBLEMS]
    if not bad:
        return ""
    return "%s: %d gateway target(s) do not point at their seat: %s" % (
        path, len(bad), "; ".join(
            "line %d %s%s %s %s: %s%s" % (
                finding["line"], finding["where"],
                " (%s)" % finding["route"] if finding["route"] else "",
                "api_base" if finding["kind"] == "api_base" else "target",
                finding["target"], finding["status"],
                " - %s" % finding["detail"] if finding["detail"] else "")
            for finding in bad))


def check_routes(path, seats, yaml_nodes, repoint=False, external_hosts=(), strict=True,
                 backup_tag="routes", backup_date=None, check_mode=False,
                 hide=lambda secret: None, scope_hosts=(), limits=False):
    """gateway_routes: audit the config at ``path`` and, with ``repoint``, rewrite what moved,
    and with ``limits`` every declared model_info limit to what its seat serves (a dated backup
    first; the file keeps its owner and mode). ``(result,
    failure)``: the failure names every problem when ``strict`` and any target is wrong (all
    or nothing: a half-repointed gateway is harder to reason about than the old one).
    ``hide(key)`` is called with every key written in the file, before anything is returned."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise RouteAuditError("path: cannot read the LiteLLM config %s: %s" % (path, exc.strerror)) from None
    except UnicodeDecodeError as exc:
        raise RouteAuditError("path: %s is not UTF-8 text: %s" % (path, exc)) from None
    try:
        check_backup_name_parts(backup_date, backup_tag)
    except BackupError as exc:
        raise RouteAuditError(str(exc)) from None
    findings, spans = audit(text, seats, yaml_nodes, external_hosts, path, scope_hosts)
    for key in literal_keys(text, yaml_nodes):
        hide(key)
    new_text, rewrites = text, []
    if repoint:
        new_text, rewrites = rewrite(text, findings, spans, yaml_nodes, path)
        if rewrites:
            findings, spans = audit(new_text, seats, yaml_nodes, external_hosts, path, scope_hosts)
    if limits:
        # after the repoint: a moved route is held to the limits of the seat it now points at
        new_text, limited = rewrite_limits(new_text, findings, spans, yaml_nodes, path)
        if limited:
            rewrites += limited
            findings, spans = audit(new_text, seats, yaml_nodes, external_hosts, path, scope_hosts)
    problems = problems_message(findings, path)
    result = {"changed": False, "targets": findings, "rewrites": rewrites,
              "problems": sum(1 for finding in findings if finding["status"] in PROBLEMS),
              "backup_file": None}
    if problems and strict:
        return result, problems
    if rewrites:
        result["changed"] = True
        result["diff"] = {"before": text, "after": new_text, "before_header": path, "after_header": path}
        if not check_mode:
            result["backup_file"] = backup_path_for(path, backup_date, backup_tag)
            make_backup(path, result["backup_file"])
            mode = current_mode(path)  # None: removed since it was read; it may hold keys
            replace_file(path, new_text, 0o600 if mode is None else mode)
    return result, None
