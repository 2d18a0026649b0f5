# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Byte sizes as operators write them, and as vLLM parses them.

Pure standard library: the same functions serve modules on the GPU host and filters on the
controller.
"""

from __future__ import annotations

import decimal
import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

KIB = 1024
MIB = 1024 ** 2
GIB = 1024 ** 3
TIB = 1024 ** 4
PIB = 1024 ** 5
# No size an operator means is above this: 1e30 is a typo.
LARGEST = PIB

# vLLM's `human_readable_int` (utils/argparse_utils.py): one letter, lowercase is decimal,
# uppercase is binary and takes no decimals ("8.5G" is an error there, so it is here too).
_VLLM_SUFFIX = {
    "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12,
    "K": KIB, "M": MIB, "G": GIB, "T": TIB,
}
# Spelled-out units are unambiguous, so case does not matter and decimals are fine.
_UNIT = {
    "b": 1,
    "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB,
    "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
}
_SIZE_RE = lazy_regex(r"\A\s*(?P<num>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-z]*)\s*\Z")
_VLLM_INT_RE = lazy_regex(r"\A(\d+(?:\.\d+)?)([kKmMgGtT])\Z")


class SizeError(ValueError):
    """A size that cannot be read; the message says what was expected."""


def to_bytes(value, what="size"):
    """Return a plain int of bytes from an int or a size string.

    Accepts plain integers (``8589934592``, ``"8589934592"``), vLLM's own suffixes (``8G`` binary,
    ``8g`` decimal), IEC units (``22GiB``, ``5.5GiB``, ``512MiB``) and SI units (``8GB``).
    Fractions of a byte are dropped (``0.1GiB`` is 107374182 bytes). ``what`` names the value
    in the error message.
    """
    if isinstance(value, bool):
        raise SizeError("%s: expected a byte count or a size like 22GiB, got a boolean" % what)
    if isinstance(value, int):
        if value < 0:
            raise SizeError("%s: expected a non-negative byte count, got %d" % (what, value))
        return _plausible(value, what, value)
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0 or value != int(value):
            raise SizeError("%s: expected a whole, non-negative byte count, got %r" % (what, value))
        return _plausible(int(value), what, value)
    if not isinstance(value, str):
        raise SizeError("%s: expected a byte count or a size like 22GiB, got %s"
                        % (what, type(value).__name__))
    match = _SIZE_RE.match(value)
    if not match:
        raise SizeError("%s: cannot read %r as a size; expected e.g. 22GiB, 5.5GiB, 512MiB, "
                        "8G (binary), 8g (decimal) or a plain byte count" % (what, value))
    number, unit = match.group("num"), match.group("unit")
    if not unit:
        if "." in number:
            raise SizeError("%s: %r is a fraction of a byte; add a unit such as GiB" % (what, value))
        return int(number)
    if unit in _VLLM_SUFFIX:
        if unit.isupper() and "." in number:
            raise SizeError("%s: %r mixes decimals with the binary suffix %s (vLLM rejects it "
                            "too); write %s%s for decimal units or use GiB"
                            % (what, value, unit, number, unit.lower()))
        factor = _VLLM_SUFFIX[unit]
    elif unit.lower() in _UNIT:
        factor = _UNIT[unit.lower()]
    else:
        raise SizeError("%s: unknown unit %r in %r; expected B, KiB, MiB, GiB, TiB, KB, MB, GB, "
                        "TB or vLLM's K/M/G/T (binary) and k/m/g/t (decimal)" % (what, unit, value))
    return _plausible(int(decimal.Decimal(number) * factor), what, value)


def human_readable_int(text):
    """The integer vLLM reads from a flag's ``text`` (its ``human_readable_int``: ``32k`` is
    32000, ``32K`` 32768, ``8G`` 8 GiB, ``25.6k`` 25600), or None where vLLM would refuse it.
    Exact to vLLM, float arithmetic included (``1.001k`` is 1000 there), so what the collection
    reads back from a command line is what that vLLM runs; a negative number is None too (no
    count the collection reads back is negative). An operator's size is ``to_bytes``'s."""
    text = text.strip()
    match = _VLLM_INT_RE.match(text)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            scaled = float(number) * _VLLM_SUFFIX[suffix]
            return int(scaled) if math.isfinite(scaled) else None
        return int(number) * _VLLM_SUFFIX[suffix] if "." not in number else None
    try:
        number = int(text)
    except ValueError:
        return None
    return number if number >= 0 else None


def _plausible(num_bytes, what, value):
    if num_bytes > LARGEST:
        raise SizeError("%s: %r is more than %s; no GPU memory is that large" % (what, value, human_bytes(LARGEST)))
    return num_bytes


def human_bytes(num_bytes, unit=None, precision=2):
    """Render bytes with a binary unit: ``22 GiB``, ``5.5 GiB``, ``512 MiB``.

    With ``unit`` (``B``, ``KiB``, ``MiB``, ``GiB``, ``TiB``) that unit is used; otherwise the
    largest unit that keeps the number at or above 1. Trailing zeros are trimmed.
    """
    num_bytes = to_bytes(num_bytes, "num_bytes") if not isinstance(num_bytes, int) else num_bytes
    units = (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB), ("B", 1))
    if unit is not None:
        factors = dict(units)
        if unit not in factors:
            raise SizeError("unit: expected one of %s, got %r" % (", ".join(factors), unit))
        chosen = (unit, factors[unit])
    else:
        chosen = next(((name, factor) for name, factor in units if abs(num_bytes) >= factor),
                      ("B", 1))
    text = ("%.*f" % (precision, num_bytes / chosen[1])).rstrip("0").rstrip(".")
    return "%s %s" % (text, chosen[0])


def round_up(value, multiple):
    """The smallest multiple of ``multiple`` that is >= ``value`` (integers)."""
    if multiple <= 0:
        raise SizeError("round_up: the multiple must be positive, got %d" % multiple)
    return -(-value // multiple) * multiple


def bytes_to_mib(num_bytes):
    """Whole MiB, rounded up: memory a seat needs is never under-counted."""
    return -(-num_bytes // MIB)
