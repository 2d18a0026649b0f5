"""The test runs' ansible-playbook processes import the collection's controller plugins once,
before their workers fork.

Ansible forks a worker per task and host. A worker that looks up one of the collection's
filters loads every filter file of the collection (the lookup reads them in order until one
names it), and a worker that runs an action or lookup plugin loads it: each import of their
module_utils again, in every worker, as the parent never loaded them. Those imports were about
a sixth of a window's CPU on the controller, and most of a plan of many hosts (the inventory
corpus: about 0.17 CPU-s a host). Loaded here, in the parent, every worker finds them already in
sys.modules, where ansible's plugin loader looks first. What runs is the same code: only where
it was imported changes. tests/conftest.py's ansible_env enables this for runs of the
checkout's own collection.
"""

from __future__ import annotations

import importlib
import pkgutil

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: preloaded_plugins
    type: aggregate
    short_description: the test runs import the collection's controller plugins before forking
    description:
      - Imports every filter, action and lookup plugin of llmfleet.seats in the parent process.
    requirements:
      - enabled by tests/conftest.py's ansible_env
"""

# what the controller loads in a worker; modules only ever run in a process of their own
PRELOADED = ("filter", "action", "lookup")


def preload():
    """Import every plugin of PRELOADED."""
    for kind in PRELOADED:
        package = importlib.import_module("ansible_collections.llmfleet.seats.plugins." + kind)
        for found in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            importlib.import_module(found.name)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "preloaded_plugins"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # at construction: ad-hoc `ansible` runs get no playbook start
        preload()
