"""seat_files through real ansible-playbook runs: check mode and diff touch nothing, the write
keeps dated backups with owner and mode, a second run changes nothing, restore is byte-exact."""

from __future__ import annotations

import json
import os
import stat
import subprocess

from conftest import run_ansible
from support.need import need_root_and

SEAT = {  # a plan seat: seat_plan's plan.seats[]
    "name": "gen-small", "engine": "vllm", "port": 8011, "container": "vllm-gen-small",
    "gpus": ["GPU-6c1f2f2e-0d0b-4c59-9d3e-1a2b3c4d5e01"], "health_path": "/health",
    "max_model_len": 262144, "kv_cache_memory_bytes": 5905580032, "gpu_memory_utilization": 0.12,
    "launch": {"image": "vllm/vllm-openai:v0.33.0", "model": "/models/Qwen3.5-35B-A3B",
               "served_model_names": ["gen-small", "it's $HOME"], "max_new_tokens": 32768,
               "default_chat_template_kwargs": {"enable_thinking": False}},
}


def _play(tmp_path, seat, extra_args=(), state="present", restore=None):
    task = {"llmfleet.seats.seat_files": {
        "project_dir": str(tmp_path / "gen-small"), "host": "fv-ml1", "state": state,
        "backup_tag": "rebal", "backup_date": "20261005"}, "register": "out"}
    if state == "present":
        task["llmfleet.seats.seat_files"]["seat"] = seat
    else:
        task["llmfleet.seats.seat_files"]["restore"] = restore
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        task, {"ansible.builtin.copy": {"content": "{{ out | to_json }}",
                                        "dest": str(tmp_path / "result.json"), "mode": "0644"},
               "check_mode": False, "changed_when": False}]}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    proc = run_ansible(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path),
                        *extra_args])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "result.json").read_text()), proc.stdout


def test_write_check_diff_idempotence_backup_and_restore(tmp_path):
    project = tmp_path / "gen-small"

    result, out = _play(tmp_path, SEAT, ["--check", "--diff"])
    assert result["changed"] and not project.exists(), "check mode must touch nothing"
    assert "SEAT_KV_CACHE_MEMORY_BYTES='5905580032'" in out, "the diff shows the new .env"

    result, dummy = _play(tmp_path, SEAT)
    assert result["changed"] and all(f["created"] for f in result["files"].values())
    env = project / ".env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    first_env, first_compose = env.read_bytes(), (project / "compose.yaml").read_bytes()

    result, dummy = _play(tmp_path, SEAT)
    assert not result["changed"] and result["backups"] == [], "a second run changes nothing"

    # The operator made the .env group-readable; a new budget must keep that mode.
    os.chmod(env, 0o640)
    bigger = dict(SEAT, kv_cache_memory_bytes=6442450944)
    result, out = _play(tmp_path, bigger, ["--diff"])
    backup = project / ".env.bak-20261005-rebal"
    assert result["files"][".env"]["backup"] == str(backup)
    assert result["files"]["compose.yaml"]["changed"] is False
    assert backup.read_bytes() == first_env and stat.S_IMODE(backup.stat().st_mode) == 0o640
    assert b"SEAT_KV_CACHE_MEMORY_BYTES='6442450944'" in env.read_bytes()
    assert stat.S_IMODE(env.stat().st_mode) == 0o640
    assert "-SEAT_KV_CACHE_MEMORY_BYTES='5905580032'" in out

    restored, dummy = _play(tmp_path, None, state="restored", restore=result["files"])
    assert restored["changed"]
    assert env.read_bytes() == first_env and (project / "compose.yaml").read_bytes() == first_compose
    assert stat.S_IMODE(env.stat().st_mode) == 0o640

    # A later, different version on the same day gets its own backup name, never overwrites.
    result, dummy = _play(tmp_path, bigger)
    result, dummy = _play(tmp_path, dict(SEAT, kv_cache_memory_bytes=7516192768))
    assert result["files"][".env"]["backup"] == str(backup) + "-2"
    assert backup.read_bytes() == first_env


def test_bad_seat_fails_naming_the_field(tmp_path):
    task = {"llmfleet.seats.seat_files": {
        "project_dir": str(tmp_path / "x"), "seat": dict(SEAT, port="eighty")}}
    path = tmp_path / "play.yml"
    path.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    proc = run_ansible(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)])
    assert proc.returncode != 0
    assert "seat gen-small: port: expected a TCP port (1-65535), got 'eighty'" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "x").exists()


def test_an_intent_journaled_before_the_write_restores_safely(tmp_path):
    """The rebalance journals a check-mode result before it writes: restoring from it is a no-op
    for files the run never got to write, and byte-exact for those it did."""
    _play(tmp_path, SEAT)
    env = tmp_path / "gen-small" / ".env"
    original = env.read_bytes()
    bigger = dict(SEAT, kv_cache_memory_bytes=6442450944)
    intent, _out = _play(tmp_path, bigger, ["--check"])
    assert intent["files"][".env"]["changed"] and not os.path.exists(intent["files"][".env"]["backup"])
    restored, _out = _play(tmp_path, None, state="restored", restore=intent["files"])
    assert not restored["changed"] and env.read_bytes() == original, "never written: nothing to undo"

    _play(tmp_path, bigger)
    restored, _out = _play(tmp_path, None, state="restored", restore=intent["files"])
    assert restored["changed"] and env.read_bytes() == original, "written: restored byte for byte"


def test_a_killed_runs_temp_files_are_cleared_by_the_next_write(tmp_path):
    _play(tmp_path, SEAT)
    project = tmp_path / "gen-small"
    (project / ".llmfleet-validate-abc123").mkdir()
    (project / ".llmfleet-validate-abc123" / "compose.yaml").write_text("x")
    (project / ".llmfleet-k9x").write_text("half a file")
    result, _out = _play(tmp_path, SEAT)
    assert not result["changed"]
    assert sorted(p.name for p in project.iterdir()) == [".env", "compose.yaml"]


def test_an_unwritable_seat_directory_is_one_line_and_changes_nothing(tmp_path):
    need_root_and("chattr")
    project = tmp_path / "gen-small"
    _play(tmp_path, SEAT)
    before = {path.name: path.read_bytes() for path in project.iterdir()}
    subprocess.run(["chattr", "+i", str(project)], check=True)  # not even root may add a backup
    try:
        args = {"project_dir": str(project), "seat": dict(SEAT, kv_cache_memory_bytes=6442450944),
                "backup_date": "20261005", "validate": False}
        proc = run_ansible(["ansible", "localhost", "-c", "local", "-m", "llmfleet.seats.seat_files",
                            "-a", json.dumps(args)])
    finally:
        subprocess.run(["chattr", "-i", str(project)], check=True)
    shown = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in shown and "unexpected" not in shown, shown
    assert "%s/.llmfleet-" % project in shown or "%s/.env.bak-20261005-rebal" % project in shown, shown
    assert "Operation not permitted" in shown, shown
    assert {path.name: path.read_bytes() for path in project.iterdir()} == before, "nothing changed"


def test_seats_in_one_run_validate_all_before_writing_any(tmp_path):
    """seats and root: every changed seat validated before any file is written; each seat's
    secrets reach its own .env alone; a second run changes nothing."""
    token = "hf_seatsTOKEN0123456789"
    coder = dict(SEAT, name="coder", port=8012, container="vllm-coder",
                 launch=dict(SEAT["launch"], secret_environment=["HF_TOKEN"]))
    broken = dict(coder, launch=dict(coder["launch"], health_interval="soon"))
    args = {"root": str(tmp_path / "compose"), "host": "fv-ml1", "backup_date": "20261005",
            "secrets": {"coder": {"HF_TOKEN": token}}}
    tasks = [{"name": name, "llmfleet.seats.seat_files": dict(args, seats=seats), "register": name,
              "ignore_errors": True, **keywords}
             for name, seats, keywords in (("dry", [SEAT, coder], {"check_mode": True}),
                                           ("refused", [SEAT, broken], {}),
                                           ("written", [SEAT, coder], {"diff": True}),
                                           ("again", [SEAT, coder], {}))]
    tasks.append({"ansible.builtin.copy": {"content": "{{ {'dry': dry, 'refused': refused, 'written': written, "
                                                      "'again': again} | to_json }}",
                                           "dest": str(tmp_path / "result.json"), "mode": "0644"}})
    (tmp_path / "play.yml").write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    proc = run_ansible(["ansible-playbook", "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml")])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert token not in proc.stdout + proc.stderr
    results = json.loads((tmp_path / "result.json").read_text())

    assert results["dry"]["changed"] and set(results["dry"]["seats"]) == {"gen-small", "coder"}
    refused = results["refused"]
    assert refused["failed"] and "rejected the rendered files for %s/coder" % args["root"] in refused["msg"]
    assert "soon" in refused["msg"], refused["msg"]
    written, again = results["written"], results["again"]
    assert written["changed"] and all(seat["changed"] and all(f["created"] for f in seat["files"].values())
                                      for seat in written["seats"].values()), "the refused run wrote neither seat"
    assert [d["after_header"] for d in written["diff"]] == [
        "%s/%s/%s" % (args["root"], seat, name) for seat in ("gen-small", "coder") for name in (".env", "compose.yaml")]
    env = {seat: (tmp_path / "compose" / seat / ".env").read_text() for seat in ("gen-small", "coder")}
    assert ("SEAT_SECRET_HF_TOKEN='%s'" % token) in env["coder"] and token not in env["gen-small"]
    assert not again["changed"] and again["backups"] == []
    assert not any(seat["changed"] for seat in again["seats"].values())


def test_an_operators_own_copy_writes_what_the_window_writes(tmp_path):
    """seat_file_texts and ansible.builtin.copy with backup: the same bytes and modes seat_files
    writes, for either runtime, and the second copy changes nothing."""
    runtimes = ("compose", "systemd")
    projects = {runtime: tmp_path / runtime / "gen-small" for runtime in runtimes}
    plays = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.file": {"path": str(project), "state": "directory", "mode": "0755"}},
        {"ansible.builtin.copy": {"content": "{{ item.content }}", "dest": "{{ item.path }}",
                                  "mode": "{{ item.mode }}", "backup": True},
         "loop": "{{ seat | llmfleet.seats.seat_file_texts(project, 'fv-ml1') }}",
         "loop_control": {"label": "{{ item.path }}"}, "no_log": True, "register": "copied"},
        {"ansible.builtin.copy": {"content": "{{ copied.results | map(attribute='changed') | list | to_json }}",
                                  "dest": str(tmp_path / runtime / "changed.json"), "mode": "0644"}}],
        "vars": {"seat": dict(SEAT, runtime=runtime), "project": str(project)}} for runtime, project in projects.items()]
    path = tmp_path / "copy.yml"
    path.write_text(json.dumps(plays))
    for attempt in (1, 2):
        proc = run_ansible(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for runtime in runtimes:
            changed = json.loads((tmp_path / runtime / "changed.json").read_text())
            assert changed and all(changed) if attempt == 1 else not any(changed), (runtime, attempt, changed)
    copied = {}
    for runtime, project in projects.items():
        copied[runtime] = {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in project.iterdir()}
        for p in project.iterdir():
            p.unlink()
    window = tmp_path / "window.yml"
    window.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"llmfleet.seats.seat_files": {"project_dir": str(project), "host": "fv-ml1",
                                       "seat": dict(SEAT, runtime=runtime)}} for runtime, project in projects.items()]}]))
    proc = run_ansible(["ansible-playbook", "-i", "localhost,", "-c", "local", str(window)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for runtime, project in projects.items():
        written = {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in project.iterdir()}
        assert copied[runtime] == written, runtime
