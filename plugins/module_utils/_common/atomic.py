# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The one way the collection writes a file: replaced whole, so that a reader (docker compose,
systemd, LiteLLM, the next run) sees the old file or the new one, never part of either, and two
writers never share a temp file."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

# Every temp file starts so: a run killed half way leaves nothing else, and the seat files'
# writer removes these from a project directory before it writes (the lock keeps other runs out).
TEMP_PREFIX = ".llmfleet-"
# The file's SELinux label (a bind-mounted config may carry one its container needs).
_LABEL = "security.selinux"


def current_mode(path):
    """The permission bits of the file at ``path``, or None when there is none."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None


def _keep_owner_and_label(path, handle, owner):
    """Give the open temp file ``owner`` ``(uid, gid)``; without one, the owner and SELinux label
    of the file it replaces, as far as this user may (as Ansible's atomic_move does)."""
    if owner is not None:
        os.fchown(handle, *owner)
        return
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return  # a new file: the writer's owner, the directory's label
    try:
        os.fchown(handle, info.st_uid, info.st_gid)
    except PermissionError:
        pass  # not root: the file becomes the writer's, as any edit by this user would
    if hasattr(os, "getxattr"):
        try:
            os.setxattr(handle, _LABEL, os.getxattr(path, _LABEL))
        except OSError as exc:  # no SELinux here, or not allowed to relabel: the default label
            if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM, errno.EACCES):
                raise


def _sync_directory(directory):
    """Make the rename itself durable (best effort: not every file system lets a directory be
    opened or synced)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def replace_file(path, data, mode, owner=None):
    """Replace (or create) ``path`` with ``data`` (bytes, or text written as UTF-8): a temp file
    of its own beside it (``mkstemp``: never a fixed name two writers or a leftover could
    share), the data synced to disk, the permission bits ``mode`` set explicitly (never the
    umask's), the owner ``(uid, gid)`` when given, else the replaced file's owner and SELinux
    label kept, then renamed over ``path`` and the rename synced. Whatever fails leaves
    ``path`` as it was and no temp file; the OSError says which file and why."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(prefix=TEMP_PREFIX + os.path.basename(path)[:64] + ".", dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            _keep_owner_and_label(path, out.fileno(), owner)
            os.fchmod(out.fileno(), mode)  # after the owner: a chown clears set-id bits
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_directory(directory)
