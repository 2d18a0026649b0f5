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

Ansible's collection loader also compiles every collection file it imports from source, at every
start (it keeps no bytecode): about 0.07 CPU-s of each ansible or ansible-playbook process, a
few hundred of them a test run. Their code is kept by the digest of the source, as the twin's
hosts keep the modules' (tests/twin/hostpython/sitecustomize.py, which every python of a test
run's ansible imports first).
"""

from __future__ import annotations

import importlib
import pkgutil

import sitecustomize

from ansible.plugins.callback import CallbackBase
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionPkgLoaderBase

DOCUMENTATION = """
    name: preloaded_plugins
    type: aggregate
    short_description: the test runs import the collection's controller plugins before forking
    description:
      - Imports every filter, action and lookup plugin of llmfleet.seats in the parent process.
      - Keeps the code the collection loader compiles, by the digest of its source.
    requirements:
      - enabled by tests/conftest.py's ansible_env
"""

# what the controller loads in a worker; modules only ever run in a process of their own
PRELOADED = ("filter", "action", "lookup")


def _kept_code(loader, fullname):
    """The collection loader's get_code, with the code kept by tests/twin/hostpython."""
    if loader._compiled_code:
        return loader._compiled_code
    source = loader.get_source(fullname)
    if source is None:  # a synthetic package: no code, as the loader's own get_code says
        return None
    filename = loader.get_filename(fullname) or "<string>"
    loader._compiled_code = sitecustomize.kept_compile(filename, source.encode() if isinstance(source, str) else source)
    return loader._compiled_code


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
        if hasattr(sitecustomize, "kept_compile"):
            _AnsibleCollectionPkgLoaderBase.get_code = _kept_code
        preload()
