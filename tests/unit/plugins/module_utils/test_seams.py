"""The engine and runtime seams as code: every registered engine and runtime defines each name
its seam requires with the declared parameters, gets the seam's default for each it leaves out,
and one that does not fit is refused where it is registered, naming every mismatch."""

from __future__ import annotations

import re
import types

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.seam import Constant, Required, SeamError
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import ENGINES, fixed, radiance, vllm
from ansible_collections.llmfleet.seats.plugins.module_utils._engines import seam as engine_seam
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.fields import KINDS, LAUNCH_PREFIX, launch_fields
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import RUNTIMES, compose, systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import seam as runtime_seam

SEAMS = [(engine_seam.ENGINE, ENGINES, (vllm, fixed, radiance)), (runtime_seam.RUNTIME, RUNTIMES, (compose, systemd))]


@pytest.mark.parametrize("seam, registry, modules", SEAMS, ids=["engines", "runtimes"])
def test_every_registered_implementation_fits_its_seam(seam, registry, modules):
    assert sorted(registry) == sorted(module.NAME for module in modules)
    for module in modules:
        assert seam.problems(module) == []
        handed_out = registry[module.NAME]
        for name, slot in seam.names.items():
            own = getattr(module, name, None)
            if own is not None:
                assert getattr(handed_out, name) is own, "%s %s keeps its own %s" % (seam.what, module.NAME, name)
            elif isinstance(slot, Constant):
                assert getattr(handed_out, name) == slot.default
            else:
                assert getattr(handed_out, name) is slot, "the seam's default %s" % name


@pytest.mark.parametrize("seam", [engine_seam.ENGINE, runtime_seam.RUNTIME], ids=["engines", "runtimes"])
def test_the_seams_prose_names_every_name_it_declares(seam):
    doc = (engine_seam if seam is engine_seam.ENGINE else runtime_seam).__doc__
    assert [name for name in seam.names if not name.isupper() and "``%s``" % name not in doc] == []
    for name, slot in seam.names.items():
        described = slot.doc if isinstance(slot, (Required, Constant)) else slot.__doc__
        assert described or name in ("NAME", "stop", "remove"), "%s says what it means" % name


def test_the_fixed_engine_is_only_what_differs_from_the_seams_defaults():
    own = {name for name in engine_seam.ENGINE.names if hasattr(fixed, name) and callable(getattr(fixed, name))}
    assert own == {"container_name", "normalize", "size", "footprint", "command", "listen_port", "plan_cells"}
    handed_out = ENGINES["fixed"]
    assert handed_out.serves(["vllm", "serve"]) is False and handed_out.in_flight("x 1") is None
    assert handed_out.IN_FLIGHT_PATH is None and handed_out.MODELS_PATH is None and handed_out.LOG_GATE is None
    assert handed_out.log_gates({}, "") == [] and handed_out.probe_gates({}, None) == []


@pytest.mark.parametrize("engine", [vllm, fixed, radiance], ids=lambda engine: engine.NAME)
def test_each_engines_one_field_table_holds_kinds_the_checker_knows_and_fields_the_inventory_declares(engine):
    rows = engine.PLAN_SEAT_FIELDS
    assert rows and len({field for field, _kind, _flag in rows}) == len(rows), "each field once"
    for field, kind, flag in rows:
        assert kind in KINDS, "%s: %s" % (field, kind)
        assert flag is None or re.match(r"\A--[a-z][a-z-]*\Z", flag), flag
        if field.startswith(LAUNCH_PREFIX):
            assert field[len(LAUNCH_PREFIX):] in engine.FIELDS, "the plan copies %s from the inventory" % field
    assert launch_fields(rows) == tuple(f[len(LAUNCH_PREFIX):] for f, _k, _f in rows if f.startswith(LAUNCH_PREFIX))


def test_an_engine_that_does_not_fit_is_refused_naming_every_mismatch():
    broken = types.ModuleType("broken")
    broken.NAME = "broken"
    broken.FIELDS = ["not", "frozen"]
    for name, slot in engine_seam.ENGINE.names.items():
        if isinstance(slot, Required):
            setattr(broken, name, lambda *args: None)
    del broken.plan_cells
    broken.size = lambda seat, inventory_dir: None
    broken.serves = "yes"
    with pytest.raises(SeamError) as refused:
        engine_seam.ENGINE.implement(broken)
    message = str(refused.value)
    assert message.startswith("engine broken: ")
    for part in ("engine broken: FIELDS: expected a frozenset, got ['not', 'frozen']",
                 "engine broken: defines no plan_cells",
                 "engine broken: size(seat, inventory_dir): expected the parameters (seat, inventory_dir, options)",
                 "engine broken: serves: expected a function (argv), got 'yes'",
                 "engine broken: normalize(args): expected the parameters (check, where, raw, seat, defaults)"):
        assert part in message, message
    assert "\n" not in message


def test_an_engine_with_a_count_path_but_no_reader_is_refused():
    half = types.ModuleType("half")
    for name, slot in engine_seam.ENGINE.names.items():
        if isinstance(slot, Required):
            setattr(half, name, getattr(fixed, name))
    half.NAME, half.IN_FLIGHT_PATH = "half", "/metrics"
    with pytest.raises(SeamError, match=re.escape("engine half: defines IN_FLIGHT_PATH without in_flight")):
        engine_seam.ENGINE.implement(half)


def test_a_runtime_must_say_how_its_files_are_redacted():
    careless = types.ModuleType("careless")
    for name, slot in runtime_seam.RUNTIME.names.items():
        if isinstance(slot, Required) and name != "redact":
            setattr(careless, name, getattr(compose, name))
    careless.NAME = "careless"
    with pytest.raises(SeamError, match=re.escape("runtime careless: defines no redact")):
        runtime_seam.RUNTIME.implement(careless)


def test_a_runtime_without_its_name_is_refused():
    nameless = types.ModuleType("nameless")
    with pytest.raises(SeamError, match=re.escape("runtime nameless: defines no NAME")):
        runtime_seam.RUNTIME.implement(nameless)
