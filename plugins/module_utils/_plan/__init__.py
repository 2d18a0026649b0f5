# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stage 4, the plan: an inventory's hosts, GPUs and seats checked and brought to one normal
form, each seat sized by its engine, its footprint counted, the seats placed; per GPU its seats
and spare at plateau and at boot. And the plan's output, the one owner of its files (output).

May import: _common, _cards, _sizing, _placement, _engines.
"""
