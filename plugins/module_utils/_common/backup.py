# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Dated backups, the operator's own convention: ``<file>.bak-YYYYMMDD-<tag>``, a copy with the
original's bytes, mode and owner. When that name is taken by a different earlier version,
``-2``, ``-3``... are appended, so no backup is ever overwritten. Seat files and the gateway's
config are backed up alike.
"""

from __future__ import annotations

import os
import re
import shutil

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

_TAG = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_TAG_RE = lazy_regex(r"\A%s\Z" % _TAG)
_DATE_RE = lazy_regex(r"\A[0-9]{8}\Z")


class BackupError(ValueError):
    """A backup name that cannot be made from the date and tag given."""


def check_backup_name_parts(date, tag):
    if not _DATE_RE.match(date or ""):
        raise BackupError("backup_date: expected YYYYMMDD, got %r" % (date,))
    if not _TAG_RE.match(tag or ""):
        raise BackupError("backup_tag: expected letters, digits, '.', '_' or '-', got %r" % (tag,))


def is_backup_of(backup_name, name):
    """Whether ``backup_name`` is a backup name this module makes for the file ``name``."""
    return re.match(r"\A%s\.bak-[0-9]{8}-%s(-[0-9]+)?\Z" % (re.escape(name), _TAG), backup_name) is not None


def read_bytes(path):
    """The file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise BackupError("%s: expected a file, found a directory" % path) from None
    except NotADirectoryError:
        raise BackupError("%s: expected a directory above it, found a file" % os.path.dirname(path)) from None
    except PermissionError:
        raise BackupError("%s: cannot be read (permission denied; run with become?)" % path) from None


def backup_path_for(path, date, tag):
    """The first free backup name for ``path``, or the existing one holding the same bytes."""
    current = read_bytes(path)
    base = "%s.bak-%s-%s" % (path, date, tag)
    candidate, number = base, 1
    while os.path.lexists(candidate):
        if read_bytes(candidate) == current:
            return candidate
        number += 1
        candidate = "%s-%d" % (base, number)
    return candidate


def make_backup(path, backup):
    """Copy ``path`` to ``backup`` keeping bytes, mode, timestamps and owner."""
    if os.path.exists(backup):
        return
    shutil.copy2(path, backup)
    info = os.stat(path)
    os.chown(backup, info.st_uid, info.st_gid)
