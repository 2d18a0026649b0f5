# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What the monitoring saw, over time, as SVG where people would rather look than read a table:
one panel per card or seat, its series as a line, the figures it is held to as dashed lines
(the plateau, the plan's line, a seat's KV budget) and the boot transient shaded.

A panel is ``{"title", "start", "end", "series": [(label, [(unix time, value)])],
"lines": [(label, value)], "shade": (start, end, label) or None, "unit"}``.
"""

from __future__ import annotations

import datetime

from ansible_collections.llmfleet.seats.plugins.module_utils._common.svg import escape

WIDTH = 960
PANEL_HEIGHT = 200
LEFT, RIGHT, TOP, BOTTOM = 76, 150, 30, 34
SERIES_COLOURS = ("#1F77B4", "#D62728", "#2CA02C", "#9467BD")
LINE_COLOURS = ("#FF7F0E", "#7F7F7F", "#17BECF", "#8C564B")


def _utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _figure(value, unit):
    return ("{:,.0f}" if abs(value) >= 100 else "{:,.2f}").format(value) + (" " + unit if unit else "")


def _panel(panel, top):
    """The SVG elements of one panel whose box starts at ``top``."""
    start, end, unit = panel["start"], max(panel["end"], panel["start"] + 1), panel.get("unit", "")
    values = [value for _label, points in panel["series"] for _when, value in points]
    values += [value for _label, value in panel.get("lines") or [] if value is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = max((high - low) * 0.1, abs(high) * 0.001, 1.0)
    low, high = low - pad, high + pad
    box_w, box_h = WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM
    box_top = top + TOP

    def x(when):
        return LEFT + (min(max(when, start), end) - start) / (end - start) * box_w

    def y(value):
        return box_top + box_h - (value - low) / (high - low) * box_h

    out = ['<text x="%d" y="%d" class="title">%s</text>' % (LEFT, top + 18, escape(panel["title"])),
           '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#CCCCCC"/>'
           % (LEFT, box_top, box_w, box_h)]
    if panel.get("shade"):
        shade_start, shade_end, label = panel["shade"]
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#EEEEEE"><title>%s</title></rect>'
                   % (x(shade_start), box_top, max(x(shade_end) - x(shade_start), 0), box_h, escape(label)))
        out.append('<text x="%.1f" y="%d" class="small">%s</text>' % (x(shade_start) + 3, box_top + 12, escape(label)))
    for number, (label, value) in enumerate(panel.get("lines") or []):
        if value is None:
            continue
        colour = LINE_COLOURS[number % len(LINE_COLOURS)]
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/>'
                   % (LEFT, y(value), LEFT + box_w, y(value), colour))
        out.append('<text x="%d" y="%.1f" class="small" style="fill:%s">%s</text>'
                   % (LEFT + box_w + 6, y(value) + 4, colour, escape("%s %s" % (label, _figure(value, unit)))))
    for number, (label, points) in enumerate(panel["series"]):
        colour = SERIES_COLOURS[number % len(SERIES_COLOURS)]
        if points:
            most = max(value for _when, value in points)
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"><title>%s</title></polyline>'
                       % (colour, " ".join("%.1f,%.1f" % (x(when), y(value)) for when, value in points),
                          escape("%s: most %s" % (label, _figure(most, unit)))))
        else:
            out.append('<text x="%d" y="%d" class="small">%s: no samples</text>'
                       % (LEFT + 6, box_top + box_h // 2, escape(label)))
    for value in (low + pad, high - pad) if values else ():
        out.append('<text x="%d" y="%.1f" class="small" text-anchor="end">%s</text>'
                   % (LEFT - 4, y(value) + 4, escape(_figure(value, unit))))
    out.append('<text x="%d" y="%d" class="small">%s</text>' % (LEFT, box_top + box_h + 14, _utc(start)))
    out.append('<text x="%d" y="%d" class="small" text-anchor="end">%s</text>'
               % (LEFT + box_w, box_top + box_h + 14, _utc(end)))
    return out


def chart_svg(heading, panels):
    """One SVG of ``panels`` stacked under ``heading``."""
    height = 28 + PANEL_HEIGHT * max(len(panels), 1)
    rows = []
    for number, panel in enumerate(panels):
        rows += _panel(panel, 28 + number * PANEL_HEIGHT)
    return "\n".join([
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">'
        % (WIDTH, height, WIDTH, height),
        '<style>.heading{font-size:15px;font-weight:bold}.title{font-size:13px;font-weight:bold}'
        '.small{font-size:11px;fill:#333333}</style>',
        '<text x="16" y="20" class="heading">%s</text>' % escape(heading),
    ] + rows + ["</svg>"]) + "\n"
