# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Write a seat's files (rendered by its runtime) with dated backups (``_common.backup``), and
put them back byte for byte."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import TEMP_PREFIX, current_mode, replace_file
from ansible_collections.llmfleet.seats.plugins.module_utils._common.backup import (
    backup_path_for,
    check_backup_name_parts,
    is_backup_of,
    make_backup,
    read_bytes,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import SEAT_NAME_EXPECTED, SEAT_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex


class SeatFilesError(ValueError):
    """Bad arguments for writing or restoring seat files."""


_MODE_RE = lazy_regex(r"\A0?[0-7]{3}\Z")


def file_mode(value, name):
    """A file mode written as an octal string ('0600'); a bare YAML number is refused (600
    would be read as decimal, mode 0o1130)."""
    if not isinstance(value, str) or not _MODE_RE.match(value):
        raise SeatFilesError("%s: expected an octal mode as a quoted string such as '0600', got %r"
                             % (name, value))
    return int(value, 8)


def sha256(data):
    return None if data is None else hashlib.sha256(data).hexdigest()


def private(mode):
    """Whether ``mode`` gives the group and others nothing: a runtime's mode for a file that
    holds secrets."""
    return mode & 0o077 == 0


def _open_to_others(mode):
    return mode & 0o007 != 0


def _close_to_others(path, secret_mode):
    """A file holding secrets that any user may read gets ``secret_mode``; a mode the operator
    chose that others cannot use (0640 for a group) is kept."""
    if _open_to_others(os.stat(path).st_mode):
        os.chmod(path, secret_mode)


def _replace(path, content, new_mode, holds_secrets):
    """Atomically replace ``path``; a new file gets ``new_mode``, an existing one keeps its own,
    except that a file holding secrets is never left open to others: it gets ``new_mode`` then,
    on every write."""
    mode = current_mode(path)
    if mode is None or (holds_secrets and _open_to_others(mode)):
        mode = new_mode
    replace_file(path, content, mode)


def _modes(runtime, project_dir, modes):
    """The mode each of the seat's files is written with; a file the runtime keeps private
    (its secrets) is refused a mode that opens it to others."""
    own = runtime.files(os.path.basename(project_dir.rstrip("/")))
    chosen = {name: modes.get(name, mode) for name, mode in own.items()}
    for name, mode in sorted(chosen.items()):
        if private(own[name]) and _open_to_others(mode):
            raise SeatFilesError("%s: mode %04o would let others read the seat's secrets; expected a mode "
                                 "without access for others such as '0600' (env_mode)" % (name, mode))
    return chosen


def _remove_leftovers(project_dir):
    """Temp files and staging directories of a run that was killed half way (the rebalance
    lock means no other run is using them)."""
    if not os.path.isdir(project_dir):
        return
    for name in os.listdir(project_dir):
        if name.startswith(TEMP_PREFIX):
            path = os.path.join(project_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _validate(runtime, project_dir, contents, docker):
    """The runtime's check of the new files, staged beside the real ones."""
    staging = tempfile.mkdtemp(prefix=TEMP_PREFIX + "validate-", dir=project_dir)
    try:
        staged = {}
        own = runtime.files(os.path.basename(project_dir.rstrip("/")))
        for name, content in contents.items():
            staged[name] = os.path.join(staging, name)
            with open(staged[name], "wb") as out:
                out.write(content)
            os.chmod(staged[name], own[name])  # a script is checked as it will run
        problem = runtime.validate(project_dir, staged, docker)
    finally:
        shutil.rmtree(staging)
    if problem:
        raise SeatFilesError("%s rejected the rendered files for %s: %s" % (runtime.NAME, project_dir, problem))


def _text(data):
    return (data or b"").decode("utf-8", errors="replace")


def _diff(runtime, name, before_header, after_header, before, after):
    """A diff entry that shows no secret: one that changes reads <secret changed>."""
    before_text, after_text = _text(before), _text(after)
    return {"before_header": before_header, "after_header": after_header,
            "before": runtime.redact(name, before_text),
            "after": runtime.redact(name, after_text, before_text if before is not None else None)}


def _rendered(runtime, project_dir, seat, host, backup_tag, backup_date, secrets):
    """What writing the seat's files would do: ``(contents, result)``, nothing touched yet."""
    contents = {name: text.encode("utf-8")
                for name, text in runtime.render(seat, host, secrets, project_dir).items()}
    files, diffs, backups = {}, [], []
    for name, content in contents.items():
        path = os.path.join(project_dir, name)
        before = read_bytes(path)
        entry = {"path": path, "changed": before != content, "created": before is None,
                 "backup": None, "before_sha256": sha256(before)}
        if entry["changed"] and before is not None:
            entry["backup"] = backup_path_for(path, backup_date, backup_tag)
            backups.append(entry["backup"])
        files[name] = entry
        if entry["changed"]:
            diffs.append(_diff(runtime, name, path if before is not None else "(absent)", path,
                               before, content))
    changed = any(entry["changed"] for entry in files.values())
    return contents, {"changed": changed, "files": files, "backups": backups, "diff": diffs}


def _write(projects, modes, validate, docker):
    """Write ``projects`` (``(runtime, project_dir, contents, result)`` each): every changed
    project's new files are validated before any file is backed up or replaced. A new file gets
    its mode from ``modes`` (by file name), else the runtime's."""
    for _runtime, project_dir, _contents, _result in projects:
        _remove_leftovers(project_dir)
    changing = [project for project in projects if project[3]["changed"]]
    chosen = {project_dir: _modes(runtime, project_dir, modes) for runtime, project_dir, _c, _r in changing}
    for runtime, project_dir, contents, _result in changing:
        if not os.path.isdir(project_dir):
            os.makedirs(project_dir, 0o755)
        if validate:
            _validate(runtime, project_dir, contents, docker)
    for runtime, project_dir, contents, result in changing:
        own = runtime.files(os.path.basename(project_dir.rstrip("/")))
        for name, entry in result["files"].items():
            if entry["backup"]:
                make_backup(entry["path"], entry["backup"])
                if private(own[name]):  # the backup holds the secrets the file held
                    _close_to_others(entry["backup"], chosen[project_dir][name])
        for name, entry in result["files"].items():
            if entry["changed"]:
                _replace(entry["path"], contents[name], chosen[project_dir][name], private(own[name]))


def present(runtime, project_dir, seat, host, backup_tag, backup_date, modes, validate, docker,
            check_mode, secrets=None):
    """seat_files' state=present: render the seat's files with its runtime; back up and replace
    each file that changes. ``{"changed", "files", "backups", "diff"}``."""
    check_backup_name_parts(backup_date, backup_tag)
    contents, result = _rendered(runtime, project_dir, seat, host, backup_tag, backup_date, secrets)
    if not check_mode:
        _write([(runtime, project_dir, contents, result)], modes, validate, docker)
    return result


def present_seats(runtime_of, root, seats, host, backup_tag, backup_date, modes, validate, docker,
                  check_mode, secrets=None):
    """seat_files' state=present for several seats, each in ``root/<name>``, with its runtime
    (``runtime_of(seat)``) and its secrets (``secrets[name]``). No file is written unless every
    changed seat's files render and validate. ``{"changed", "seats": {name: {"changed",
    "files", "backups"}}, "backups", "diff"}``."""
    check_backup_name_parts(backup_date, backup_tag)
    secrets = secrets or {}
    if not isinstance(secrets, dict) or not all(isinstance(value, dict) for value in secrets.values()):
        raise SeatFilesError("secrets: with seats, expected {seat: {NAME: value}}")
    projects, names = [], set()
    for position, seat in enumerate(seats):
        name = seat.get("name")
        if not isinstance(name, str) or not SEAT_NAME_RE.match(name) or name in names:
            raise SeatFilesError("seats[%d].name: expected a seat name (%s) no other seat has, got %r"
                                 % (position, SEAT_NAME_EXPECTED, name))
        names.add(name)
        runtime, project_dir = runtime_of(seat), os.path.join(root, name)
        contents, result = _rendered(runtime, project_dir, seat, host, backup_tag, backup_date,
                                     secrets.get(name))
        projects.append((runtime, project_dir, contents, result))
    if not check_mode:
        _write(projects, modes, validate, docker)
    return {"changed": any(result["changed"] for *_parts, result in projects),
            "seats": {seat["name"]: {key: result[key] for key in ("changed", "files", "backups")}
                      for seat, (*_parts, result) in zip(seats, projects)},
            "backups": [path for *_parts, result in projects for path in result["backups"]],
            "diff": [entry for *_parts, result in projects for entry in result["diff"]]}


def restored(runtime, project_dir, restore, check_mode):
    """seat_files' state=restored: every file back from its backup, or removed when the run
    that wrote it created it. ``{"changed", "files", "backups", "diff"}``."""
    if not isinstance(restore, dict):
        raise SeatFilesError("restore: expected the 'files' result of a state=present run")
    files, diffs = {}, []
    own = runtime.files(os.path.basename(project_dir.rstrip("/")))
    for name, entry in sorted(restore.items()):
        path = entry.get("path") if isinstance(entry, dict) else None
        # Only the runtime's own files, each from its own backup: a journal entry cannot name
        # any other file to delete or overwrite.
        if name not in own or path != os.path.join(project_dir.rstrip("/"), name):
            raise SeatFilesError("restore.%s: expected %s, one of the seat's files (%s), got %r"
                                 % (name, os.path.join(project_dir.rstrip("/"), name),
                                    ", ".join(own), path))
        backup = entry.get("backup")
        if backup is not None and (not isinstance(backup, str) or os.path.dirname(backup) != os.path.dirname(path)
                                   or not is_backup_of(os.path.basename(backup), name)):
            raise SeatFilesError("restore.%s: backup: expected %s.bak-YYYYMMDD-<tag> beside it, got %r"
                                 % (name, path, backup))
        current = read_bytes(path)
        if entry.get("created"):
            wanted = None
        elif entry.get("backup") and os.path.exists(entry["backup"]):
            wanted = read_bytes(entry["backup"])
        elif entry.get("backup") and sha256(current) != entry.get("before_sha256"):
            raise SeatFilesError("restore.%s: %s changed but its backup %s is gone; nothing was "
                                 "changed" % (name, path, entry["backup"]))
        else:
            # Unchanged, or journaled before a run that never got to write it.
            wanted = current
        files[name] = {"path": path, "changed": current != wanted}
        if current != wanted:
            diffs.append(_diff(runtime, name, path, entry.get("backup") or "(absent)", current, wanted))
    changed = any(entry["changed"] for entry in files.values())
    if changed and not check_mode:
        for name, entry in restore.items():
            if not files[name]["changed"]:
                continue
            if entry.get("created"):
                os.unlink(entry["path"])
            else:
                _restore_copy(entry["backup"], entry["path"])
    return {"changed": changed, "files": files, "backups": [], "diff": diffs}


def _restore_copy(backup, path):
    """Copy the backup over ``path`` atomically, with the backup's bytes, mode and owner."""
    with open(backup, "rb") as src:
        content = src.read()
    info = os.stat(backup)
    replace_file(path, content, info.st_mode & 0o7777, owner=(info.st_uid, info.st_gid))
