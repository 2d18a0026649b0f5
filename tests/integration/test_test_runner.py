"""The test suite's own safety: a test run stopped with SIGTERM (a CI timeout, `make test`
stopped) tears its fixtures down, as it does on Ctrl-C, so no twin or engine is left behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO_ROOT


def test_sigterm_tears_the_fixtures_down(tmp_path):
    (tmp_path / "test_sleeper.py").write_text(textwrap.dedent('''
        import pathlib, time
        import pytest

        OUT = pathlib.Path(__file__).parent

        @pytest.fixture(scope="module")
        def resource():
            yield
            (OUT / "torn-down").write_text("yes")

        def test_waits(resource):
            (OUT / "started").write_text("yes")
            time.sleep(600)
    '''))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-p", "support.interrupt", "--rootdir", str(tmp_path), str(tmp_path)],
                            cwd=tmp_path, env={"PYTHONPATH": str(REPO_ROOT / "tests"), "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()[0]
            subprocess.run(["sleep", "0.1"], check=True)
        proc.terminate()
        out = proc.communicate(timeout=120)[0]
    finally:
        proc.kill()
    assert (tmp_path / "torn-down").read_text() == "yes", out
    assert "KeyboardInterrupt" in out and proc.returncode != 0
