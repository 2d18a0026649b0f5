"""The layout is the pipeline: each stage of plugins/module_utils is a package that says, in its
docstring, which other stages it may import, and imports no others (no upward or circular
imports). Modules and filters import module_utils only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4] / "plugins"
UTILS = ROOT / "module_utils"
PREFIX = "ansible_collections.llmfleet.seats.plugins.module_utils."
STAGES = sorted(p.name for p in UTILS.iterdir() if p.is_dir() and not p.name.startswith("__"))


def _allowed(stage: str) -> set:
    doc = ast.get_docstring(ast.parse((UTILS / stage / "__init__.py").read_text()))
    match = re.search(r"May import: ([^.]*)\.", doc or "")
    assert match, "%s/__init__.py does not say what it may import ('May import: ...')" % stage
    return set(re.findall(r"_[a-z]+", match.group(1)))


def _imported_stages(path: Path) -> set:
    stages = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            if name.startswith(PREFIX):
                stages.add(name[len(PREFIX):].split(".")[0])
    return stages


def test_module_utils_holds_only_stage_packages():
    assert sorted(p.name for p in UTILS.glob("*.py")) == [], "logic lives in a stage package"
    assert "_common" in STAGES


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_imports_only_what_it_says(stage):
    allowed = _allowed(stage) | {stage}
    for path in sorted((UTILS / stage).glob("*.py")):
        extra = _imported_stages(path) - allowed
        assert not extra, "%s imports %s; %s may import only %s" % (
            path.relative_to(ROOT), ", ".join(sorted(extra)), stage, ", ".join(sorted(allowed - {stage})))


def test_the_import_rules_have_no_cycle():
    graph = {stage: _allowed(stage) - {stage} for stage in STAGES}
    done, path = set(), []

    def visit(stage):
        assert stage not in path, "import cycle: %s" % " -> ".join(path + [stage])
        if stage in done:
            return
        path.append(stage)
        for other in graph.get(stage, ()):
            visit(other)
        path.pop()
        done.add(stage)

    for stage in STAGES:
        visit(stage)
