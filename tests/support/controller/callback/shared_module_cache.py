"""The test runs' ansible-playbook processes share the modules they build.

Ansible builds each module's zip (its source and every module_utils it imports, found by
parsing each of them) once per process, in a cache under the process's own temporary
directory. The suite runs ansible-playbook hundreds of times with the same sources, and on two
cores those builds were a tenth of its CPU. tests/conftest.py names a directory keyed by the
digest of this checkout's plugins and of ansible-core's version (LLMFLEET_TEST_MODULE_CACHE);
this callback points the process's cache at it before the first task, so a module is built
once per suite and every later run ships the same bytes. Runs of another copy of the
collection (an installed one) get no directory and build their own.
"""

from __future__ import annotations

import os

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: shared_module_cache
    type: aggregate
    short_description: the test runs share the module zips they build
    description:
      - Points this process's module cache at the directory LLMFLEET_TEST_MODULE_CACHE names.
    requirements:
      - enabled by tests/conftest.py's ansible_env
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "shared_module_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        shared = os.environ.get("LLMFLEET_TEST_MODULE_CACHE")
        if not shared:
            return
        os.makedirs(shared, mode=0o700, exist_ok=True)
        own = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")
        if not os.path.lexists(own):
            os.symlink(shared, own)
