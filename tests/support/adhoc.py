"""Run modules with a real ``ansible`` or ``ansible-playbook`` and get their results as data.

    rc, result = run_module("llmfleet.seats.gpu_info", {"source": "nvml"}, extra_env=env)
    proc, results = play_tasks(tasks, tmp_path)     # {task name: localhost's result}

The json stdout callback prints every result whole (warnings included), so tests assert on the
modules' own returns instead of scraping text. Many cases as the tasks of one playbook cost one
start of Ansible, not one each.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_ansible

JSON_OUTPUT = {"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}


def _results(proc, command: list, pick):
    """``pick`` of the first play's tasks in the json callback's document, or why there is none."""
    try:
        return pick(json.loads(proc.stdout)["plays"][0]["tasks"])
    except (ValueError, KeyError, IndexError):
        raise AssertionError("no JSON result from %s (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(command), proc.returncode, proc.stdout, proc.stderr))


def run_module(module: str, args: dict | None = None, extra_env: dict | None = None,
               check_mode: bool = False, python: str | None = None, host: str = "localhost",
               inventory: str | None = None) -> tuple[int, dict]:
    """``(ansible's exit code, the host's result)``; ``python`` picks the target interpreter."""
    command = ["ansible", host, "-m", module] + (["-a", json.dumps(args)] if args else [])
    if inventory:
        command += ["-i", inventory]
    if check_mode:
        command.append("--check")
    if python:
        command += ["-e", "ansible_python_interpreter=%s" % python]
    proc = run_ansible(command, extra_env=dict(JSON_OUTPUT, **(extra_env or {})))
    return proc.returncode, _results(proc, command, lambda tasks: tasks[0]["hosts"][host])


def play_tasks(tasks: list, directory: Path, *options: str, extra_env: dict | None = None,
               timeout: int = 600) -> tuple:
    """``tasks`` on localhost, one real ansible-playbook (written in ``directory``, run with
    ``options``): ``(the process, {task name: localhost's result})``. A task that may fail
    without stopping the others says ``ignore_errors``."""
    playbook = Path(directory) / "tasks.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    command = ["ansible-playbook", *options, str(playbook)]
    proc = run_ansible(command, extra_env=dict(JSON_OUTPUT, **(extra_env or {})), timeout=timeout)
    return proc, _results(proc, command, lambda tasks: {task["task"]["name"]: task["hosts"]["localhost"]
                                                        for task in tasks})
