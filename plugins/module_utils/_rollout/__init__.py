# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stages 5 to 8, the rollout: writing a seat's files with dated backups and restoring them,
the lock and its journal, the order of stops and boot waves, the gates before and after every
boot, where a rollback left the host, and the window's report (the plan's own output is
_plan.output's: the report draws the plan with it and writes none of the plan's files).

May import: _common, _cards, _engines, _runtimes, _sizing, _plan. Names no engine or runtime itself: it asks
the seams.
"""
