"""The compose runtime: a plan seat rendered through its engine, and the seats' states read in
docker's words. Starting and stopping seats is exercised on the fleet twin's real dockerd."""

from __future__ import annotations

import re

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, running, runtime_of
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError

VLLM = {"name": "coder", "engine": "vllm", "port": 8012, "container": "vllm-coder",
        "gpus": ["GPU-a"], "health_path": "/health", "max_model_len": 32768,
        "kv_cache_memory_bytes": 4 * 1024 ** 3, "gpu_memory_utilization": 0.3,
        "launch": {"image": "vllm/vllm-openai:v0.33.0", "model": "/models/coder",
                   "served_model_names": ["coder"], "tensor_parallel_size": 1}}
ASR = {"name": "asr", "engine": "fixed", "port": 8190, "container": "asr", "gpus": ["GPU-b"],
       "health_path": "/health", "gpu_memory_utilization": None,
       "launch": {"image": "asr:1", "container_port": 8000, "command": ["serve", "--fast"]}}


class LabelledDocker:
    """What docker ps lists for the managed label."""

    def __init__(self, rows):
        self.rows = rows

    def labelled(self, label, fields):
        assert label == "io.llmfleet.seat" and fields == ["State", "Status"]
        return self.rows


def test_a_plan_seat_is_rendered_through_its_engine():
    files = compose.render(VLLM, "fv-ml1")
    assert sorted(files) == [".env", "compose.yaml"] and runtime_of(VLLM).NAME == compose.NAME
    assert "SEAT_KV_CACHE_MEMORY_BYTES='4294967296'" in files[".env"]
    assert '- "--kv-cache-memory-bytes"' in files["compose.yaml"] and 'ipc: "host"' in files["compose.yaml"]
    tenant = compose.render(ASR)["compose.yaml"]
    assert '"${SEAT_BIND:?}:${SEAT_PORT:?}:8000"' in tenant and '- "--fast"' in tenant and "ipc" not in tenant
    assert "SEAT_MODEL" not in compose.render(ASR)[".env"]


@pytest.mark.parametrize("change, message", [
    ({"launch": dict(VLLM["launch"], image="")}, "seat coder: launch.image: expected a non-empty string"),
    ({"gpus": ["GPU-a", "GPU-b"]}, "seat coder: gpus: expected one GPU per tensor-parallel rank (1)"),
    ({"gpu_memory_utilization": 1.5}, "seat coder: gpu_memory_utilization: expected a number in (0, 1]"),
    ({"name": "coder\n"}, "seat coder\n: name: expected lowercase letters"),
    ({"launch": None}, "seat coder: launch: expected the plan seat's launch inputs"),
])
def test_a_plan_seat_that_would_render_wrong_is_refused(change, message):
    with pytest.raises(RenderError) as caught:
        compose.render(dict(VLLM, **change))
    assert str(caught.value).startswith(message)


def test_states_say_what_docker_says():
    states = compose.states(LabelledDocker({
        "gamma": {"State": "running", "Status": "Up 5 seconds (health: starting)"},
        "beta": {"State": "running", "Status": "Up 2 minutes (healthy)"},
        "asr": {"State": "running", "Status": "Up 3 seconds"},
        "alpha": {"State": "exited", "Status": "Exited (1) 4 seconds ago"},
        "delta": {"State": "restarting", "Status": "Restarting (1) 1 second ago"}}))
    assert states == {"gamma": "running (health: starting)", "beta": "running (healthy)",
                      "asr": "running", "alpha": "exited: Exited (1) 4 seconds ago",
                      "delta": "restarting: Restarting (1) 1 second ago"}
    assert running(states) == ["asr", "beta", "delta", "gamma"], "as docker ps lists them"


@pytest.mark.parametrize("seat, replaced_by, message", [
    ("charrp-dense", "charrp-moe\nrestart: always", "replaced_by: expected a seat name, got 'charrp-moe\\nrestart: always'"),
    ("charrp-dense", "../etc", "replaced_by: expected a seat name, got '../etc'"),
    ("charrp-dense", 7, "replaced_by: expected a seat name, got 7"),
    ("Charrp Dense", "charrp-moe", "seat: expected a seat name, got 'Charrp Dense'"),
])
def test_the_file_laid_over_a_dormant_seat_takes_seat_names_alone(seat, replaced_by, message):
    with pytest.raises(RenderError, match="^" + re.escape(message) + "$"):
        compose.dormant_text(seat, replaced_by)


def test_the_file_laid_over_a_dormant_seat_stops_its_restarts_and_labels_it():
    text = compose.dormant_text("charrp-dense", "charrp-moe")
    assert text.split("\n", 2)[2] == ('services:\n  charrp-dense:\n    restart: "no"\n    labels:\n'
                                      '      io.llmfleet.dormant: "charrp-moe"\n')
    assert all(line.startswith("# ") for line in text.split("\n")[:2])


class DormantDocker:
    """What docker ps lists for the managed label with each container's dormant label."""

    def __init__(self, rows):
        self.rows = rows

    def labelled(self, label, fields, labels=()):
        assert (label, fields, labels) == ("io.llmfleet.seat", [], ["io.llmfleet.dormant"])
        return self.rows


def test_a_dormant_label_from_the_host_is_read_as_a_seat_name_or_as_none():
    rows = {"charrp-dense": {"io.llmfleet.dormant": "charrp-moe"},
            "old": {"io.llmfleet.dormant": "$(reboot)"},
            "running": {"io.llmfleet.dormant": ""}}
    assert compose.dormant(DormantDocker(rows)) == {"charrp-dense": "charrp-moe", "old": None}
