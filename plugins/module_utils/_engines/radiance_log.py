# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""radiance 1.8.1's boot ledger, read from a seat's log. The engine prints its split before it
allocates anything, in this order::

    VRAM budget, per card: [0] 26624 MiB, [1] 27320 MiB
    claimable: 24517 MiB a card = card total 26624 - already held 512 - drift 64 - ...
    elastic: 18373 MiB a card = claimable 24517 - static weights 6144
    experts / kv cache: 11008 MiB / 7365.00 MiB a card (expert floor 11008 MiB)
    kv: the cache can grow to 7.19 GiB a card -- 209488 tokens of context, 3 sessions at 65536
    [0] pools: vram_kv 7722565632 bytes (13093 blocks of 16 tokens), experts 11008 MiB, free 96 MiB
    pinned host memory: 67455.84 MiB (2 x host pool 30720 + ...)
    mover: 3 slots can be lent out of the activation arena (987 MiB)

and under load ``mover: lent 2 slots (658 MiB) to the expert slab``. Only the last boot in the
log counts (a restarted container keeps its earlier runs).
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

_BUDGET = lazy_regex(r"VRAM budget, per card: (?P<cards>(?:\[\d+\] \d+ MiB,? ?)+)")
_CARD = lazy_regex(r"\[(\d+)\] (\d+) MiB")
_LINES = {
    "capacity_mib": lazy_regex(r"\bclaimable: (-?\d+) MiB a card"),
    "elastic_mib": lazy_regex(r"\belastic: (-?\d+) MiB a card"),
    "experts": lazy_regex(r"\bexperts / kv cache: (\d+) MiB / ([\d.]+) MiB a card \(expert floor (\d+) MiB\)"),
    "kv": lazy_regex(r"\bkv: the cache can grow to ([\d.]+) GiB a card -- (\d+) tokens of context, (\d+) sessions at (\d+)"),
    "pin_ledger_mib": lazy_regex(r"\bpinned host memory: ([\d.]+) MiB"),
    "mover_slots": lazy_regex(r"\bmover: (\d+) slots can be lent"),
}
_POOLS = lazy_regex(r"\[(\d+)\] pools: vram_kv (\d+) bytes")
_LENT = lazy_regex(r"\bmover: lent (\d+) slots \(([\d.]+) MiB\)")
_ERROR = lazy_regex(r"\b(ERROR|FATAL)\b.*")
_VERSION = lazy_regex(r"\bradiance (\d+\.\d+\.\d+)\b")


class RadianceLogError(ValueError):
    """A log with no boot ledger in it."""


def parse_ledger(text):
    """The last boot's ledger: ``card_total_mib`` ({card: MiB}), ``capacity_mib``,
    ``elastic_mib``, ``experts_mib``, ``kv_mib``, ``expert_floor_mib``, ``kv_gib``,
    ``kv_tokens``, ``sessions``, ``session_tokens``, ``pools`` ({card: vram_kv bytes}),
    ``pin_ledger_mib``, ``mover_slots``, ``mover_lent_slots``, ``mover_lent_mib``,
    ``version``, ``errors``."""
    lines = (text or "").splitlines()
    starts = [number for number, line in enumerate(lines) if _BUDGET.search(line)]
    if not starts:
        errors = [match.group(0) for match in map(_ERROR.search, lines) if match]
        raise RadianceLogError("the log has no boot ledger (no 'VRAM budget, per card' line)%s"
                               % ("; it says: " + errors[-1] if errors else ""))
    version = None
    for line in lines[:starts[-1]]:
        found = _VERSION.search(line)
        version = found.group(1) if found else version
    boot = lines[starts[-1]:]
    ledger = {"card_total_mib": {int(card): int(mib) for card, mib in _CARD.findall(_BUDGET.search(boot[0]).group("cards"))},
              "pools": {}, "mover_lent_slots": 0, "mover_lent_mib": 0.0, "version": version, "errors": []}
    for line in boot:
        for key, pattern in _LINES.items():
            found = pattern.search(line)
            if not found:
                continue
            if key == "experts":
                ledger.update(experts_mib=int(found.group(1)), kv_mib=float(found.group(2)),
                              expert_floor_mib=int(found.group(3)))
            elif key == "kv":
                ledger.update(kv_gib=float(found.group(1)), kv_tokens=int(found.group(2)),
                              sessions=int(found.group(3)), session_tokens=int(found.group(4)))
            elif key == "pin_ledger_mib":
                ledger[key] = float(found.group(1))
            else:
                ledger[key] = int(found.group(1))
        for card, vram_kv in _POOLS.findall(line):
            ledger["pools"][int(card)] = int(vram_kv)
        lent = _LENT.search(line)
        if lent:
            ledger["mover_lent_slots"] += int(lent.group(1))
            ledger["mover_lent_mib"] = round(ledger["mover_lent_mib"] + float(lent.group(2)), 2)
        error = _ERROR.search(line)
        if error:
            ledger["errors"].append(error.group(0))
    return ledger
