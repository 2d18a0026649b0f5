# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The action plugin of a module whose controller-side work needs no separate process.

Shipping a module costs a Python start and the module's imports for every host and task: most
of a fleet plan's time. On a local connection without become, async or a task environment, the
same module_utils function runs here, after the same argument checks AnsibleModule makes, and
fails with the same one-line messages; so does a call that reads nothing from its target,
whatever the connection. Anywhere else the module runs. The run id a window gives every module
(seat_rebalance's block) is no environment here: it marks what a module starts on a GPU host,
and nothing done here starts anything."""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import EXPECTED, operator_message
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.lock import RUN_ID_VARIABLE

_LOCAL = ("local", "ansible.builtin.local")


class InProcessModule(ActionBase):
    """Subclasses set ``module``, ``argument_spec`` (and ``validator_options``: required_if
    and friends) and ``work(params, check_mode, diff) -> result``, raising as a module's work
    does; ``runs_here(args)`` says which calls are done here (by default those on the
    controller). Only for calls whose results carry no no_log option's value: AnsibleModule's
    censoring does not run here."""

    _supports_check_mode = True
    module = ""
    argument_spec = {}
    validator_options = {}

    @staticmethod
    def work(params, check_mode, diff):
        raise NotImplementedError

    def runs_here(self, args):  # pylint: disable=unused-argument
        return self._on_controller()

    def _on_controller(self):
        return (self._connection.transport in _LOCAL and not self._play_context.become
                and not self._task.async_val and not set(self._environment()) - {RUN_ID_VARIABLE})

    def _environment(self):
        """The task's environment as Ansible would give a shipped module: ``{name: value}``."""
        environment = {}
        if any(self._task.environment or []):
            self._compute_environment_string(environment)
        return environment

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # no effect since ansible-core 2.10
        args = dict(self._task.args)
        if not self.runs_here(args):
            result.update(self._execute_module(module_name=self.module, module_args=args, task_vars=task_vars))
            self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        validation = ArgumentSpecValidator(self.argument_spec, **self.validator_options).validate(args)
        if validation.error_messages:
            message = validation.errors.msg
            if isinstance(validation.errors[0], UnsupportedError):
                message = "Unsupported parameters for (%s) module: %s" % (self.module, message)
            result.update(failed=True, msg=message)
            return result
        try:
            done = self.work(validation.validated_parameters, bool(self._task.check_mode), bool(self._task.diff))
        except EXPECTED as exc:
            result.update(failed=True, msg=operator_message(exc))
            return result
        except Exception as exc:  # pylint: disable=broad-except  # a bug: Ansible keeps its traceback
            raise AnsibleActionFail(operator_message(exc), orig_exc=exc) from exc
        for warning in done.pop("warnings", []):
            Display().warning(warning)
        # what a shipped module's result would be after its JSON round trip
        result.update(json.loads(json.dumps(done)))
        return result
