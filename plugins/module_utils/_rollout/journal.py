# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What a run journals so a rollback can undo it: the seats' seat_files results, merged file by
file with the journal of a run it took over, and what they say (which seats changed, which
backups hold the files from before the window); and how far the window got: ``touched``, the
seats it stopped or booted (journaled before it does), and ``gated``, those that passed every
gate since. A run cut short leaves the difference for the run that takes over to finish."""

from __future__ import annotations


class JournalError(ValueError):
    """Input that is not a {seat: seat_files 'files' result} map."""


def _files_by_seat(value, what):
    """``value`` checked as {seat: {file name: entry dict}}."""
    if not isinstance(value, dict) or not all(
            isinstance(files, dict) and all(isinstance(entry, dict) for entry in files.values())
            for files in value.values() if files is not None):
        raise JournalError("%s: expected {seat: seat_files 'files' result}, got %r" % (what, value))
    return value


def changed_seat_files(files_by_seat):
    """Seat names whose seat_files result shows a written file."""
    return sorted(seat for seat, files in _files_by_seat(files_by_seat, "changed_seat_files").items()
                  if any(entry.get("changed") for entry in (files or {}).values()))


def journal_files(this_run, adopted):
    """This run's seat_files results merged with an adopted journal's, file by file: a file the
    dead run already changed keeps that run's entry (its backup holds the original), any other
    keeps this run's."""
    _files_by_seat(this_run, "journal_files: this_run")
    _files_by_seat(adopted, "journal_files: adopted")
    merged = {}
    for seat in sorted(set(this_run) | set(adopted)):
        mine, theirs = this_run.get(seat) or {}, adopted.get(seat) or {}
        merged[seat] = {}
        for file_name in sorted(set(mine) | set(theirs)):
            entry = theirs.get(file_name) or {}
            merged[seat][file_name] = entry if entry.get("changed") else mine.get(file_name, entry)
    return merged


def seat_file_backups(files_by_seat):
    """Every backup path in the map, sorted."""
    return sorted(entry["backup"] for files in _files_by_seat(files_by_seat, "seat_file_backups").values()
                  for entry in (files or {}).values() if entry.get("backup"))


def unfinished_seats(journal):
    """The seats a window touched (files written, stopped or booted) that it never saw pass
    their gates: the ones a run taking over its lock must gate again."""
    if not isinstance(journal, dict):
        raise JournalError("journal: expected the lock's journal (a dict), got %r" % (journal,))
    lists = {key: journal.get(key) or [] for key in ("touched", "gated")}
    for key, names in lists.items():
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise JournalError("journal.%s: expected a list of seat names, got %r" % (key, names))
    touched = set(changed_seat_files(journal.get("files") or {})) | set(lists["touched"])
    return sorted(touched - set(lists["gated"]))
