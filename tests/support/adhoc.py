"""Run one module with a real ``ansible`` ad-hoc command and get its result as data.

    rc, result = run_module("llmfleet.seats.gpu_info", {"source": "nvml"}, extra_env=env)

The json stdout callback prints the whole result (warnings included), so tests assert on the
module's own return instead of scraping text.
"""

from __future__ import annotations

import json

from conftest import run_ansible


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
    env = {"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    env.update(extra_env or {})
    proc = run_ansible(command, extra_env=env)
    try:
        document = json.loads(proc.stdout)
        result = document["plays"][0]["tasks"][0]["hosts"][host]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("no JSON result from %s (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(command), proc.returncode, proc.stdout, proc.stderr))
    return proc.returncode, result
