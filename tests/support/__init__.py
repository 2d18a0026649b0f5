"""Reusable test infrastructure (importable as ``support`` from any test: tests/conftest.py puts
``tests/`` on sys.path).

- ``support.dockerd``: a private Docker engine on its own socket under /tmp, images built from
  host binaries with ``docker import``, and compose projects on it.
- ``support.need``: fail in CI (``CI=1``), skip elsewhere, when a test cannot get what it needs.
- ``support.rollout``: the twin-pair fleet, rebalance runs on it, and what each host holds.
- ``support.litellm``: the pinned LiteLLM proxy in front of seats.
- ``support.wait``: wait on an event, never a bare sleep before an assert.
- ``support.process``: a command run in its own process group, stopped as a group.
- ``support.interrupt``: SIGTERM tears the fixtures down, as Ctrl-C does.
- ``support.fuzz``: seeded malformations of valid input, for the never-crashes tests.
- ``support.module_args``: a module's arguments for a unit test of its main(), on every ansible-core.
The twin and every stand-in live in ``tests/twin``, also on sys.path: ``twinlib`` (the twin),
``fakegpu.simulated`` (build the fake ``libnvidia-ml.so.1``, write simulated-GPU state files,
the environment that makes a process see the fake GPU, recorded nvidia-smi fixtures),
``replay.server`` (the replaying stand-in of a vLLM seat or LiteLLM, with its recordings).
"""
