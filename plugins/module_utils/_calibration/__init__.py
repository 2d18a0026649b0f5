# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Beside sizing, calibration: what the seats were asked for, read from the monitoring operators
already run (a Prometheus server scraping the seats' own metrics), for sizing from measured demand.

May import: _common, _cards.
"""
