"""Regular expressions compiled at their first use (_common/patterns.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex


def test_a_lazy_pattern_answers_as_the_compiled_one():
    pattern = lazy_regex(r"(?P<name>[a-z]+)-(?P<n>\d+)", re.IGNORECASE)
    assert pattern.match("Voices-12").group("name", "n") == ("Voices", "12")
    assert pattern.search("seat coder-3 up").group(0) == "coder-3"
    assert pattern.sub("x", "a-1 b-2") == "x x"
    assert pattern.groupindex == {"name": 1, "n": 2} and pattern.flags & re.IGNORECASE


def test_a_pattern_is_compiled_at_its_first_use_not_where_it_is_declared():
    broken = lazy_regex(r"(unclosed")
    with pytest.raises(re.error):
        broken.match("unclosed")


def test_importing_every_module_util_compiles_none_of_the_collections_patterns():
    """What every module run on a host pays: no pattern of the collection is compiled by its imports."""
    probe = """
import os, pkgutil, re, sys, importlib
compiled = []
compile = re.compile
def counting(*args, **kwargs):
    caller = sys._getframe(1).f_code.co_filename
    if "llmfleet" in caller and not caller.endswith("patterns.py"):
        compiled.append(os.path.basename(caller))
    return compile(*args, **kwargs)
re.compile = counting
import ansible_collections.llmfleet.seats.plugins.module_utils as utils
for info in pkgutil.walk_packages(utils.__path__, utils.__name__ + "."):
    importlib.import_module(info.name)
print(sorted(set(compiled)))
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout.strip() == "[]", proc.stdout
