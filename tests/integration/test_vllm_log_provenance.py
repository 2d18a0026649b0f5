"""Provenance of the vLLM log fixtures: every format string render.py uses is still in the wheel
it names, at the line it names. Reads those files of vllm 0.6.2, 0.10.1.1, 0.10.2, 0.11.0 and
0.33.0 out of their wheels on PyPI once (tests/differential/vllm_sources.py, kept in .build/cache/vllm-src)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from support.need import need

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "differential"))
from vllm_sources import SourceUnavailable, release_files  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "vllm_logs"
_spec = importlib.util.spec_from_file_location("vllm_log_render", FIXTURES / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

# A fragment is looked for this many lines around the line a template names: a message's
# literal pieces sit on the lines after the logger call (or before a `raise` that uses them).
WINDOW = 20


@pytest.fixture(scope="module")
def sources():
    opened = {}

    def source(version, path):
        if (version, path) not in opened:
            try:
                root = release_files(version, {path})
            except SourceUnavailable as exc:
                need(False, str(exc))
            assert (root / path).exists(), "vllm %s's wheel has no %s" % (version, path)
            opened[version, path] = (root / path).read_text(encoding="utf-8").split("\n")
        return opened[version, path]
    return source


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(render.TEMPLATES))
def test_template_is_in_the_wheel_where_it_says(sources, key):
    version, path, line = render.TEMPLATES[key][:3]
    fragments = render.TEMPLATES[key][4]
    lines = sources(version, path)
    window = "\n".join(lines[max(0, line - 1 - WINDOW):line + WINDOW])
    assert fragments, key
    for fragment in fragments:
        assert fragment in window, "%s: %r not within %d lines of %s:%d in vllm %s" % (
            key, fragment, WINDOW, path, line, version)
    assert lines[line - 1].strip(), "%s:%d is blank in vllm %s" % (path, line, version)
