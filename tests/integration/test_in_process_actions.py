"""seat_plan, rebalance_report, and gpu_info reading a snapshot, run in Ansible's own process on
the controller (their action plugins) and give what the shipped module gives: the same plan
and report, the same refusals in the same words, the same check mode. A task environment makes Ansible ship the
module, so one playbook run holds both paths; -vvv shows which one each task took. The run id
alone (what seat_rebalance gives every module of a window) is no such environment.

seat_gates' phases that read nothing from the host are computed here whatever the connection:
those tasks keep an SSH connection to a listening socket of this test, which no task may reach."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, run_ansible
from support.listener import Listener

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair"
SNAPSHOT = REPO_ROOT / "inventories" / "fv-ml1" / "snapshots" / "plateau-20261007.json"
SHIPPED = {"LLMFLEET_SHIPPED": "1"}  # any task environment: the module runs as a process
RUN_ID = {"LLMFLEET_RUN_ID": "r1"}  # but the run id alone: it runs here

PLAN_ARGS = {"host": "{{ inventory_hostname }}", "gpus": "{{ llmfleet_gpus }}", "seats": "{{ llmfleet_seats }}",
             "seat_defaults": "{{ llmfleet_seat_defaults }}", "inventory_dir": "{{ inventory_dir }}",
             "kv_factor": "{{ llmfleet_kv_factor }}", "kv_round_to": "{{ llmfleet_kv_round_to }}"}


U0, U1 = "GPU-7a1c0001-0000-4000-8000-000000000001", "GPU-7a1c0001-0000-4000-8000-000000000002"
# twin1's cards as gpu_info reads them, GPU 1 nearly full: the seats placed on it do not fit
CARDS = {"gpus": [{"index": index, "uuid": uuid, "memory_total_mib": 81559, "memory_free_mib": free,
                   "processes": []} for index, uuid, free in ((0, U0, 80000), (1, U1, 900))]}
GATES = {
    "start": {"phase": "before_start", "seats": "{{ plan_here.plan.seats }}", "cards": CARDS},
    "memory": {"phase": "after_boot_memory", "plan_gpus": "{{ plan_here.plan.gpus }}", "gpus": [U0, U1],
               "cards": CARDS},
    "no_cards": {"phase": "plateau", "plan_gpus": "{{ plan_here.plan.gpus }}"},
}


def _report(report_dir):
    return {"report_dir": str(report_dir), "run_id": "r1", "host": "twin1",
            "section": {"status": "planned", "actions": ["nothing"], "plan": "{{ plan_here.plan }}"}}


def _task(name, module, args, **keywords):
    return {"name": name, "llmfleet.seats.%s" % module: args, "delegate_to": "localhost",
            "register": name, "ignore_errors": True, **keywords}


def _both(name, module, args, **keywords):
    """The task run here, and the same task with the module shipped."""
    return [_task(name + "_here", module, args, **keywords),
            _task(name + "_shipped", module, args, environment=SHIPPED, **keywords)]


def _gates(name, args, port):
    """seat_gates on twin1 over SSH to ``port``, with a task environment: still not shipped."""
    unreachable = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": port}
    return {"name": "gates_" + name, "llmfleet.seats.seat_gates": args, "vars": unreachable,
            "environment": SHIPPED, "register": "gates_" + name, "ignore_errors": True}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("in-process")
    listener = Listener()
    tasks = (
        _both("plan", "seat_plan", PLAN_ARGS)
        + _both("unknown", "seat_plan", dict(PLAN_ARGS, bogus=1))
        + _both("mistyped", "seat_plan", dict(PLAN_ARGS, min_spare_mib="lots"))
        + _both("not_a_dir", "seat_plan", dict(PLAN_ARGS, output_dir=str(out / "a-file")))
        + _both("bad_seat", "seat_plan", dict(PLAN_ARGS, seats=[{"name": "alpha", "engine": "vllm", "max_model_len": -1}]))
        + _both("snapshot", "gpu_info", {"source": "snapshot", "snapshot_path": str(SNAPSHOT)})
        + _both("no_snapshot", "gpu_info", {"source": "snapshot", "snapshot_path": str(out / "none.json")})
        + _both("no_path", "gpu_info", {"source": "snapshot"})
        + [_gates(name, args, listener.port) for name, args in GATES.items()]
        + [_task("dry", "seat_plan", dict(PLAN_ARGS, output_dir=str(out / "dry")), check_mode=True),
           _task("written", "seat_plan", dict(PLAN_ARGS, output_dir=str(out / "plans")), diff=True),
           _task("again", "seat_plan", dict(PLAN_ARGS, output_dir=str(out / "plans")), diff=True),
           _task("report_here", "rebalance_report", _report(out / "report-here")),
           _task("report_shipped", "rebalance_report", _report(out / "report-shipped"), environment=SHIPPED),
           _task("report_run_id", "rebalance_report", _report(out / "report-run-id"), environment=RUN_ID),
           _task("report_run_id_and_more", "rebalance_report", _report(out / "report-run-id-and-more"),
                 environment=dict(RUN_ID, **SHIPPED)),
           {"name": "keep the results", "delegate_to": "localhost",
            "ansible.builtin.copy": {"dest": str(out / "results.json"), "mode": "0644",
                                     "content": "{{ results | to_json }}"},
            "vars": {"results": {name: "{{ %s }}" % name for name in (
                "plan_here", "plan_shipped", "unknown_here", "unknown_shipped", "mistyped_here",
                "mistyped_shipped", "not_a_dir_here", "not_a_dir_shipped", "bad_seat_here", "bad_seat_shipped", "snapshot_here",
                "snapshot_shipped", "no_snapshot_here", "no_snapshot_shipped", "no_path_here",
                "no_path_shipped", "dry", "written", "again", "report_here", "report_shipped", "report_run_id",
                "report_run_id_and_more",
                *("gates_" + name for name in GATES))}}}])
    (out / "a-file").write_text("not a directory\n")
    playbook = out / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "twin1", "gather_facts": False, "tasks": tasks}], sort_keys=False))
    try:
        proc = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), str(playbook), "-vvv"])
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert listener.connections == 0, "a seat_gates phase that reads nothing from the host contacted it"
    return out, proc.stdout, json.loads((out / "results.json").read_text())


def test_only_the_shipped_tasks_start_a_module_process(runs):
    _out, stdout, _results = runs

    def shipped(module):
        return len(re.findall(r"^<[^>]+> PUT \S+ TO \S+/AnsiballZ_%s\.py$" % module, stdout, re.M))
    assert shipped("seat_plan") == 5, "the five seat_plan tasks with an environment, and no other"
    assert shipped("gpu_info") == 3, "the three gpu_info tasks with an environment, and no other"
    assert shipped("rebalance_report") == 2, \
        "the rebalance_report tasks with an environment beyond the run id, and no other"
    assert shipped("seat_gates") == 0, "no seat_gates phase that reads nothing from the host ships"


@pytest.mark.parametrize("name, words", [("start", "GPU 1 has 900 MiB free; the seat needs"),
                                         ("memory", "GPU 1 has 900 MiB free after boot")])
def test_the_gates_computed_here_fail_the_full_gpu_with_its_numbers(runs, name, words):
    result = runs[2]["gates_" + name]
    assert result["failed"] and result["msg"].startswith("gate failed: ") and words in result["msg"], result["msg"]
    failed = [g for g in result["gates"] if not g["ok"]]
    assert failed and all(g["detail"] in result["msg"] for g in failed)
    assert any(g["ok"] for g in result["gates"]), "GPU 0's gates pass"


def test_a_computed_phase_without_its_cards_is_refused_as_the_module_refuses_it(runs):
    assert runs[2]["gates_no_cards"]["msg"] == "phase is plateau but all of the following are missing: cards"


@pytest.mark.parametrize("name", ["plan", "snapshot"])
def test_the_same_result_either_way(runs, name):
    _out, _stdout, results = runs
    here, shipped = results[name + "_here"], results[name + "_shipped"]
    assert not here.get("failed") and not shipped.get("failed"), (here.get("msg"), shipped.get("msg"))
    drop = {"invocation", "_ansible_no_log"}
    assert {k: v for k, v in here.items() if k not in drop} == {k: v for k, v in shipped.items() if k not in drop}


def test_the_plan_is_the_fleets(runs):
    plan = runs[2]["plan_here"]["plan"]
    assert plan["host"] == "twin1" and [seat["name"] for seat in plan["seats"]] == ["alpha", "beta", "gamma", "asr"]
    assert runs[2]["plan_here"]["markdown"].startswith("#") and "<svg" in runs[2]["plan_here"]["svg"]


@pytest.mark.parametrize("name, words", [
    ("unknown", "Unsupported parameters for (llmfleet.seats.seat_plan) module: bogus"),
    ("mistyped", "min_spare_mib"),
    ("bad_seat", "max_model_len"),
    ("not_a_dir", "a-file: not a directory"),
    ("no_snapshot", "none.json"),
    ("no_path", "snapshot_path"),
])
def test_the_same_refusal_in_the_same_words(runs, name, words):
    _out, _stdout, results = runs
    here, shipped = results[name + "_here"], results[name + "_shipped"]
    assert here["failed"] and shipped["failed"]
    assert here["msg"] == shipped["msg"] and words in here["msg"], (here["msg"], shipped["msg"])
    assert "Traceback" not in here["msg"]


def test_check_mode_writes_no_plan_file(runs):
    out, _stdout, results = runs
    assert results["dry"]["changed"] and not (out / "dry").exists()


def test_the_plan_files_are_written_once_with_their_diff(runs):
    out, _stdout, results = runs
    written, again = results["written"], results["again"]
    names = ["twin1-plan.json", "twin1-plan.md", "twin1-plan.svg"]
    assert written["changed"] and written["files"] == [str(out / "plans" / name) for name in names]
    assert [d["after_header"] for d in written["diff"]] == written["files"]
    assert all(d["before"] == "" for d in written["diff"])
    assert json.loads((out / "plans" / "twin1-plan.json").read_text()) == written["plan"]
    assert (out / "plans" / "twin1-plan.md").read_text() == written["markdown"]
    assert (out / "plans" / "twin1-plan.svg").read_text() == written["svg"]
    assert {stat.S_IMODE((out / "plans" / name).stat().st_mode) for name in names} == {0o644}
    assert stat.S_IMODE((out / "plans").stat().st_mode) == 0o755
    assert not again["changed"] and "diff" not in again


def test_the_same_report_either_way(runs):
    out, _stdout, results = runs
    here, shipped = results["report_here"], results["report_shipped"]
    assert here["changed"] and shipped["changed"] and results["report_run_id"]["changed"]
    assert [Path(path).name for path in here["paths"]] == ["report.json", "report.md", "twin1.svg"]
    for name in ("report.json", "report.md", "twin1.svg"):
        for other in ("report-shipped", "report-run-id", "report-run-id-and-more"):
            assert (out / "report-here" / name).read_text() == (out / other / name).read_text()
