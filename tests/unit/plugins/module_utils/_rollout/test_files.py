"""Seat files' names and modes: backup names that cannot carry a path or a line break, file
modes only as octal strings (a bare YAML 600 is decimal, mode 0o1130), and secrets that reach
the .env alone."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.backup import BackupError, check_backup_name_parts
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.files import (
    SeatFilesError,
    file_mode,
    present,
    restored,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose


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


SEAT = {"name": "alpha", "engine": "vllm", "port": 8101, "gpus": ["GPU-a"], "container": "vllm-alpha",
        "health_path": "/health", "max_model_len": 32768, "kv_cache_memory_bytes": 4 * 1024 ** 3,
        "gpu_memory_utilization": 0.5,
        "launch": {"image": "vllm/vllm-openai:v0.33.0", "model": "m", "served_model_names": ["alpha"],
                   "environment": {"LOG_LEVEL": "info"}, "secret_environment": ["HF_TOKEN"]}}


def _present(tmp_path, secrets):
    return present(compose, str(tmp_path), SEAT, "h", "rebal", "20261201",
                   {".env": 0o600, "compose.yaml": 0o644}, False, None, False, secrets)


def test_a_secret_is_written_to_the_env_alone_and_a_diff_never_shows_it(tmp_path):
    first = _present(tmp_path, {"HF_TOKEN": "hf_first"})
    assert "hf_first" not in json.dumps(first)
    assert "SEAT_SECRET_HF_TOKEN='<secret>'" in first["diff"][0]["after"], "a new file: nothing to compare"
    env = (tmp_path / ".env").read_text()
    assert "SEAT_SECRET_HF_TOKEN='hf_first'" in env and (tmp_path / ".env").stat().st_mode & 0o777 == 0o600
    assert "hf_first" not in (tmp_path / "compose.yaml").read_text()
    assert _present(tmp_path, {"HF_TOKEN": "hf_first"})["changed"] is False, "a second run changes nothing"

    second = _present(tmp_path, {"HF_TOKEN": "hf_second"})
    shown = json.dumps(second)
    assert second["changed"] and "hf_first" not in shown and "hf_second" not in shown
    env_diff = next(d for d in second["diff"] if d["after_header"].endswith(".env"))
    assert "SEAT_SECRET_HF_TOKEN='<secret>'" in env_diff["before"]
    assert "SEAT_SECRET_HF_TOKEN='<secret changed>'" in env_diff["after"]
    assert [d["after_header"] for d in second["diff"]] == [str(tmp_path / ".env")], "compose.yaml holds no value"

    back = restored(compose, str(tmp_path), second["files"], False)
    assert "hf_second" not in json.dumps(back) and "hf_first" not in json.dumps(back)
    assert "SEAT_SECRET_HF_TOKEN='hf_first'" in (tmp_path / ".env").read_text()


def test_a_secret_written_over_a_world_readable_env_leaves_it_and_its_backup_private(tmp_path):
    env = tmp_path / ".env"
    env.write_text("SEAT_SECRET_HF_TOKEN='hf_old'\n")
    env.chmod(0o644)
    written = present(compose, str(tmp_path), SEAT, "h", "rebal", "20261201", {".env": 0o600, "compose.yaml": 0o644},
                      False, None, False, {"HF_TOKEN": "hf_new"})
    backup = written["files"][".env"]["backup"]
    assert env.stat().st_mode & 0o777 == 0o600
    assert os.stat(backup).st_mode & 0o777 == 0o600, "the backup holds the old secret"
    assert (tmp_path / "compose.yaml").stat().st_mode & 0o777 == 0o644, "no secret there: its own mode"

    restored(compose, str(tmp_path), written["files"], False)
    assert env.read_text() == "SEAT_SECRET_HF_TOKEN='hf_old'\n" and env.stat().st_mode & 0o777 == 0o600


def test_a_mode_that_opens_the_env_to_others_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(SeatFilesError, match=r"^\.env: mode 0644 would let others read the seat's secrets"):
        present(compose, str(tmp_path), SEAT, "h", "rebal", "20261201", {".env": 0o644}, False, None, False,
                {"HF_TOKEN": "hf_x"})
    assert list(tmp_path.iterdir()) == []


def test_a_group_mode_the_operator_chose_is_kept_for_the_env_and_its_backup(tmp_path):
    env = tmp_path / ".env"
    env.write_text("SEAT_SECRET_HF_TOKEN='hf_old'\n")
    env.chmod(0o640)
    written = present(compose, str(tmp_path), SEAT, "h", "rebal", "20261201", {".env": 0o600, "compose.yaml": 0o644},
                      False, None, False, {"HF_TOKEN": "hf_new"})
    assert env.stat().st_mode & 0o777 == 0o640
    assert os.stat(written["files"][".env"]["backup"]).st_mode & 0o777 == 0o640
