"""A stand-in for vLLM 0.33.0 where llmfleet.seats looks: its CLI, boot log, GPU memory, HTTP
API and failure modes. Standard library only: it runs in an image holding nothing but Debian's
python3. See ../README.md for what it models and the FAKE_VLLM_* knobs.

FAKE_VLLM_VERSION, baked into an image the twin tags as an older release, makes it that release
where its KV figures differ (kv.py's ``Release``) and prints that version."""

import os
import re

VERSION = os.environ.get("FAKE_VLLM_VERSION") or "0.33.0"
if not re.match(r"\A0\.(1\d|2\d|3[0-3])\.\d+\Z", VERSION):
    raise SystemExit("FAKE_VLLM_VERSION: expected a vLLM release from 0.10.0 to 0.33.x, got %r" % VERSION)
RELEASE = tuple(int(part) for part in VERSION.split("."))
