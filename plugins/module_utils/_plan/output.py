# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The plan's output, and the one owner of its files: a host's plan as Markdown and as an SVG bar
per GPU, the sizing table (seat_sizing), and llmfleet.seats.seat_plan's work: plan one host and
write ``<host>-plan.json``, ``<host>-plan.md`` and ``<host>-plan.svg`` when asked. The module and
its action plugin (the same work in the controller's own process) both call seat_plan() with
arguments checked against SEAT_PLAN_SPEC. The window's report (_rollout.report) renders the plan
with these functions and writes its own files through write_text(); it writes none of these."""

from __future__ import annotations

import datetime
import json
import os

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import (
    ALL_INTERFACES,
    BIND_ADDRESS,
    DEMAND_LOW_USE,
    MARGIN_MIB,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import human_bytes
from ansible_collections.llmfleet.seats.plugins.module_utils._common.svg import escape
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import engine_of
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import HOST_OPTIONS, build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import DEFAULT_OVERHEAD_MIB
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import release_note

# Distinct, colour-blind-safe fills (Okabe-Ito), cycled over a GPU's seats.
_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
            "#7F7F7F")


def mib_cell(value):
    """A MiB figure as a table shows it: thousands separated, ``-`` for none."""
    return "-" if value is None else "{:,}".format(value)


def _seat_rows(plan, gpu):
    by_name = {seat["name"]: seat for seat in plan["seats"]}
    return [by_name[name] for name in gpu["seats"]]


def _proof(plan):
    """What the placement search proved before its step budget ran out."""
    if plan["optimal"]:
        return " (proven optimal)"
    gap = plan["bound_mib"] - plan["worst_spare_mib"]
    if not gap:
        return " (proven the best worst spare; the moves are the fewest found, not proven fewest)"
    return (" (best found, NOT proven optimal: within %s MiB of the best, no placement does "
            "better than %s MiB)" % (mib_cell(gap), mib_cell(plan["bound_mib"])))


def plan_markdown(plan):
    """The plan of one host: per GPU its seats with KV, tokens, concurrency, footprint and boot
    gate, then spare at plateau and at boot; the moves and the warnings last."""
    lines = ["## %s" % plan["host"], ""]
    lines.append("Worst spare at plateau: **%s MiB**%s. Moves: %s." % (
        mib_cell(plan["worst_spare_mib"]), _proof(plan), ", ".join(plan["moves"]) or "none"))
    lines.append("")
    lines.append("| GPU | seat | KV budget | KV tokens | concurrency | footprint MiB "
                 "(weights + KV + overhead) | util (boot gate) | from |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for gpu in plan["gpus"]:
        label = "%d `%s`" % (gpu["index"], gpu["uuid"][:12])
        if gpu["keep_clear"]:
            lines.append("| %s | *kept clear* | | | | | | |" % label)
            continue
        for seat in _seat_rows(plan, gpu):
            kv, tokens, conc = engine_of(seat).plan_cells(seat)
            util = "-" if seat["gpu_memory_utilization"] is None else "%.2f" % seat["gpu_memory_utilization"]
            parts = "%s + %s + %s" % (mib_cell(seat["weights_mib"]), mib_cell(seat["kv_mib"]),
                                      mib_cell(seat["overhead_mib"]))
            moved = "moved from %s" % ", ".join(seat["current_gpus"]) if seat["moved"] else (
                "stays" if seat["current_gpus"] else "new")
            lines.append("| %s | %s | %s | %s | %s | %s (%s) | %s | %s |" % (
                label, seat["name"], kv, tokens, conc, mib_cell(seat["footprint_mib"]), parts, util,
                moved))
    lines.append("")
    lines.append("| GPU | total MiB | not ours MiB | seats MiB | spare at plateau MiB | "
                 "spare at boot MiB |")
    lines.append("|---|---|---|---|---|---|")
    for gpu in plan["gpus"]:
        lines.append("| %d | %s | %s | %s | %s | %s |" % (
            gpu["index"], mib_cell(gpu["total_mib"]), mib_cell(gpu["background_mib"]),
            mib_cell(gpu["footprint_mib"]), mib_cell(gpu["spare_mib"]), mib_cell(gpu["spare_at_boot_mib"])))
    lines += ["", "| seat | GPU now → planned | holds now → footprint MiB | context now → planned | "
              "KV now → planned | KV tokens now → planned | concurrency now → planned |",
              "|---|---|---|---|---|---|---|"]
    index = {gpu["uuid"]: gpu["index"] for gpu in plan["gpus"]}
    for seat in plan["seats"]:
        now = seat.get("now") or {}
        lines.append("| %s | %s → %s | %s → %s | %s → %s | %s → %s | %s → %s | %s → %s |" % (
            seat["name"], ", ".join(str(index.get(u, u)) for u in now.get("gpus") or []) or "not running",
            ", ".join(str(index.get(u, u)) for u in seat["gpus"]), mib_cell(now.get("held_mib")),
            mib_cell(seat["footprint_mib"]), mib_cell(now.get("max_model_len")), mib_cell(seat.get("max_model_len")),
            _gib(now.get("kv_cache_memory_bytes")), _gib(seat.get("kv_cache_memory_bytes")),
            mib_cell(now.get("kv_cache_tokens")), mib_cell(seat.get("kv_cache_tokens")),
            _times(now.get("max_concurrency")), _times(seat.get("max_concurrency"))))
    lines += ["", "| seat | runtime | image | exposure | KV arithmetic |", "|---|---|---|---|---|"]
    for seat in plan["seats"]:
        image = (seat.get("launch") or {}).get("image", "")
        lines.append("| %s | %s | `%s`%s | %s | %s |" % (seat["name"], seat.get("runtime", "compose"), image,
                                                         " (pinned by digest)" if "sha256:" in image else "",
                                                         _exposure(seat), _arithmetic(seat)))
    everywhere = ["%s (%s)" % (seat["name"], _published(seat)) for seat in plan["seats"] if _on_all_interfaces(seat)]
    if everywhere:
        lines += ["", "- **published on all interfaces**: %s: reachable from every network the host is on; "
                  "bind_address names the one address the gateway comes in on" % ", ".join(everywhere)]
    swaps = ["%s replaces %s" % (seat["name"], seat["replaces"]) for seat in plan["seats"] if seat.get("replaces")]
    if swaps:
        lines += ["", "- **model swap**: %s: the replaced seat is stopped first and kept dormant (stopped, labelled, "
                  "no restart policy) to fall back on; a rollback starts it again, and llmfleet_retire removes it"
                  % "; ".join(swaps)]
    if plan.get("retire"):
        lines += ["", "- **retired**: %s: stopped and removed by the window (a dormant one once every gate passed)"
                  % ", ".join(plan["retire"])]
    for seat in plan["seats"]:
        notes = engine_of(seat).plan_notes(seat)
        if notes:
            lines += [""] + notes
    lines += calibration_markdown(plan["seats"])
    lines += watch_markdown(plan.get("last_watch"))
    written = ["%s: %s" % (seat["name"], ", ".join("%s %s" % item for item in seat["declared_sizes"].items()))
               for seat in plan["seats"] if seat.get("declared_sizes")]
    if written:
        lines += ["", "Sizes as the inventory wrote them: %s." % "; ".join(written)]
    if plan.get("warnings"):
        lines.append("")
        lines += ["- warning: %s" % warning for warning in plan["warnings"]]
    return "\n".join(lines) + "\n"


def _gib(num_bytes):
    return human_bytes(num_bytes, "GiB") if num_bytes else "-"


def _times(concurrency):
    """Concurrency at the context, as vLLM prints it (``64.00x``)."""
    return "-" if concurrency is None else "%.2fx" % concurrency


def _bind_address(seat):
    return (seat.get("launch") or {}).get("bind_address", BIND_ADDRESS)


def _on_all_interfaces(seat):
    return _bind_address(seat) in ALL_INTERFACES


def _published(seat):
    address = _bind_address(seat)
    return "%s:%s" % ("[%s]" % address if ":" in address else address, seat["port"])


def _exposure(seat):
    """Where a seat can be reached from: its published address and port, flagged when that is
    every interface, and the networks it joins."""
    text = "`%s`%s" % (_published(seat), " **all interfaces**" if _on_all_interfaces(seat) else "")
    networks = (seat.get("launch") or {}).get("networks") or []
    if networks:
        text += "; networks: %s" % ", ".join("%s%s" % (network["name"], " (external)" if network["external"] else "")
                                             for network in networks)
    return text


def _arithmetic(seat):
    """Which vLLM release's KV arithmetic planned a seat, and how its version was known (or
    which radiance release's funding formula)."""
    if seat.get("radiance_release"):
        return "radiance %s funding formula" % seat["radiance_release"]
    release = seat.get("vllm_release")
    if not release:
        return "-"
    note = release_note(release)
    if note:
        return note
    shown = "vLLM %s (%s)" % (release["version"], release.get("from", "image tag"))
    return shown if release["version"] == release["release"] else "%s, as %s" % (shown, release["release"])


def sizing_markdown(host, sizing):
    """Every seat of a host as its engine sizes it (playbooks/kv_sizing.yml), before placing:
    KV budget and the rule that chose it, KV tokens, concurrency, footprint with the default
    overhead, and whether vLLM would boot; the problems last."""
    lines = ["## %s: sizing" % host, "",
             "| seat | KV budget | KV tokens | concurrency | footprint MiB (weights + KV + overhead) | boots |",
             "|---|---|---|---|---|---|"]
    for seat in sizing["seats"]:
        kv, tokens, conc = engine_of(seat).plan_cells(seat)
        parts = "%s + %s + %s" % (mib_cell(seat["weights_mib"]), mib_cell(seat["kv_mib"]), mib_cell(seat["overhead_mib"]))
        lines.append("| %s | %s | %s | %s | %s (%s) | %s |" % (
            seat["name"], kv, tokens, conc, mib_cell(seat["footprint_mib"]), parts,
            "yes" if seat["boot_ok"] else "**NO**"))
    lines += calibration_markdown(sizing["seats"])
    if sizing["problems"]:
        lines.append("")
        lines += ["- %s" % problem for problem in sizing["problems"]]
    return "\n".join(lines) + "\n"


def calibration_markdown(seats):
    """What measured demand says beside the plan, for the seats a demand snapshot has figures
    for: the peak KV in use, the budget the rule gives and the one demand needs (the seat is
    sized by the one its inventory names), replies past the output cap, and KV never much used.
    No lines without figures."""
    measured = [seat for seat in seats if seat.get("calibration")]
    if not measured:
        return []
    factor = measured[0]["calibration"]["demand_factor"]
    lines = ["", "### Measured demand beside the plan", "",
             "| seat | requests | peak KV in use | KV by rule | KV by demand (peak x %s) | sized by | note |" % factor,
             "|---|---|---|---|---|---|---|"]
    for seat in measured:
        cal = seat["calibration"]
        usage = "" if cal["peak_kv_usage"] is None else " (%.0f%% of its KV then)" % (100 * cal["peak_kv_usage"])
        by_rule, by_demand = _gib(cal["by_rule_bytes"]), _gib(cal["by_demand_bytes"])
        chosen = "**%s**" % cal["sized_by"]
        lines.append("| %s | %s | %s tokens%s | %s (%s) | %s | %s | %s |" % (
            seat["name"], mib_cell(cal["requests"]), mib_cell(cal["peak_kv_tokens"]), usage, by_rule, cal["by_rule"],
            by_demand, chosen, "; ".join(_calibration_notes(cal))))
    return lines


def _text_cell(value):
    """Text from a file on the controller, as one table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def watch_markdown(watch):
    """How the cards settled after the window before (a plateau snapshot's watch): per card its
    plateau, least free, creep and verdict; each seat held above its planned footprint."""
    if not watch:
        return []
    window = watch["window"]
    lines = ["", "### How the cards settled after the last window", "",
             "Read at %s, from %s (%s of boot transient left out)%s." % (
                 _utc(window["at"]), _utc(window["since"] + window["settle_s"]), _hours(window["settle_s"]),
                 "; snapshot `%s`" % _text_cell(watch["snapshot"]) if watch.get("snapshot") else ""),
             "", "| GPU | plateau MiB | least free MiB | plan's spare MiB | creep MiB/h | verdict |",
             "|---|---|---|---|---|---|"]
    for card in watch["gpus"]:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            card["index"], mib_cell(card.get("plateau_used_mib")), mib_cell(card.get("least_free_mib")),
            mib_cell(card.get("predicted_spare_mib")),
            "-" if card.get("creep_mib_per_hour") is None else "%+.1f" % card["creep_mib_per_hour"],
            _text_cell("; ".join(card.get("flags") or []) or "settled as planned")))
    grew = [seat for seat in watch["seats"] if (seat.get("over_plan_mib") or 0) > 0]
    if grew:
        lines += ["", "Seats holding more than their planned footprint then: %s." % "; ".join(
            "%s on GPU %s %s MiB (+%s)" % (_text_cell(seat["seat"]), seat["index"], mib_cell(seat.get("held_mib")),
                                           mib_cell(seat["over_plan_mib"])) for seat in grew)]
    return lines


def _utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _hours(seconds):
    return "%gh" % round(seconds / 3600, 2) if seconds >= 3600 else "%ds" % seconds


def _calibration_notes(cal):
    notes = []
    runaways, cap = cal.get("runaways"), cal.get("max_new_tokens")
    if runaways and runaways["replies"] and (cap is None or cap > runaways["longer_than"]):
        notes.append("%d repl%s longer than %s tokens: an output cap (max_new_tokens) at %s would have cut %s" % (
            runaways["replies"], "y" if runaways["replies"] == 1 else "ies", "{:,}".format(runaways["longer_than"]),
            "{:,}".format(runaways["longer_than"]), "it" if runaways["replies"] == 1 else "them"))
    if cal["peak_kv_usage"] is not None and cal["peak_kv_usage"] < DEMAND_LOW_USE:
        notes.append("its KV was never more than %.0f%% used" % (100 * cal["peak_kv_usage"]))
    return notes


def _bar(rows, top, height, segments, scale, x):
    """Stacked rectangles for ``(name, mib, fill)``, labelled where wide enough; the x after."""
    for name, mib, fill in segments:
        if not mib:
            continue
        w = mib * scale
        rows.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#FFFFFF">'
                    '<title>%s: %s MiB</title></rect>' % (x, top, w, height, fill, escape(name), mib_cell(mib)))
        if w > 7 * len(name) + 8:
            rows.append('<text x="%.1f" y="%d" class="in">%s</text>' % (x + 4, top + height // 2 + 4, escape(name)))
        x += w
    return x


def plan_svg(plan, width=960, measured=None):
    """One stacked bar per GPU: memory not ours, each seat at plateau, the spare. Labels sit in
    the segments that are wide enough and in a legend under each bar. With ``measured`` (the
    window report's cards_summary read after the window) each GPU also gets the bar of what it
    held then."""
    margin, bar_height, row = 16, 34, 96 if measured is None else 150
    measured_by_uuid = {gpu.get("uuid"): gpu for gpu in measured or []}
    bar_width = width - 2 * margin
    rows = []
    for row_index, gpu in enumerate(plan["gpus"]):
        top = margin + 28 + row_index * row
        total = max(gpu["total_mib"], 1)
        scale = bar_width / total
        title = "GPU %d %s: %s MiB" % (gpu["index"], gpu.get("name") or gpu["uuid"],
                                       mib_cell(gpu["total_mib"]))
        if gpu["keep_clear"]:
            title += " (kept clear)"
        rows.append('<text x="%d" y="%d" class="title">%s</text>' % (margin, top - 8, escape(title)))
        segments = [("not ours", gpu["background_mib"], "#BBBBBB")]
        fills = {}
        for seat_index, seat in enumerate(_seat_rows(plan, gpu)):
            # a footprint is per GPU: a tensor-parallel seat holds it on each of its GPUs
            fills[seat["name"]] = _PALETTE[seat_index % len(_PALETTE)]
            segments.append((seat["name"], seat["footprint_mib"], fills[seat["name"]]))
        x = _bar(rows, top, bar_height, segments, scale, float(margin))
        legend = ["%s %s" % (name, mib_cell(mib)) for name, mib, _fill in segments if mib]
        spare = gpu["spare_mib"]
        spare_w = max(margin + bar_width - x, 0)
        rows.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#spare)" '
                    'stroke="#888888"><title>spare at plateau: %s MiB</title></rect>'
                    % (x, top, spare_w, bar_height, mib_cell(spare)))
        legend.append("spare %s MiB (at boot %s)" % (mib_cell(spare), mib_cell(gpu["spare_at_boot_mib"])))
        rows.append('<text x="%d" y="%d" class="legend">%s%s</text>'
                    % (margin, top + bar_height + 16, "" if measured is None else "planned: ",
                       escape(" | ".join(legend))))
        if measured is not None:
            _measured_bar(rows, measured_by_uuid.get(gpu["uuid"]), fills, top + bar_height + 26,
                          bar_height, scale, margin, bar_width)
    height = margin * 2 + 28 + len(plan["gpus"]) * row
    heading = ("memory per GPU at plateau" if measured is None
               else "memory per GPU: planned at plateau, and measured after the window")
    return "\n".join([
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="sans-serif">' % (width, height, width, height),
        '<style>.title{font-size:14px;font-weight:bold}.in{font-size:12px;fill:#FFFFFF}'
        '.legend{font-size:11px;fill:#333333}</style>',
        '<defs><pattern id="spare" width="8" height="8" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="8" height="8" fill="#FFFFFF"/>'
        '<line x1="0" y1="0" x2="0" y2="8" stroke="#9ACD32" stroke-width="3"/></pattern></defs>',
        '<text x="%d" y="%d" class="title">%s: %s (worst spare %s MiB)</text>'
        % (margin, margin + 4, escape(plan["host"]), heading, mib_cell(plan["worst_spare_mib"])),
    ] + rows + ["</svg>"]) + "\n"


def _measured_bar(rows, card, fills, top, height, scale, margin, bar_width):
    """What the card held when it was read after the window: each seat in its plan colour,
    everything else grey, the free memory hatched."""
    if not card or card.get("memory_used_mib") is None:
        rows.append('<text x="%d" y="%d" class="legend">measured after the window: not read</text>'
                    % (margin, top + height // 2))
        return
    holders = card.get("holders_mib") or {}
    seats = [(name, mib, fills[name]) for name, mib in sorted(holders.items()) if name in fills]
    others = max(card["memory_used_mib"] - sum(mib for _name, mib, _fill in seats), 0)
    segments = [("not ours", others, "#BBBBBB")] + seats
    x = _bar(rows, top, height, segments, scale, float(margin))
    free = card.get("memory_free_mib") or 0
    rows.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#spare)" stroke="#888888">'
                '<title>free after the window: %s MiB</title></rect>'
                % (x, top, max(margin + bar_width - x, 0), height, mib_cell(free)))
    legend = ["%s %s" % (name, mib_cell(mib)) for name, mib, _fill in segments if mib] + ["free %s MiB" % mib_cell(free)]
    rows.append('<text x="%d" y="%d" class="legend">measured after the window: %s</text>'
                % (margin, top + height + 16, escape(" | ".join(legend))))


class PlanOutputError(ValueError):
    """A directory the plan's files cannot be written into."""


def write_text(path, text, check_mode):
    """Replace ``path`` with ``text`` (mode 0644) atomically when it differs; the text it had
    ("" for none) when it did (or would), else None."""
    old = None
    if os.path.exists(path):
        with open(path) as handle:
            old = handle.read()
    if old == text:
        return None
    if not check_mode:
        replace_file(path, text, 0o644)
    return old or ""


def write_plan_files(output_dir, host, plan, markdown, svg, check_mode):
    """``<host>-plan.json``, ``<host>-plan.md`` and ``<host>-plan.svg`` in ``output_dir`` (made
    0755 when missing); ``(changed, paths, diffs)``, a diff for each file that changes."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise PlanOutputError("output_dir %s: not a directory; name a directory for the plan files" % output_dir)
    if not check_mode:
        os.makedirs(output_dir, mode=0o755, exist_ok=True)
    files = {"%s-plan.json" % host: json.dumps(plan, indent=4, sort_keys=True) + "\n",
             "%s-plan.md" % host: markdown, "%s-plan.svg" % host: svg}
    diffs = []
    for name, text in files.items():
        path = os.path.join(output_dir, name)
        before = write_text(path, text, check_mode) if os.path.isdir(output_dir) else ""
        if before is not None:
            diffs.append({"before_header": path, "after_header": path, "before": before, "after": text})
    return bool(diffs), [os.path.join(output_dir, name) for name in files], diffs


SEAT_PLAN_SPEC = {
    **HOST_OPTIONS,
    "cards": {"type": "dict"},
    "plateau": {"type": "dict"},
    "plateau_kv": {"type": "dict"},
    "plateau_kv_planned": {"type": "bool", "default": False},
    "plateau_ran": {"type": "dict"},
    "accept": {"type": "raw"},
    "retire": {"type": "raw"},
    "min_spare_mib": {"type": "int", "default": 0},
    "boot_margin_mib": {"type": "int", "default": MARGIN_MIB},
    "default_overhead_mib": {"type": "int", "default": DEFAULT_OVERHEAD_MIB},
    "output_dir": {"type": "path"},
}


def seat_plan(params, check_mode=False, diff=False):
    """The module's result: ``plan``, ``markdown``, ``svg``, and with ``output_dir`` the
    ``files`` written there (``changed`` when one of them changed)."""
    params = dict(params)
    output_dir = params.pop("output_dir")
    plan = build_plan(**params)
    result = {"changed": False, "plan": plan, "markdown": plan_markdown(plan), "svg": plan_svg(plan)}
    if output_dir:
        changed, files, diffs = write_plan_files(output_dir, plan["host"], plan, result["markdown"],
                                                 result["svg"], check_mode)
        result.update(changed=changed, files=files)
        if diff and diffs:
            result["diff"] = diffs
    return result
