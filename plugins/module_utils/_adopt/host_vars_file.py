# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The host_vars file adopt writes, as YAML text. Every string in it came from a host (a command
line, a label, an environment, a name, a mount) except the references adopt makes itself, so
every string that could be read as a template (any with a ``{``: every Jinja marker starts with
one) is written ``!unsafe``, at every depth and as a key too: Ansible loads it as data and never
templates it. A string without one is written double-quoted, so it stays a string (Ansible
resolves an ``!unsafe`` scalar's type as if it were plain: ``!unsafe "yes"`` would load as a
boolean). Only a ``Template`` (a vault variable's reference, the inventory's directory), built
by adopt from names it checked, is written as a template. Pure standard library: the text is
made where the data is, not by a dumper that would have to be told."""

from __future__ import annotations

import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# A key written bare: a name that cannot hold a template marker and that YAML 1.1 does not read
# as a boolean or null.
_BARE_KEY_RE = lazy_regex(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null"}
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


class Template(str):
    """A template adopt wrote itself, from names it checked: the one kind of string written so
    that Ansible templates it."""


def _printable(char):
    """What a YAML double-quoted scalar may hold as it is (YAML 1.1's printable set, less the
    line breaks it would fold)."""
    point = ord(char)
    return (0x20 <= point <= 0x7E or 0xA0 <= point <= 0xD7FF or 0xE000 <= point <= 0xFFFD
            or 0x10000 <= point <= 0x10FFFF) and point not in (0x2028, 0x2029, 0xFEFF)


def _quoted(text):
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif _printable(char):
            out.append(char)
        elif ord(char) <= 0xFF:
            out.append("\\x%02x" % ord(char))
        else:
            out.append("\\u%04x" % ord(char))
    return '"%s"' % "".join(out)


def _scalar(value):
    if isinstance(value, Template):
        return _quoted(value)
    if isinstance(value, str):
        return "!unsafe " + _quoted(value) if "{" in value else _quoted(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    raise TypeError("adopt writes no %s" % type(value).__name__)


def _key(key):
    if isinstance(key, str) and _BARE_KEY_RE.match(key) and key.lower() not in _YAML_WORDS:
        return key
    return _scalar(key)


def _lines(value, indent):
    pad = " " * indent
    if isinstance(value, dict) and value:
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                yield "%s%s:" % (pad, _key(key))
                yield from _lines(item, indent + 2)
            else:
                yield "%s%s: %s" % (pad, _key(key), _inline(item))
    elif isinstance(value, list) and value:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = list(_lines(item, indent + 2))
                yield "%s- %s" % (pad, nested[0].lstrip())
                yield from nested[1:]
            else:
                yield "%s- %s" % (pad, _inline(item))
    else:
        yield pad + _inline(value)


def _inline(value):
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump(variables):
    """``variables`` (a mapping) as YAML lines, each string from a host that could be read as a
    template ``!unsafe``."""
    return "\n".join(_lines(variables, 0)) + "\n"
