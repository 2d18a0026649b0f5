"""The flags each modelled vLLM release's ``vllm serve`` takes, and the names its parser flags
take, read from its own source.

``vllm serve``'s parser is built from two places: the engine's arguments
(``vllm/engine/arg_utils.py``, one ``add_argument("--flag", ...)`` per flag) and the frontend's
(the ``cli_args.py`` that defines ``make_arg_parser``: its own ``add_argument`` calls, and one
``--flag`` per field of its ``FrontendArgs`` dataclasses). This reads both with ``ast`` from the
release's wheel (tests/differential/vllm_sources.py), never importing them.

    python tests/differential/vllm_cli_flags.py --write   # regenerate the collection's table

writes ``plugins/module_utils/_engines/vllm_flags.py``: the oldest release's flags, then each
release's additions and removals. tests/integration/test_vllm_cli_flags.py checks that file
against the sources, and the realengine lane checks the reading against the real 0.32 parser.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_sources  # noqa: E402  (this directory's)

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "plugins" / "module_utils" / "_engines" / "vllm_flags.py"
ENGINE_FILE = "vllm/engine/arg_utils.py"
FRONTEND_FILES = ("vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
                  "vllm/entrypoints/openai/cli_args.py")
FLAG_RE = re.compile(r"\A--?[A-Za-z][A-Za-z0-9-]*\Z")
# Where each release registers the names --tool-call-parser and --reasoning-parser take: one
# decorator per parser file in the older releases, one table of lazy registrations in the newer.
PARSER_DIRS = {"tool_call_parser": ("vllm/entrypoints/openai/tool_parsers/", "vllm/tool_parsers/"),
               "reasoning_parser": ("vllm/reasoning/",)}
PARSER_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# The releases whose arithmetic the collection models (vllm_releases.py), oldest first.
RELEASES = ("0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0", "0.17.1", "0.18.1",
            "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1",
            "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")


def _added_flags(tree):
    """The literal flags of every ``*.add_argument(...)`` call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and FLAG_RE.match(arg.value):
                    yield arg.value


def _frontend_fields(tree):
    """``--field`` for each field of the frontend's argument dataclasses (ClassVars are none)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("FrontendArgs"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                        and "ClassVar" not in ast.unparse(item.annotation):
                    yield "--" + item.target.id.replace("_", "-")


def flags_of(release):
    """The sorted flags ``vllm serve`` of ``release`` takes, as its source writes them."""
    root = vllm_sources.release_files(release, (ENGINE_FILE,) + FRONTEND_FILES)
    frontend = next((root / name for name in FRONTEND_FILES
                     if (root / name).is_file() and "def make_arg_parser" in (root / name).read_text()), None)
    if frontend is None or not (root / ENGINE_FILE).is_file():
        raise SystemExit("vLLM %s: no %s or make_arg_parser in %s" % (release, ENGINE_FILE, ", ".join(FRONTEND_FILES)))
    flags = set(_added_flags(ast.parse((root / ENGINE_FILE).read_text())))
    front = ast.parse(frontend.read_text())
    flags.update(_added_flags(front))
    flags.update(_frontend_fields(front))
    return sorted(flags)


def _strings(node):
    """The literal strings of a string or a list or tuple of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [item.value for item in node.elts if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return []


def _registered_names(tree):
    """The names a parser module registers: ``register_module("a")`` or ``(["a", "b"])`` (as a
    decorator or a call), ``register_lazy_module(name="a", ...)``, and the keys of a
    ``*_TO_REGISTER`` table."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("register_module", "register_lazy_module"):
            named = node.args[:1] + [keyword.value for keyword in node.keywords if keyword.arg == "name"]
            for value in named:
                yield from _strings(value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id.endswith("_TO_REGISTER") for target in targets):
                for key in node.value.keys:
                    yield from _strings(key)


@functools.lru_cache(maxsize=None)
def _names_registered_in(source):
    """_registered_names of a parser file's source, read once for every release that ships the
    same file."""
    return frozenset(_registered_names(ast.parse(source)))


def parsers_of(release):
    """``{field: sorted names}``: the tool-call and reasoning parsers ``release`` registers."""
    names = vllm_sources.wheel_names(release)
    found = {}
    for field, dirs in PARSER_DIRS.items():
        files = [name for name in names if name.endswith(".py") and name.startswith(dirs)]
        root = vllm_sources.release_files(release, files)
        registered = set()
        for name in files:
            registered.update(_names_registered_in((root / name).read_text()))
        if not registered:
            raise SystemExit("vLLM %s: no %s registered under %s" % (release, field, ", ".join(dirs)))
        found[field] = sorted(name for name in registered if PARSER_NAME_RE.match(name))
    return found


def _delta_lines(by_release, indent):
    """The first release's names, then each later one's additions and removals."""
    releases, pad = list(by_release), " " * indent
    lines = ["%s(%r, (" % (pad, releases[0])]
    lines += ["%s    %r," % (pad, name) for name in by_release[releases[0]]]
    lines += ["%s)), (" % pad]
    for before, release in zip(releases, releases[1:]):
        added = sorted(set(by_release[release]) - set(by_release[before]))
        removed = sorted(set(by_release[before]) - set(by_release[release]))
        lines.append("%s    (%r, (" % (pad, release))
        lines += ["%s        %r," % (pad, name) for name in added]
        lines.append("%s    ), (" % pad)
        lines += ["%s        %r," % (pad, name) for name in removed]
        lines.append("%s    ))," % pad)
    lines.append("%s)" % pad)
    return lines


def table_text(flags_by_release, parsers_by_release):
    """The collection's table: the flags, then the parser names, each as the first release's and
    then each later one's changes."""
    lines = ['# Copyright (c) 2026, llmfleet.seats contributors',
             '# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)',
             '# SPDX-License-Identifier: GPL-3.0-or-later', '',
             '# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.',
             '# Do not use this from other collections or standalone plugins/modules!', '',
             '"""The flags ``vllm serve`` takes in each modelled release, and the parser names its',
             '``--tool-call-parser`` and ``--reasoning-parser`` take, read from that release\'s own source by',
             'tests/differential/vllm_cli_flags.py (which writes this file; do not edit it by hand).',
             '',
             '``FLAGS`` and each of ``PARSERS`` hold ``(first, changes)``: the oldest release\'s names, then',
             'each later release\'s additions and removals against the one before it. Pure data."""', '',
             'from __future__ import annotations', '', 'FLAGS = (']
    lines += _delta_lines(flags_by_release, 4)
    lines += [")", "", "PARSERS = {"]
    for field in PARSER_DIRS:
        lines.append("    %r: (" % field)
        lines += _delta_lines({release: parsers[field] for release, parsers in parsers_by_release.items()}, 8)
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite %s" % TABLE.relative_to(REPO))
    args = parser.parse_args(argv)
    text = table_text({release: flags_of(release) for release in RELEASES},
                      {release: parsers_of(release) for release in RELEASES})
    if args.write:
        TABLE.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
