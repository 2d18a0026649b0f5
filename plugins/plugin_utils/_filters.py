# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What every filter of the collection does with an error: one line for the operator, as
AnsibleFilterError, never a traceback (-vvv shows the cause)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def operator_errors(func, errors=ValueError, prefix=""):
    """``func`` with the module_utils ``errors`` it raises turned into AnsibleFilterError, and
    anything else it raises into one that says it is a bug."""
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except AnsibleFilterError:
            raise
        except errors as exc:
            raise AnsibleFilterError("%s%s" % (prefix, exc)) from None
        except Exception as exc:  # pylint: disable=broad-except  # no traceback reaches the operator
            raise AnsibleFilterError("%sunexpected %s: %s (a bug in llmfleet.seats; -vvv shows the "
                                     "traceback)" % (prefix, type(exc).__name__, exc), orig_exc=exc) from exc
    return run
