# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The order in which a host's seats change: which stop first, and the boot waves.

Seats that leave the host, move to another GPU or shrink stop first, so the memory they hold
is free before anything boots. A seat another replaces (a model swap) leaves by going to sleep:
kept stopped to fall back on; a dormant seat is removed only once llmfleet_retire names it, and
only after every gate of the window passed. Every seat whose files changed, or that should run
and does not, then boots in waves: one seat per GPU per wave (a multi-GPU seat takes a slot on
each of its GPUs), so GPUs boot in parallel and no two seats co-boot on one card, which is where
vLLM's profile charges a neighbour's memory to the wrong seat. Within a GPU the largest
footprint boots first: if something does not fit, it fails before the small seats move. The
waves are an order, not a barrier: ``boot`` starts each seat as soon as the seat before it on
each of its GPUs is up.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import ReadingError, seat_mib


class StepsError(ValueError):
    """Inputs that do not describe one host's plan and state."""


def rebalance_steps(plan, changed, running, cards, published=None, dormant=None):
    """``{"stop_first": [...], "waves": [[...], ...], "leaving": [...], "sleeping": {...},
    "retiring_dormant": [...], "unchanged": [...]}``.

    ``plan`` is the host's plan (``seats`` with ``name``, ``gpus``, ``footprint_mib``, ``port``
    and ``replaces``; ``retire``: the seats it may stop that it no longer lists; any other running
    one is refused); ``changed`` the seats whose files changed; ``running`` the managed seats
    running now (names); ``cards`` a gpu_info result read now (for what each running seat holds);
    ``published`` the port each running seat publishes now, and ``dormant`` the dormant seats on
    the host (seat_runtime_info's). ``sleeping`` maps each leaving seat a plan seat replaces to
    that seat (it is kept dormant, not removed); ``retiring_dormant`` lists the dormant seats the
    plan retires.
    """
    if not isinstance(plan, dict) or not isinstance(plan.get("seats"), list) or not all(
            isinstance(seat, dict) and isinstance(seat.get("name"), str) and isinstance(seat.get("gpus"), list)
            and all(isinstance(gpu, str) for gpu in seat["gpus"])
            and isinstance(seat.get("footprint_mib"), int) for seat in plan["seats"]):
        raise StepsError("plan: expected a seat_plan result with a 'seats' list (name, gpus, footprint_mib)")
    if not all(isinstance(names, list) and all(isinstance(n, str) for n in names)
               for names in (changed or [], running or [], plan.get("retire") or [])):
        raise StepsError("changed, running and the plan's retire: expected lists of seat names")
    seats = {seat["name"]: seat for seat in plan["seats"]}
    changed, running = set(changed or []), set(running or [])
    unknown = changed - set(seats)
    if unknown:
        raise StepsError("changed: %s not in the plan" % ", ".join(sorted(unknown)))

    try:
        holders = seat_mib(cards)
    except ReadingError as exc:
        raise StepsError("cards: %s" % exc) from None

    leaving = sorted(running - set(seats))
    replacing = {seat["replaces"]: seat["name"] for seat in plan["seats"] if seat.get("replaces")}
    kept = [name for name in leaving if name not in (plan.get("retire") or []) and name not in replacing]
    if kept:
        raise StepsError("host %s: %s run%s here but the inventory no longer lists %s; a seat is only "
                         "stopped when llmfleet_retire names it, or kept dormant when a seat says replaces: "
                         "<it> (or list it in llmfleet_seats again)"
                         % (plan.get("host"), ", ".join(kept), "s" if len(kept) == 1 else "",
                            "it" if len(kept) == 1 else "them"))
    sleeping = {name: replacing[name] for name in leaving if name in replacing}
    for old, new in sorted(sleeping.items()):
        port = (published or {}).get(old)
        if port is not None and port != seats[new].get("port"):
            raise StepsError("host %s: seat %s replaces %s, which publishes port %s; expected port %s on %s too "
                             "(the gateway's routes stay as they are, and a rollback starts %s there again)"
                             % (plan.get("host"), new, old, port, port, new, old))
    retiring_dormant = sorted(name for name in (dormant or {})
                              if name in (plan.get("retire") or []) and name not in running)
    stop_first = list(leaving)
    for name in sorted(changed & running):
        seat = seats[name]
        held = holders.get(name, {})
        moves = bool(held) and set(held) != set(seat["gpus"])
        shrinks = any(mib > seat["footprint_mib"] for mib in held.values())
        if moves or shrinks:
            stop_first.append(name)

    to_boot = [seats[name] for name in seats if name in changed or name not in running]
    to_boot.sort(key=lambda seat: (-len(seat["gpus"]), -seat["footprint_mib"], seat["name"]))
    waves = []
    for seat in to_boot:
        for wave in waves:
            if not wave["gpus"] & set(seat["gpus"]):
                wave["gpus"] |= set(seat["gpus"])
                wave["seats"].append(seat["name"])
                break
        else:
            waves.append({"gpus": set(seat["gpus"]), "seats": [seat["name"]]})
    return {
        "stop_first": stop_first,
        "waves": [wave["seats"] for wave in waves],
        "leaving": leaving,
        "sleeping": sleeping,
        "retiring_dormant": retiring_dormant,
        "unchanged": sorted(name for name in seats if name not in changed and name in running),
    }
