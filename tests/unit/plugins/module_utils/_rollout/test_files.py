"""Seat files' names and modes: backup names that cannot carry a path or a line break, and file
modes only as octal strings (a bare YAML 600 is decimal, mode 0o1130)."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.backup import BackupError, check_backup_name_parts
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.files import SeatFilesError, file_mode


@pytest.mark.parametrize("value, mode", [("0600", 0o600), ("600", 0o600), ("0644", 0o644)])
def test_a_mode_is_an_octal_string(value, mode):
    assert file_mode(value, "env_mode") == mode


@pytest.mark.parametrize("value", [600, 384, "0o600", "rw-------", "0999", "06000", "0600\n", None])
def test_anything_else_is_refused_naming_the_option(value):
    with pytest.raises(SeatFilesError, match=r"^env_mode: expected an octal mode as a quoted string"):
        file_mode(value, "env_mode")


@pytest.mark.parametrize("date, tag", [("2026120", "rebal"), ("20261201\n", "rebal"),
                                       ("20261201", "../x"), ("20261201", "rebal\n")])
def test_backup_names_are_refused_whole(date, tag):
    with pytest.raises(BackupError):
        check_backup_name_parts(date, tag)
