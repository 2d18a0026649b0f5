"""gateway_routes' main() on a copy of the seeds-shaped LiteLLM config: audit, check mode,
rewrite with a dated backup keeping owner and mode, idempotence, all-or-nothing under strict."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from support.module_args import patch_module_args

from ansible_collections.llmfleet.seats.plugins.modules import gateway_routes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gateway"
FIXTURE = FIXTURES / "litellm_config_fv.yaml"
OLD, NEW = "10.250.50.54", "10.251.50.54"
# The fixture's seats, with coder never moved and a summarizer on another host.
SEATS = [{key: value for key, value in seat.items() if seat["name"] != "coder" or key != "previous_host"}
         for seat in yaml.safe_load((FIXTURES / "litellm_config_fv_seats.yaml").read_text())]
SEATS.append({"name": "summarizer", "host": "10.251.50.99", "port": 8040})


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "config.yaml"
    shutil.copy(FIXTURE, path)
    os.chmod(path, 0o640)
    os.chown(path, 65534, 65534)
    return path


def run(capsys, **args):
    args.setdefault("seats", SEATS)
    args.setdefault("external_hosts", ["api.openai.com"])
    args.setdefault("backup_date", "20261005")
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        gateway_routes.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_audit_only_fails_naming_the_stale_targets_and_touches_nothing(config, capsys):
    before = config.read_bytes()
    code, result = run(capsys, path=str(config))
    assert code == 1 and result["changed"] is False
    assert result["problems"] == 4
    assert "4 gateway target(s) do not point at their seat" in result["msg"]
    assert "line 41 pass_through_endpoints[0] (/judge/score) target" \
        " http://10.250.50.54:8030/score: moved - seat scalar-judge moved from" in result["msg"]
    assert result["rewrites"] == []
    assert config.read_bytes() == before
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.yaml"]


def test_check_mode_predicts_the_rewrite_and_writes_nothing(config, capsys):
    before = config.read_bytes()
    code, result = run(capsys, path=str(config), rewrite=True, _ansible_check_mode=True,
                       _ansible_diff=True)
    assert code == 0, result
    assert result["changed"] is True and result["backup_file"] is None
    assert len(result["rewrites"]) == 4 and result["problems"] == 0
    assert result["diff"]["before"] == before.decode()
    assert result["diff"]["after"] == before.decode().replace("http://%s:" % OLD,
                                                              "http://%s:" % NEW)
    assert config.read_bytes() == before
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.yaml"]


def test_rewrite_backs_up_keeps_owner_and_mode_and_is_idempotent(config, capsys):
    before = config.read_bytes()
    code, result = run(capsys, path=str(config), rewrite=True, backup_tag="renumber")
    assert code == 0, result
    assert result["changed"] is True and result["problems"] == 0
    backup = Path(result["backup_file"])
    assert backup.name == "config.yaml.bak-20261005-renumber"
    assert backup.read_bytes() == before
    after = config.read_bytes()
    assert after == before.replace(b"http://10.250.50.54:", b"http://10.251.50.54:")
    info = config.stat()
    assert (info.st_mode & 0o7777, info.st_uid, info.st_gid) == (0o640, 65534, 65534)
    assert [t["status"] for t in result["targets"]].count("ok") == 6

    code, again = run(capsys, path=str(config), rewrite=True, backup_tag="renumber")
    assert code == 0 and again["changed"] is False and again["rewrites"] == []
    assert again["backup_file"] is None
    assert config.read_bytes() == after
    assert sorted(p.name for p in config.parent.iterdir()) == [
        "config.yaml", "config.yaml.bak-20261005-renumber"]


def test_strict_writes_nothing_while_an_unknown_target_remains(config, capsys):
    before = config.read_bytes()
    code, result = run(capsys, path=str(config), rewrite=True, seats=SEATS[:-1])
    assert code == 1 and result["changed"] is False
    assert result["msg"].endswith("line 30 model_list[6] (summarizer) api_base"
                                  " http://10.251.50.99:8040/v1: unknown - no seat at"
                                  " 10.251.50.99:8040")
    assert len(result["rewrites"]) == 4, "what it would have done is still reported"
    assert config.read_bytes() == before

    code, loose = run(capsys, path=str(config), rewrite=True, seats=SEATS[:-1], strict=False)
    assert code == 0 and loose["changed"] is True and loose["problems"] == 1


@pytest.mark.parametrize("args, message", [
    ({"path": "/nonexistent/config.yaml"},
     "path: cannot read the LiteLLM config /nonexistent/config.yaml: No such file or directory"),
    ({"backup_date": "2026-10-05"}, "backup_date: expected YYYYMMDD, got '2026-10-05'"),
    ({"seats": [{"name": "a", "host": "h", "port": 0}]}, "seat a: port: expected a TCP port"),
    ({"seats": [{"name": "a", "port": 1}]}, "host"),
])
def test_bad_input_is_one_clear_error(config, capsys, args, message):
    args.setdefault("path", str(config))
    code, result = run(capsys, **args)
    assert code == 1 and message in result["msg"]


def test_unreadable_yaml_names_the_file(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text("model_list: [\n")
    code, result = run(capsys, path=str(path))
    assert code == 1 and result["msg"].startswith("%s: not readable as YAML:" % path)
