"""Provenance of the vLLM log fixtures: every format string render.py uses is still in the wheel
it names, at the line it names. Downloads vllm 0.10.1.1, 0.10.2 and 0.33.0 (--no-deps) once into
.build/cache/vllm/, where the KV differential test keeps its 0.33.0 wheel too."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.need import need

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "vllm_logs"
WHEELS = REPO / ".build" / "cache" / "vllm"
_spec = importlib.util.spec_from_file_location("vllm_log_render", FIXTURES / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

# A fragment is looked for this many lines around the line a template names: a message's
# literal pieces sit on the lines after the logger call (or before a `raise` that uses them).
WINDOW = 20


def wheel(version):
    found = sorted(WHEELS.glob("vllm-%s-*.whl" % version))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--quiet", "-d", str(WHEELS), "vllm==%s" % version],
                              capture_output=True, text=True, timeout=900, check=False)
        found = sorted(WHEELS.glob("vllm-%s-*.whl" % version))
        if not found:
            need(False, "cannot download vllm==%s: %s" % (version, proc.stderr.strip()[-400:]))
    return found[0]


@pytest.fixture(scope="module")
def sources():
    opened = {}

    def source(version, path):
        if (version, path) not in opened:
            with zipfile.ZipFile(wheel(version)) as whl:
                opened[version, path] = whl.read(path).decode("utf-8").split("\n")
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
