"""A filter for the test of the preloaded_plugins callback: which of the named Python modules
a worker holds when its task starts (what its parent imported before forking it)."""

from __future__ import annotations

import sys


class FilterModule:
    def filters(self):
        return {"imported_in_worker": lambda names: sorted(name for name in names if name in sys.modules)}
