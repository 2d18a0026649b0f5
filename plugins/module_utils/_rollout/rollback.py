# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Where a rollback left a host: the state of every file it had to put back and of every seat
it had to stop or bring back, and whether the host is back where it was before the run.

Pure: the rebalance role passes what its rollback tasks returned and the seats' states after
them (seat_runtime_info); nothing here reaches the host. A seat is judged by the state its
runtime reports now, not by what the start returned, so a seat that came back late or died
after its start is seen as it is.
"""

from __future__ import annotations


class RollbackError(ValueError):
    """Inputs that are not the rollback tasks' results."""


WANT_RUNNING = "running and healthy"
WANT_ABSENT = "absent"


def _by_item(results, key=None):
    by_item = {}
    for result in results or []:
        if not isinstance(result, dict) or "item" not in result:
            raise RollbackError("expected a loop's results, got %r" % (result,))
        item = result["item"]
        by_item[item[key] if key else item] = result
    return by_item


def _file_entries(seat, journaled, result):
    entries = []
    for name in sorted(journaled or {}):
        path = (journaled[name] or {}).get("path")
        entry = {"seat": seat, "file": name, "path": path}
        if result is None:
            entry.update(state="not reached", ok=False, detail="the rollback broke off before it")
        elif "files" not in result:
            entry.update(state="NOT restored", ok=False, detail=result.get("msg") or "failed")
        elif not (result["files"].get(name) or {}).get("changed"):
            entry.update(state="as before", ok=True, detail="")
        elif journaled[name].get("created"):
            entry.update(state="removed", ok=True, detail="this run created it")
        else:
            entry.update(state="restored", ok=True, detail="from %s" % journaled[name].get("backup"))
        entries.append(entry)
    return entries


def _seat_entry(seat, wanted, states, result, timeout):
    state = states.get(seat, "absent")
    ok = state == "absent" if wanted == WANT_ABSENT else state in ("running", "running (healthy)")
    if ok:
        detail = ""
    elif result is None:
        detail = "not started: its files could not be restored"
    elif state.startswith("running ("):
        detail = "not healthy within the rollback's %s s" % timeout
    else:
        detail = " ".join((result.get("msg") or "").split())[:300]
    return {"seat": seat, "wanted": wanted, "state": state, "ok": ok, "detail": detail}


def rollback_outcome(restore, restored, removed, brought_back, states, running_before, touched,
                     timeout):
    """``{"complete": bool, "files": [...], "seats": [...], "problems": [...]}``.

    ``restore`` is the journal's ``{seat: seat_files 'files'}``; ``restored``, ``removed`` and
    ``brought_back`` the results of the rollback's loops (restore files, remove the seats this run
    started, bring back the seats that ran before); ``states`` each seat's state afterwards;
    ``running_before`` and ``touched`` the seat names that ran before the run and that it
    touched; ``timeout`` the rollback's patience per seat, in seconds (for the sentences).
    """
    if not isinstance(restore, dict):
        raise RollbackError("restore: expected the journal's {seat: seat_files 'files' result}")
    restored_by_seat = _by_item(restored, "key")
    removed_by_seat, back_by_seat = _by_item(removed), _by_item(brought_back)
    if not isinstance(states, dict):
        raise RollbackError("states: expected seat_runtime_info's seats ({seat: state})")
    files = [entry for seat in sorted(restore)
             for entry in _file_entries(seat, restore[seat], restored_by_seat.get(seat))]
    before, touched = set(running_before or []), set(touched or [])
    seats = [_seat_entry(seat, WANT_RUNNING if seat in before else WANT_ABSENT, states,
                         (back_by_seat if seat in before else removed_by_seat).get(seat), timeout)
             for seat in sorted(touched)]
    problems = ["%s %s: %s%s" % (f["seat"], f["file"], f["state"], " (%s)" % f["detail"] if f["detail"] else "")
                for f in files if not f["ok"]]
    problems += ["%s: wanted %s, is %s%s" % (s["seat"], s["wanted"], s["state"],
                                             " (%s)" % s["detail"] if s["detail"] else "")
                 for s in seats if not s["ok"]]
    return {"complete": not problems, "files": files, "seats": seats, "problems": problems}


def _running_by_name(containers, what):
    if not isinstance(containers, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                   for c in containers):
        raise RollbackError("%s: expected seat_runtime_info's containers (a list of records)" % what)
    return {c["name"]: c for c in containers if c.get("state") in ("running", "restarting", "paused")}


def _used_by_uuid(cards, what):
    gpus = cards.get("gpus") if isinstance(cards, dict) else cards
    if not isinstance(gpus, list):
        raise RollbackError("%s: expected a gpu_info result or its cards_summary" % what)
    return {gpu.get("uuid"): gpu for gpu in gpus if isinstance(gpu, dict)}


def host_differences(containers_before, containers_after, cards_before, cards_after, tolerance_mib):
    """How the host after a rollback differs from the host observed before the window, one
    sentence each (empty when it is as it was): every container that ran before runs again with
    its name, image and health, nothing runs that did not, and each card holds what it held
    within ``tolerance_mib``."""
    before = _running_by_name(containers_before, "containers_before")
    after = _running_by_name(containers_after, "containers_after")
    differences = []
    for name in sorted(before):
        was, now = before[name], after.get(name)
        if now is None:
            differences.append("container %s ran before the window and does not run now" % name)
        elif now.get("image") != was.get("image"):
            differences.append("container %s runs %s, it ran %s before" % (name, now.get("image"), was.get("image")))
        elif was.get("health") == "healthy" and now.get("health") != "healthy":
            differences.append("container %s was healthy before and is %s now" % (name, now.get("health") or "not"))
    differences += ["container %s runs now and did not before the window" % name for name in sorted(set(after) - set(before))]
    used_before, used_after = _used_by_uuid(cards_before, "cards_before"), _used_by_uuid(cards_after, "cards_after")
    for uuid in sorted(used_before, key=lambda u: (used_before[u].get("index") is None, used_before[u].get("index"))):
        was = used_before[uuid].get("memory_used_mib")
        now = (used_after.get(uuid) or {}).get("memory_used_mib")
        if isinstance(was, int) and isinstance(now, int) and abs(now - was) > int(tolerance_mib):
            differences.append("GPU %s holds %s MiB, it held %s MiB before the window (tolerance %s MiB)"
                               % (used_before[uuid].get("index"), "{:,}".format(now), "{:,}".format(was),
                                  "{:,}".format(int(tolerance_mib))))
        elif was is not None and now is None:
            differences.append("GPU %s could not be read after the rollback" % used_before[uuid].get("index"))
    return differences
