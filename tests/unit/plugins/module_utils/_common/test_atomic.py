"""The one atomic writer: a temp file of its own beside the target (two writers, or a leftover
of a killed run, never share one), the mode asked for whatever the umask, and the old file or
the whole new one, never part of either."""

from __future__ import annotations

import os
import threading

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.atomic import (
    TEMP_PREFIX,
    current_mode,
    replace_file,
)


@pytest.fixture
def open_umask():
    old = os.umask(0o000)
    yield
    os.umask(old)


def test_a_new_file_gets_the_mode_asked_whatever_the_umask(tmp_path, open_umask):
    path = tmp_path / ".env"
    replace_file(str(path), "SEAT_SECRET_X='x'\n", 0o600)
    assert path.read_text() == "SEAT_SECRET_X='x'\n" and current_mode(str(path)) == 0o600
    replace_file(str(path), b"\x00bytes", 0o640)
    assert path.read_bytes() == b"\x00bytes" and current_mode(str(path)) == 0o640
    assert sorted(os.listdir(tmp_path)) == [".env"]
    assert current_mode(str(tmp_path / "absent")) is None


def test_a_leftover_temp_of_a_killed_run_is_neither_reused_nor_in_the_way(tmp_path):
    path = tmp_path / "report.json"
    (tmp_path / "report.json.tmp").mkdir()                     # the old fixed name, as a directory even
    leftover = tmp_path / (TEMP_PREFIX + "report.json.abc123")
    leftover.write_text("half a report")
    replace_file(str(path), "{}\n", 0o644)
    assert path.read_text() == "{}\n" and leftover.read_text() == "half a report"
    assert sorted(os.listdir(tmp_path)) == sorted(["report.json", "report.json.tmp", leftover.name])


def test_two_writers_at_once_leave_one_whole_file_and_no_temp(tmp_path):
    path = str(tmp_path / "lock.json")
    contents = {"a": b"a" * (1 << 20), "b": b"b" * (1 << 19)}
    errors = []

    def write(name):
        try:
            for _round in range(10):
                replace_file(path, contents[name], 0o644)
        except Exception as exc:  # pylint: disable=broad-except  # reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(name,)) for name in contents]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []
    with open(path, "rb") as handle:
        assert handle.read() in contents.values()
    assert os.listdir(tmp_path) == ["lock.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        replace_file(str(path), "new\n", "0644")               # not a mode: fails before the rename
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["config.yaml"]
    with pytest.raises(FileNotFoundError):
        replace_file(str(tmp_path / "missing" / "x"), "new\n", 0o644)
