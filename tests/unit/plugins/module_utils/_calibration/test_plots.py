"""The plots' SVG: what each panel says of its series and lines, and that text from a host or an
inventory is only ever text in it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plots import chart_svg

SVG = "{http://www.w3.org/2000/svg}"
T0 = 1.8e9


def _panel(**change):
    panel = {"title": "GPU 0", "start": T0, "end": T0 + 600, "unit": "MiB",
             "series": [("used MiB", [(T0 + 60 * i, 50000 + 100 * i) for i in range(11)])],
             "lines": [("plateau", 51000), ("plan", None)], "shade": (T0, T0 + 120, "boot transient")}
    panel.update(change)
    return panel


def test_a_panel_names_its_peak_its_lines_and_its_transient():
    root = ET.fromstring(chart_svg("twin1: memory per GPU", [_panel()]))
    texts = [element.text for element in root.iter(SVG + "text")]
    titles = [element.text for element in root.iter(SVG + "title")]
    assert "used MiB: most 51,000 MiB" in titles and "boot transient" in titles
    assert "plateau 51,000 MiB" in texts and not any(text.startswith("plan") for text in texts), \
        "a line with no value is left out"
    points = next(root.iter(SVG + "polyline")).get("points").split()
    xs = [float(point.split(",")[0]) for point in points]
    ys = [float(point.split(",")[1]) for point in points]
    assert len(points) == 11 and xs == sorted(xs) and ys == sorted(ys, reverse=True), "time runs right, memory up"
    assert "2027-01-15 08:00:00 UTC" in texts


def test_a_series_without_samples_says_so_and_names_are_text():
    svg = chart_svg("<script>alert(1)</script>", [_panel(title="seat </text><script>", series=[("KV in use", [])],
                                                         lines=[], shade=None)])
    root = ET.fromstring(svg)   # well-formed whatever the names held
    assert "<script>" not in svg and not list(root.iter(SVG + "script"))
    assert "KV in use: no samples" in [element.text for element in root.iter(SVG + "text")]
