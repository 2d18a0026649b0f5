"""The replaying stand-in of a vLLM seat or LiteLLM (tests/unit/fixtures/gateway/replay_server.py,
beside its recordings), importable as ``support.replay``: ``with ReplayServer() as seat: ...``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "gateway"

_spec = importlib.util.spec_from_file_location("gateway_replay", FIXTURES / "replay_server.py")
_replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_replay)

ReplayServer = _replay.ReplayServer
load_recording = _replay.load_recording
