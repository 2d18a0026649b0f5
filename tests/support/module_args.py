"""A module's arguments for a unit test that calls its main(): ansible-core's own helper where
it has one (2.19 and later), else what that helper replaced (the arguments as AnsibleModule reads
them from ``basic._ANSIBLE_ARGS``), so the unit tests run on every ansible-core the collection
supports."""

from __future__ import annotations

import contextlib
import json

import pytest

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.17 and 2.18
    from ansible.module_utils import basic

    @contextlib.contextmanager
    def patch_module_args(args=None):
        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved


def run_main(main, capsys, args):
    """``(exit code, result)`` of a module's ``main()`` called with ``args``; the result without
    the ``invocation`` AnsibleModule echoes back."""
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        main()
    result = json.loads(capsys.readouterr().out)
    result.pop("invocation", None)
    return exit_info.value.code, result


__all__ = ["patch_module_args", "run_main"]
