"""The collection's metadata and defaults agree with its code: the action group lists every
module, and every default the docs and role defaults repeat is the one module_utils holds."""

from __future__ import annotations

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
    assert rebalance["seat_rebalance_health_timeout"] == defaults.HEALTH_TIMEOUT_S
    assert rebalance["seat_rebalance_health_interval"] == defaults.HEALTH_INTERVAL_S
    plan = (ROOT / "roles" / "seat_plan" / "defaults" / "main.yml").read_text()
    assert "default(%s)" % defaults.KV_FACTOR in plan
    assert "default('%s')" % defaults.KV_ROUND_TO in plan and "default('%s')" % defaults.GPU_PROFILE in plan
    assert yaml.safe_load(plan)["seat_plan_boot_margin_mib"] == defaults.MARGIN_MIB


def test_role_argument_specs_say_the_defaults_the_roles_have():
    for role in ("seat_plan", "seat_rebalance"):
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
