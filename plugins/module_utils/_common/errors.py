# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What every module of the collection does with an error: the operator sees one line naming
the input. Only a bug's traceback goes to the result's ``exception`` (which only -vvv shows):
the collection's own refusals are complete in their line, on every ansible-core."""

from __future__ import annotations

import contextlib
import traceback

from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import CommandError


# What the collection raises on purpose (a refusal, a program that could not be run or did not
# answer, what docker or systemd said, a file it cannot use).
EXPECTED = (ValueError, CommandError, OSError)


def operator_message(exc):
    """The one line an operator sees for ``exc``. The collection's own errors (ValueError, and
    CommandError: a program that could not be run or did not answer, and what docker or systemd
    said) carry their message; a file that cannot be read or written says which and why;
    anything else is a bug, and says so."""
    if isinstance(exc, (ValueError, CommandError)):
        return str(exc)
    if isinstance(exc, OSError):
        where = " ".join(str(name) for name in (exc.filename, exc.filename2) if name)
        return "%s%s" % (where + ": " if where else "", exc.strerror or exc)
    return "unexpected %s: %s (a bug in llmfleet.seats; -vvv shows the traceback)" % (type(exc).__name__, exc)


@contextlib.contextmanager
def operator_errors(module):
    """Run a module's work; turn anything it raises into ``fail_json`` with operator_message."""
    try:
        yield
    except EXPECTED as exc:
        module.fail_json(msg=operator_message(exc))
    except Exception as exc:  # pylint: disable=broad-except  # no traceback reaches the operator
        module.fail_json(msg=operator_message(exc), exception=traceback.format_exc())
