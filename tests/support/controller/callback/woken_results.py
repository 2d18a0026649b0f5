"""The test runs' ansible and ansible-playbook processes wait for their workers' results without
polling.

Ansible's strategy waits for a task's results by polling: it looks at the queue its results
thread fills, sleeps internal_poll_interval (0.001 s; only an ansible.cfg sets it) and looks
again, some 900 times a second for as long as a module runs on a host. A window's runs wait
minutes on boots and gates, and each poll costs a few tens of microseconds: 2 to 3 % of a core
for every waiting run, some sixty CPU-s of a test run (a longer interval would trade it for a
later start of every next task). Here the results thread wakes the strategy when it queues a
result, on the condition the queue already has for its lock; the strategy still looks for a
dead worker (and fails the run as before) every WORKER_CHECK_S. The results are processed by
the same code in the same order: only what ends the wait changes.
tests/conftest.py's ansible_env enables this for runs of the checkout's own collection;
tests/integration/test_twin_parts.py holds it to the poll it replaces.
"""

from __future__ import annotations

import collections
import threading

from ansible.errors import AnsibleError
from ansible.plugins.callback import CallbackBase
from ansible.plugins.strategy import StrategyBase

DOCUMENTATION = """
    name: woken_results
    type: aggregate
    short_description: the test runs' strategies are woken by each result instead of polling for it
    description:
      - Wakes the strategy's wait for results when its results thread queues one.
    requirements:
      - enabled by tests/conftest.py's ansible_env
"""

# how long a wait goes without looking for a worker that died without a result
WORKER_CHECK_S = 0.1


class _WakingResults(collections.deque):
    """The strategy's results queue, which wakes its waiter on each result. The results thread
    appends under the queue's condition (``with strategy._results_lock``), so it may notify."""

    def __init__(self, queued, condition):
        super().__init__(queued)
        self.condition = condition

    def append(self, x):  # deque's own name for it
        super().append(x)
        self.condition.notify_all()


def _wait_on_pending_results(self, iterator):
    """StrategyBase's wait for every pending result, woken by each instead of polling."""
    if not isinstance(self._results, _WakingResults):
        return _polled_wait(self, iterator)
    ret_results = []
    while self._pending_results > 0 and not self._tqm._terminated:
        if self._tqm.has_dead_workers():
            raise AnsibleError("A worker was found in a dead state")
        ret_results.extend(self._process_pending_results(iterator))
        if self._pending_results > 0:
            with self._results_lock:
                if not self._results:
                    self._results_lock.wait(WORKER_CHECK_S)
    return ret_results


def _init(self, *args, **kwargs):
    _strategy_init(self, *args, **kwargs)
    # the strategy of ansible-core 2.19: a deque of results and a condition for its lock (another
    # core polls as it always has); nothing is queued yet, as no worker runs before it is made
    if isinstance(self._results, collections.deque) and isinstance(self._results_lock, threading.Condition):
        self._results = _WakingResults(self._results, self._results_lock)


_strategy_init = StrategyBase.__init__
_polled_wait = StrategyBase._wait_on_pending_results


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "woken_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        StrategyBase.__init__ = _init
        StrategyBase._wait_on_pending_results = _wait_on_pending_results
