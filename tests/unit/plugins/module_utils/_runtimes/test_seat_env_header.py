"""Every seat file starts with a comment naming the seat and the host: a name outside its
grammar would end the comment and start a line of code (a shell command in serve.sh, a key in
compose.yaml), so every runtime refuses to render it."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import RUNTIMES
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seat_env import header

ASR = {"name": "asr", "engine": "fixed", "port": 8190, "container": "asr", "gpus": ["GPU-b"],
       "health_path": "/health", "gpu_memory_utilization": None,
       "launch": {"image": "asr:1", "container_port": 8000}}


def test_the_header_names_a_well_formed_host():
    assert header(ASR, "gpu-1.fleet").startswith("# Managed by llmfleet.seats: seat asr on gpu-1.fleet.")


@pytest.mark.parametrize("host", ["gpu1\nrm -rf /", "gpu1\ninjected: true", "gpu1\r", "gpu 1", "-x"])
@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_every_runtime_refuses_a_host_name_outside_the_grammar(runtime, host):
    seat = dict(ASR, runtime=runtime)
    with pytest.raises(RenderError, match=r"seat asr: host: expected a host name of letters"):
        RUNTIMES[runtime].render(seat, host, {}, "/srv/llmfleet/asr")


def test_a_seat_name_outside_the_grammar_is_refused():
    with pytest.raises(RenderError, match="name: expected lowercase"):
        header(dict(ASR, name="asr\nx"), "gpu1")
