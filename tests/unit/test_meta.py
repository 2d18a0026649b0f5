"""The collection's metadata and defaults agree with its code: the action group lists every
module, every default the docs and role defaults repeat is the one module_utils holds, and the
execution environment declares every third-party import."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import yaml

from ansible_collections.llmfleet.seats.plugins.module_utils._common import defaults

ROOT = Path(__file__).resolve().parents[2]


def test_the_action_group_lists_every_module():
    group = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["action_groups"]["seats"]
    assert group == sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py"))


def test_role_defaults_are_the_collections():
    rebalance = yaml.safe_load((ROOT / "roles" / "seat_rebalance" / "defaults" / "main.yml").read_text())
    assert rebalance["seat_rebalance_margin_mib"] == defaults.MARGIN_MIB
    assert rebalance["seat_rebalance_tolerance_mib"] == defaults.TOLERANCE_MIB
    assert rebalance["seat_rebalance_spare_gate"] is defaults.SPARE_GATE
    assert rebalance["seat_rebalance_health_timeout"] == defaults.HEALTH_TIMEOUT_S
    assert rebalance["seat_rebalance_health_interval"] == defaults.HEALTH_INTERVAL_S
    plan = (ROOT / "roles" / "seat_plan" / "defaults" / "main.yml").read_text()
    assert "llmfleet_kv_factor | default(%s)" % defaults.KV_FACTOR in plan
    assert "llmfleet_demand_factor | default(%s)" % defaults.DEMAND_FACTOR in plan
    assert "default('%s')" % defaults.KV_ROUND_TO in plan and "default('%s')" % defaults.GPU_PROFILE in plan
    assert yaml.safe_load(plan)["seat_plan_boot_margin_mib"] == defaults.MARGIN_MIB


def test_the_ladders_step_lives_in_the_defaults_not_in_the_yaml():
    ladder = yaml.safe_load((ROOT / "roles" / "seat_ladder" / "defaults" / "main.yml").read_text())
    assert ladder["seat_ladder_step"] == 0, "0: the knob's own step, defaults.LADDER_STEPS"
    steps = re.compile(r"\b(%s)\b" % "|".join(str(step) for step in set(defaults.LADDER_STEPS.values())))
    for path in [ROOT / "playbooks" / "ladder.yml", *(ROOT / "roles" / "seat_ladder").rglob("*.yml")]:
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        assert not steps.findall(code), "%s repeats a step of defaults.LADDER_STEPS" % path.relative_to(ROOT)


def test_every_role_takes_the_report_directory_one_way():
    for role in ("seat_plan", "seat_rebalance", "seat_ladder"):
        values = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
        assert values["%s_report_dir" % role] == "{{ llmfleet_report_dir | default('') }}", role
    for path in (ROOT / "playbooks").glob("*.yml"):
        assert "_report_dir: \"{{ llmfleet_report_dir" not in path.read_text(), \
            "%s: the roles read llmfleet_report_dir themselves" % path.relative_to(ROOT)


def test_role_argument_specs_say_the_defaults_the_roles_have():
    for role in ("seat_plan", "seat_rebalance", "seat_ladder"):
        spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        options = spec["argument_specs"]["main"]["options"]
        values = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
        for name, option in options.items():
            templated = isinstance(values.get(name), str) and "{{" in values[name]
            assert not (templated and "default" in option), \
                "%s: %s comes from the inventory (%s); its spec documents no default" % (role, name, values[name])
            if "default" in option:
                assert name in values, "%s: %s has a documented default but none in defaults/main.yml" % (role, name)
                assert option["default"] == values[name], "%s: %s documents %r, defaults/main.yml has %r" % (
                    role, name, option["default"], values[name])


# The distribution that provides each third-party module the plugins import.
DISTRIBUTIONS = {"yaml": "PyYAML", "pynvml": "nvidia-ml-py"}


def _third_party_imports():
    found = set()
    for path in (ROOT / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ansible", "ansible_collections", "__future__"):
                    found.add(top)
    return found


def test_the_execution_environment_declares_every_import_the_plugins_make():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())["dependencies"]
    declared = {line.split("[")[0].split("=")[0].split(">")[0].strip()
                for line in (ROOT / meta["python"]).read_text().splitlines() if line.strip() and not line.startswith("#")}
    imports = _third_party_imports()
    assert imports, "the scan found the plugins' imports"
    assert {DISTRIBUTIONS.get(name, name) for name in imports} == declared
    assert (ROOT / meta["system"]).is_file()
    ignored = yaml.safe_load((ROOT / "galaxy.yml").read_text())["build_ignore"]
    assert not [path for path in (meta["python"], meta["system"], "meta") if path in ignored or
                path.split("/")[0] in ignored], "ansible-builder reads these from the built collection"
