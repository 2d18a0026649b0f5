# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The runtime seam: how a seat is run on its host (docker compose). A runtime says which files
a seat has and renders them, how they are validated, and how the seat is started, stopped,
inspected and its log read. docs/architecture.md has the interface.

May import: _common, _engines (a seat's launch arguments).
"""
