"""Shared pytest setup: the checkout is importable as ``ansible_collections.llmfleet.seats``
(scripts/bootstrap links it under .build/collections), and real ansible runs get one env."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

# SIGTERM tears the fixtures down, as Ctrl-C does (the hook is registered by its name here).
from support.interrupt import pytest_configure  # noqa: F401 pylint: disable=unused-import

REPO_ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO_ROOT / ".build" / "collections"
VENV_BIN = REPO_ROOT / ".venv" / "bin"
# The python that runs Ansible's modules on this machine and the twin's hosts (tests/twin/hostpython)
HOST_PYTHON = REPO_ROOT / "tests" / "twin" / "hostpython" / "python"

if not (COLLECTIONS / "ansible_collections" / "llmfleet" / "seats").exists():
    raise RuntimeError("run scripts/bootstrap (or `make venv`) first: %s is missing" % COLLECTIONS)
sys.path.insert(0, str(COLLECTIONS))
# The twin and its stand-ins (tests/twin): `from twinlib import fleet`, `from fakegpu import hook`.
sys.path.insert(0, str(REPO_ROOT / "tests" / "twin"))


def _module_cache() -> Path:
    """Where this checkout's ansible runs share the module zips they build
    (tests/support/controller/callback/shared_module_cache.py): named by what a zip is made of."""
    digest = hashlib.sha256(metadata.version("ansible-core").encode())
    for top in ("plugins", "meta"):
        for path in sorted((REPO_ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(b"\0%s\0%s" % (str(path.relative_to(REPO_ROOT)).encode(), path.read_bytes()))
    return REPO_ROOT / ".build" / "test-modules" / digest.hexdigest()[:16]


MODULE_CACHE = _module_cache()
# The code Jinja compiles from each template (tests/support/controller/callback/kept_templates.py),
# named by what it is compiled from and by the versions that compile it
TEMPLATE_CACHE = REPO_ROOT / ".build" / "test-templates"


def ansible_env(extra: dict | None = None) -> dict:
    """The environment for a real ansible/ansible-playbook subprocess."""
    env = dict(os.environ)
    env.update({
        "PATH": "%s:%s" % (VENV_BIN, env.get("PATH", "")),
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        # no ANSIBLE_HOST_KEY_CHECKING: host keys are checked, the twin's against the known_hosts
        # its inventory names (a "false" here would put StrictHostKeyChecking=no before it)
        # Local runs use the venv's python (interpreter discovery would find pyenv shims), as the
        # twin's hosts run it: keeping the code it compiles from each module's zip
        # (tests/twin/hostpython); inventories of remote hosts set their own.
        "ANSIBLE_PYTHON_INTERPRETER": str(HOST_PYTHON),
        # ...and the tasks on the implicit localhost run with ansible-playbook's own python, which
        # no interpreter setting reaches: its sitecustomize keeps their code too (PYTHONPATH).
        "PYTHONPATH": os.pathsep.join(path for path in (str(HOST_PYTHON.parent), env.get("PYTHONPATH")) if path),
        # A twin brought up by this test run is this pytest's: if it is killed before its
        # fixtures tear the twin down, the next `twin up` removes it (tests/twin/twinlib/fleet.py).
        "LLMFLEET_TWIN_OWNER": str(os.getpid()),
    })
    env.update(extra or {})
    if env["ANSIBLE_COLLECTIONS_PATH"] == str(COLLECTIONS):
        # the same sources build the same zips: one build per suite (an installed copy builds its
        # own); each run imports the collection's controller plugins once, not in every worker;
        # and a template's code, compiled once, is what every worker of every run renders it with;
        # and each run waits for its workers' results woken by each, not polling for it
        enabled = [name for name in env.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if name]
        env.update({
            "ANSIBLE_CALLBACK_PLUGINS": str(REPO_ROOT / "tests" / "support" / "controller" / "callback"),
            "ANSIBLE_CALLBACKS_ENABLED": ",".join(enabled + ["shared_module_cache", "preloaded_plugins",
                                                             "kept_templates", "woken_results"]),
            "LLMFLEET_TEST_MODULE_CACHE": env.get("LLMFLEET_TEST_MODULE_CACHE", str(MODULE_CACHE)),
            "LLMFLEET_TEST_TEMPLATE_CACHE": env.get("LLMFLEET_TEST_TEMPLATE_CACHE", str(TEMPLATE_CACHE)),
        })
    return env


def run_ansible(args: list[str], extra_env: dict | None = None, check: bool = False,
                timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``ansible`` or ``ansible-playbook`` (args[0]) from the repo root; text output."""
    cmd = [str(VENV_BIN / args[0])] + list(args[1:])
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=ansible_env(extra_env), text=True,
                          capture_output=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
