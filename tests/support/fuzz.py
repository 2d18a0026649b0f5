"""Seeded malformations of valid input, for the tests that every entry point either accepts
or refuses with the collection's own error and never crashes."""

from __future__ import annotations

import copy


def mutate(rng, value, values):
    """``value`` with one thing in it replaced by one of ``values`` (or added under the key
    ``zzz``); the root itself may be replaced."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value) + ["zzz"])
        value[key] = (mutate(rng, value[key], values) if key in value and rng.random() < 0.5
                      else copy.deepcopy(rng.choice(values)))
        return value
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        value[index] = mutate(rng, value[index], values)
        return value
    return copy.deepcopy(rng.choice(values))


def malformed(rng, valid, values, times=3):
    """A copy of ``valid`` mutated one to ``times`` times."""
    value = copy.deepcopy(valid)
    for _edit in range(rng.randint(1, times)):
        value = mutate(rng, value, values)
    return value
