# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Checking what an operator wrote: every problem is collected, not just the first, and each
names the host, where in the inventory (a seat, a GPU, a variable), the field, what was
expected and what was found."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import SizeError, to_bytes


class Checker:
    def __init__(self, host):
        self.host = host
        self.errors = []

    def fail(self, where, field, expected, got):
        self.errors.append("host %s: %s: %s: expected %s, got %r" % (self.host, where, field, expected, got))

    def problem(self, where, text):
        self.errors.append("host %s: %s: %s" % (self.host, where, text))

    def positive_int(self, where, field, value, maximum=None):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (
                maximum is not None and value > maximum):
            self.fail(where, field, "an integer from 1%s" % (" to %d" % maximum if maximum else " up"), value)
            return None
        return value

    def text(self, where, field, value):
        if not isinstance(value, str) or not value.strip():
            self.fail(where, field, "a non-empty string", value)
            return None
        return value

    def size(self, where, field, value):
        try:
            return to_bytes(value, field)
        except SizeError as exc:
            self.problem(where, exc)
            return None

    def string_list(self, where, field, value):
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            self.fail(where, field, "a list of non-empty strings", value)
            return None
        return list(value)
