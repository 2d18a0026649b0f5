# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The window's report, and the one owner of its files: each host's section merged into
``report.json``, ``report.md`` rendered from all of them, and the host's ``<host>.svg`` (the
plan beside what the cards held after the window). The plan's own rendering and files are
_plan.output's; this renders the plan with it and writes nothing of the plan's."""

from __future__ import annotations

import json
import os

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import mib_cell, plan_markdown, plan_svg, write_text


def cards_summary(cards):
    """Per GPU of a gpu_info result: index, uuid, total/used/free MiB and who holds memory (the
    seat, else the compose service, else the container, else the PID)."""
    summary = []
    for gpu in (cards or {}).get("gpus", []):
        holders = {}
        for process in gpu.get("processes") or []:
            who = process.get("seat") or process.get("compose_service") or process.get("container") \
                or "pid %s" % process.get("pid")
            holders[who] = holders.get(who, 0) + (process.get("used_mib") or 0)
        summary.append({key: gpu.get(key) for key in (
            "index", "uuid", "memory_total_mib", "memory_used_mib", "memory_free_mib")})
        summary[-1]["holders_mib"] = holders
    return summary


STATUSES = ("planned", "unchanged", "applied", "rolled_back", "failed")


class ReportError(ValueError):
    """A section or a report directory the report cannot be written from or into."""


# rebalance_report's arguments (the module and its action plugin validate against the same spec)
REBALANCE_REPORT_SPEC = {
    "report_dir": {"type": "path", "required": True},
    "run_id": {"type": "str", "required": True},
    "host": {"type": "str", "required": True},
    "check_mode": {"type": "bool", "default": False},
    "section": {"type": "dict", "required": True},
}


def rebalance_report(params, check_mode=False):
    """rebalance_report's result: write_report with its validated arguments."""
    changed, paths = write_report(params["report_dir"], params["run_id"], params["host"],
                                  params["section"], params["check_mode"], check_mode)
    return {"changed": changed, "paths": paths}


def write_report(report_dir, run_id, host, section, dry_run, check_mode):
    """Put ``host``'s section into ``report_dir/report.json`` (a new ``run_id`` starts a new
    report), render ``report.md`` and the host's SVG; ``(changed, paths)``. ``dry_run`` says
    the run was a --check; ``check_mode``, that this call writes nothing."""
    if section.get("status") not in STATUSES:
        raise ReportError("section.status: expected one of %s, got %r"
                          % (", ".join(STATUSES), section.get("status")))
    path = os.path.join(report_dir, "report.json")
    report = None
    if os.path.exists(path):
        try:
            with open(path) as handle:
                report = json.load(handle)
        except ValueError as exc:
            raise ReportError("%s is not a report (%s); move it away or pick another report_dir"
                              % (path, exc)) from None
    report = merge_host_section(report, run_id, host, section, dry_run)
    if not check_mode:
        os.makedirs(report_dir, exist_ok=True)
    files = {path: json.dumps(report, indent=2, sort_keys=True) + "\n",
             os.path.join(report_dir, "report.md"): report_markdown(report)}
    if section.get("plan"):
        measured = section.get("after") if not dry_run and section.get("after") else None
        files[os.path.join(report_dir, "%s.svg" % host)] = plan_svg(section["plan"], measured=measured)
    changed = False
    for file_path, text in files.items():
        changed = write_text(file_path, text, check_mode) is not None or changed
    return changed, sorted(files)


def merge_host_section(report, run_id, host, section, check_mode):
    """The report with this host's section put in (a new run starts a new report)."""
    if not report or report.get("run_id") != run_id:
        report = {"schema": 1, "run_id": run_id, "check_mode": check_mode, "hosts": {}}
    report["hosts"][host] = section
    return report


def report_markdown(report):
    """The run's report: per host its status, the plan, every gate with its measured value,
    what was done, the backups written, and the cards before and after."""
    lines = ["# Rebalance %s%s" % (report["run_id"], " (dry run: --check)" if report.get("check_mode") else ""), ""]
    lines.append("| host | status | gates passed | failed gate | started | finished |")
    lines.append("|---|---|---|---|---|---|")
    for host, section in sorted(report["hosts"].items()):
        gates = section.get("gates") or []
        failed = [g for g in gates if not g["ok"]]
        lines.append("| %s | **%s** | %d/%d | %s | %s | %s |" % (
            host, section["status"], len(gates) - len(failed), len(gates),
            "%s %s" % (failed[0]["seat"], failed[0]["gate"]) if failed else "",
            section.get("started", ""), section.get("finished", "")))
    for host, section in sorted(report["hosts"].items()):
        lines += ["", "# %s: %s" % (host, section["status"])]
        interrupted = section.get("interrupted") or {}
        if interrupted.get("seats"):
            lines += ["", "Finishing an interrupted window (run %s): %s" % (
                interrupted["run_id"], ", ".join(interrupted["seats"]))]
        if section.get("error"):
            lines += ["", "Failed: %s" % section["error"]]
        if section.get("plan"):
            lines += ["", plan_markdown(section["plan"]).rstrip("\n")]
        lines += ["", "### Gates", ""]
        if section.get("gates"):
            lines += ["| seat | gate | ok | measured | expected | detail |", "|---|---|---|---|---|---|"]
            for g in section["gates"]:
                lines.append("| %s | %s | %s | %s | %s | %s |" % (
                    g["seat"], g["gate"], "yes" if g["ok"] else "**NO**", _cell(g["measured"]),
                    _cell(g["expected"]), _cell(g["detail"])))
        else:
            lines.append("none ran")
        lines += ["", "### What was done", ""]
        lines += ["- %s" % action for action in section.get("actions") or []] or ["nothing"]
        lines += _boots_markdown(section.get("boots") or {})
        lines += _load_markdown(section.get("gateway_load") or {})
        lines += _routes_markdown(section.get("gateway_routes") or {})
        rollback = section.get("rollback") or {}
        if rollback:
            lines += ["", "### Rollback: %s" % ("complete, the host is as it was" if rollback.get("complete")
                                                else "**INCOMPLETE**, the host is NOT as it was"), ""]
            lines += ["| seat | file or seat | state | ok | detail |", "|---|---|---|---|---|"]
            for entry in rollback.get("files") or []:
                lines.append("| %s | `%s` | %s | %s | %s |" % (
                    entry["seat"], entry["file"], entry["state"], "yes" if entry["ok"] else "**NO**",
                    _cell(entry["detail"])))
            for entry in rollback.get("seats") or []:
                lines.append("| %s | seat (wanted %s) | %s | %s | %s |" % (
                    entry["seat"], entry["wanted"], entry["state"], "yes" if entry["ok"] else "**NO**",
                    _cell(entry["detail"])))
            if rollback.get("problems"):
                lines += [""] + ["- %s" % problem for problem in rollback["problems"]]
        lines += ["", "### Backups written", ""]
        lines += ["- `%s`" % path for path in section.get("backups") or []] or ["none"]
        for when in ("before", "after"):
            cards = section.get(when) or []
            if cards:
                lines += ["", "### Cards %s" % when, "", "| GPU | used MiB | free MiB | held by |", "|---|---|---|---|"]
                for gpu in cards:
                    holders = ", ".join("%s %s" % (k, mib_cell(v))
                                        for k, v in sorted(gpu["holders_mib"].items()))
                    lines.append("| %s | %s | %s | %s |" % (
                        gpu["index"], mib_cell(gpu["memory_used_mib"]), mib_cell(gpu["memory_free_mib"]),
                        holders or "-"))
    return "\n".join(lines) + "\n"


def _boots_markdown(boots):
    """Each seat's own boot seconds, and the boots' wall time beside their floor (the busiest
    GPU's boots one after another)."""
    if not boots.get("seats"):
        return []
    floor, elapsed = boots["floor_s"], boots["elapsed_s"]
    if floor:
        # a figure Ansible masked (a secret's value inside it) is shown as masked, not divided
        ratio = " (%.2f x the floor)" % (elapsed / floor) if all(
            isinstance(value, (int, float)) for value in (elapsed, floor)) else ""
        timing = ("%s s from the first start to the last seat done; the floor, the busiest GPU's "
                  "boots one after another, is %s s%s." % (elapsed, floor, ratio))
    else:
        timing = "%s s from the first start until the boots stopped; no seat finished its boot." % (
            boots["elapsed_s"])
    lines = ["", "### Boots", "", timing,
             "", "| seat | GPUs | after | started at s | boot s | outcome |", "|---|---|---|---|---|---|"]
    for boot in boots["seats"]:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            boot["seat"], ", ".join(gpu[:12] for gpu in boot["gpus"]), ", ".join(boot["after"]) or "-",
            _cell(boot["started_s"]), _cell(boot["boot_s"]), boot["outcome"]))
    return lines


def _load_markdown(load):
    """What the gateway's clients saw during the window, per route."""
    if not load:
        return []
    lines = ["", "### Through the gateway during the window", ""]
    if load.get("error"):
        return lines + ["The load through the gateway could not tell: %s" % _cell(load["error"])]
    lines += ["%s s of requests on each route, one in flight at a time." % load["seconds"], "",
              "| route | sent | failed | longest without a reply, s | ended at s | first failures |",
              "|---|---|---|---|---|---|"]
    for route in load["routes"]:
        lines.append("| %s | %d | %s | %s | %s | %s |" % (
            route["route"], route["sent"], "**%d**" % route["failed"] if route["failed"] else "0",
            route["longest_gap_s"], _cell(route["longest_gap_ended_at_s"]), _cell("; ".join(route["failures"]))))
    return lines


def _routes_markdown(routes):
    """The gateway config's routes to this host's seats as the window left them: where each
    points, and the model_info limits each seat serves."""
    if not routes:
        return []
    lines = ["", "### The gateway's routes after the window", ""]
    if routes.get("error"):
        return lines + ["The routes could not be audited: %s" % _cell(routes["error"])]
    targets = routes.get("targets") or []
    wrong = [target for target in targets if target["status"] not in ("ok", "external", "unresolved")]
    if not targets:
        return lines + ["No route of %s points at %s: if the gateway sends this host traffic, its config names "
                        "the host otherwise (seat_rebalance_gateway_seat_host)." % (
                            _cell(routes.get("path")), _cell(routes.get("host")))]
    lines.append("%d route(s) of %s to this host's seats: %s." % (
        len(targets), _cell(routes.get("path")), "**%d not as they should be**" % len(wrong) if wrong else "all as they should be"))
    lines += ["", "| route | target | status | model_info the seat serves | detail |", "|---|---|---|---|---|"]
    for target in targets:
        limits = target.get("limits") or {}
        lines.append("| %s | %s | %s | %s | %s |" % (
            _cell(target["route"]), _cell(target["target"]),
            "**%s**" % target["status"] if target in wrong else target["status"],
            _cell(", ".join("%s: %d" % item for item in sorted(limits.items()))), _cell(target["detail"])))
    changes = routes.get("changes") or []
    if changes:
        lines += ["", "The window does not write this config (seat_rebalance_gateway_config_write): the change it "
                  "needs, line by line:", ""]
        lines += ["- line %s, route %s, %s: `%s` -> `%s`" % (
            change.get("line"), _cell(change.get("route")), _cell(change.get("where")),
            _cell(change.get("old")), _cell(change.get("new"))) for change in changes]
    return lines


def _cell(value):
    text = value if isinstance(value, str) else "-" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")
