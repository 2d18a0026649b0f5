# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A seam declared in code: the names a module implementing it (an engine, a runtime) defines,
each a function with its parameters or a constant with its type, and the default a module that
leaves a name out gets. The registry of each seam hands out its implementations through
``Seam.implement``, which refuses one that lacks a required name or whose function takes other
parameters, so a new engine or runtime is checked where it is registered, and a conformance test
asks every registered one."""

from __future__ import annotations

import inspect
import types


class SeamError(TypeError):
    """An implementation that does not fit its seam; the message names every mismatch."""


class Required:
    """A function every implementation defines itself, with these parameters."""

    def __init__(self, *parameters, doc=""):
        self.parameters, self.doc = parameters, doc


class Constant:
    """A constant of type ``kind``; ``default`` for an implementation without it (``Required``
    when each must define its own)."""

    def __init__(self, kind, default=Required, doc=""):
        self.kind, self.default, self.doc = kind, default, doc


def _parameters(function):
    """Its parameters' names; a leading underscore (a parameter it does not use) is not part of
    the name."""
    return tuple(name.lstrip("_") for name in inspect.signature(function).parameters)


class Seam:
    """``names``: name -> a Required function, a Constant, or a default function (whose own
    parameters are the declared ones, and whose docstring says what the name means)."""

    def __init__(self, what, names, together=()):
        # names an implementation defines all or none of (a path without its reader would take
        # the default reader, which reads nothing)
        self.what, self.names, self.together = what, names, together

    def problems(self, module):
        """Why ``module`` does not fit the seam (empty when it does)."""
        label = "%s %s" % (self.what, getattr(module, "NAME", getattr(module, "__name__", module)))
        found = []
        for name, slot in self.names.items():
            if not hasattr(module, name):
                if isinstance(slot, Required) or (isinstance(slot, Constant) and slot.default is Required):
                    found.append("%s: defines no %s" % (label, name))
                continue
            value = getattr(module, name)
            if isinstance(slot, Constant):
                if not isinstance(value, slot.kind) or isinstance(value, bool) and slot.kind is int:
                    found.append("%s: %s: expected a %s, got %r" % (label, name, _kind_name(slot.kind), value))
                continue
            declared = slot.parameters if isinstance(slot, Required) else _parameters(slot)
            if not callable(value):
                found.append("%s: %s: expected a function (%s), got %r" % (label, name, ", ".join(declared), value))
            elif _parameters(value) != declared:
                found.append("%s: %s(%s): expected the parameters (%s)"
                             % (label, name, ", ".join(_parameters(value)), ", ".join(declared)))
        for group in self.together:
            defined = [name for name in group if hasattr(module, name)]
            if defined and len(defined) < len(group):
                found.append("%s: defines %s without %s" % (
                    label, ", ".join(defined), ", ".join(name for name in group if name not in defined)))
        return found

    def implement(self, module):
        """The implementation as its registry hands it out: every public name of ``module``, and
        the seam's default for each name it leaves out; SeamError when it does not fit."""
        problems = self.problems(module)
        if problems:
            raise SeamError("; ".join(problems))
        implementation = types.SimpleNamespace(**{
            name: getattr(module, name) for name in dir(module) if not name.startswith("_")})
        for name, slot in self.names.items():
            if not hasattr(module, name):
                setattr(implementation, name, slot.default if isinstance(slot, Constant) else slot)
        implementation.__name__ = module.__name__
        return implementation


def _kind_name(kind):
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
