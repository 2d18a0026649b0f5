"""Each role's README.md is what scripts/role-readmes writes from its meta/argument_specs.yml, so
the README cannot drift from the spec: every variable of the spec, with its type, default and
description, and nothing else."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "role-readmes"


def _load_script():
    loader = importlib.machinery.SourceFileLoader("role_readmes", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("role_readmes", loader))
    loader.exec_module(module)
    return module


ROLE_READMES = _load_script()
ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/meta/argument_specs.yml"))


def test_every_role_is_covered():
    assert ROLES == sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir())
    assert [role_dir.name for role_dir in ROLE_READMES.role_dirs()] == ROLES


@pytest.mark.parametrize("role", ROLES)
def test_the_committed_readme_is_what_the_script_writes(role):
    role_dir = REPO / "roles" / role
    assert (role_dir / "README.md").read_text() == ROLE_READMES.render(role_dir), \
        "roles/%s/README.md differs from its meta/argument_specs.yml: run scripts/role-readmes" % role


@pytest.mark.parametrize("role", ROLES)
def test_the_readme_has_a_row_per_variable_of_the_spec(role):
    options = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"]["options"]
    rows = [line for line in ROLE_READMES.render(REPO / "roles" / role).splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(options)


def test_a_variable_row_shows_type_default_choices_and_markup_as_markdown():
    row = ROLE_READMES.render(REPO / "roles" / "seat_plan")
    assert ("| `seat_plan_cards_source` | str | `auto` | Where the cards are read now. One of `auto`, `nvml`, "
            "`nvidia-smi`, `snapshot`, `inventory`. |") in row
    assert ROLE_READMES.markdown(["With O(a=b), C(x) | I(y)", "L(the inventory,docs/inventory.md)."]) == \
        "With `a=b`, `x` | *y* [the inventory](docs/inventory.md)."


def test_check_names_a_stale_readme_and_writes_nothing(tmp_path, monkeypatch, capsys):
    role = tmp_path / "roles" / "seat_plan"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text((REPO / "roles" / "seat_plan" / "meta" /
                                                       "argument_specs.yml").read_text())
    (role / "README.md").write_text("stale\n")
    monkeypatch.setattr(ROLE_READMES, "ROLES", tmp_path / "roles")
    assert ROLE_READMES.main(["--check"]) == 1
    assert "differs: roles/seat_plan/README.md" in capsys.readouterr().out
    assert (role / "README.md").read_text() == "stale\n"
    assert ROLE_READMES.main([]) == 0
    assert ROLE_READMES.main(["--check"]) == 0
    assert (role / "README.md").read_text() == (REPO / "roles" / "seat_plan" / "README.md").read_text()
