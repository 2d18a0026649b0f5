# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What the collection's SVG files (the plan's cards, calibration's plots) share."""

from __future__ import annotations

import html


def escape(text):
    """Element text: ``&``, ``<`` and ``>`` escaped, as ``xml.sax.saxutils.escape`` does it,
    without the ``urllib.request`` and ``http.client`` that module imports (about 15 ms at
    every run of a module that writes a plan or a plot)."""
    return html.escape(text, quote=False)
