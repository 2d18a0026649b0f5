"""Reusable test infrastructure (importable as ``support`` from any test: tests/conftest.py puts
``tests/`` on sys.path).

- ``support.fakegpu``: build the fake ``libnvidia-ml.so.1``, write simulated-GPU state files,
  the environment that makes a process see the fake GPU, and recorded nvidia-smi fixtures.
- ``support.dockerd``: a private Docker engine on its own socket under /tmp, images built from
  host binaries with ``docker import``, and compose projects on it.
- ``support.need``: fail in CI (``CI=1``), skip elsewhere, when a test cannot get what it needs.
"""
