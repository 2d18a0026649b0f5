"""Which vLLM release a seat runs (its image tag, or its declared vllm_version) and which
modelled release's KV arithmetic plans it; refusals name the seat, the field and the version."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._engines import vllm
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import SeatSpecError, normalize_host
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import (
    LATEST,
    MODELLED,
    ReleaseError,
    image_version,
    modelled,
    parse_version,
    release_note,
    seat_release,
)

DIGEST = "sha256:" + "e" * 64
GPUS = [{"index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA H200", "memory_total_mib": 143771}]


def seat(**fields):
    raw = {"name": "chat", "engine": "vllm", "model": "Qwen/Qwen3-8B", "model_config": "config.json",
           "max_model_len": 32768, "image": "vllm/vllm-openai:v0.26.0", "port": 8000}
    raw.update(fields)
    return raw


def refusal(**fields):
    with pytest.raises(SeatSpecError) as refused:
        normalize_host("box", GPUS, [seat(**fields)])
    return str(refused.value)


@pytest.mark.parametrize("text, expected", [
    ("v0.26.0", (0, 26, 0)), ("0.26.0", (0, 26, 0)), ("0.26", (0, 26, 0)), ("v0.11.0-cu129", (0, 11, 0)),
    ("0.10.2rc1", (0, 10, 2)), ("0.33.0+cu130", (0, 33, 0)), ("latest", None), ("nightly", None),
    ("v0", None), ("", None), (None, None), (26, None)])
def test_versions_and_version_tags_are_read(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("image, expected", [
    ("vllm/vllm-openai:v0.26.0", (0, 26, 0)),
    ("registry.example:5000/team/vllm-openai:v0.30.0", (0, 30, 0)),
    ("vllm/vllm-openai:v0.26.0@" + DIGEST, (0, 26, 0)),
    ("vllm/vllm-openai@" + DIGEST, None), (DIGEST, None), ("registry:5000/vllm", None),
    ("vllm/vllm-openai:latest", None), ("vllm/vllm-openai:nightly-2026-11-30", None)])
def test_the_image_tag_names_the_version_or_nothing(image, expected):
    assert image_version(image) == expected


def test_every_minor_from_0_10_2_to_the_latest_is_modelled_by_one_of_its_own_releases():
    assert MODELLED["0.10"] == "0.10.2" and MODELLED["0.33"] == LATEST
    assert [int(minor.split(".")[1]) for minor in MODELLED] == list(range(10, 34))
    for minor, source in MODELLED.items():
        assert parse_version(source)[:2] == parse_version(minor)[:2]
    assert modelled("0.26.3") == {"version": "0.26.3", "release": "0.26.0", "nearest": False}


def test_a_seat_release_comes_from_its_tag_or_its_declared_version():
    assert seat_release("vllm/vllm-openai:v0.26.0") == {
        "version": "0.26.0", "release": "0.26.0", "nearest": False, "from": "image tag"}
    assert seat_release(DIGEST, "0.11.0") == {
        "version": "0.11.0", "release": "0.11.2", "nearest": False, "from": "vllm_version"}
    assert seat_release("vllm/vllm-openai:v0.26.0", "0.26.0")["from"] == "vllm_version"


@pytest.mark.parametrize("image, declared, nearest, field, words", [
    ("vllm/vllm-openai:v0.26.0", "0.30.0", False, "vllm_version", "the version the image tag names (0.26.0)"),
    (DIGEST, None, False, "vllm_version", "its tag names none: sha256:eeee"),
    ("vllm/vllm-openai:v0.9.2", None, False, "image", "earlier releases have no --kv-cache-memory-bytes"),
    ("vllm/vllm-openai:v0.10.1", None, True, "image", "vLLM 0.10.2 or later"),
    ("vllm/vllm-openai:v0.34.0", None, False, "image", "allow_nearest_vllm_release: true plans it with 0.33.0's"),
    (DIGEST, "soon", False, "vllm_version", "a vLLM version such as 0.26.0"),
])
def test_a_version_that_cannot_be_planned_is_refused_by_field(image, declared, nearest, field, words):
    with pytest.raises(ReleaseError) as refused:
        seat_release(image, declared, nearest)
    assert refused.value.field == field and words in str(refused.value)


def test_the_nearest_release_is_opted_into_and_said():
    newer = seat_release("vllm/vllm-openai:v0.34.1", allow_nearest=True)
    assert newer == {"version": "0.34.1", "release": "0.33.0", "nearest": True, "from": "image tag"}
    assert release_note(newer) == ("runs vLLM 0.34.1, planned with 0.33.0's KV arithmetic "
                                   "(the nearest modelled release)")
    unknown = seat_release("registry:5000/vllm:custom", allow_nearest=True)
    assert unknown["version"] is None and unknown["release"] == LATEST
    assert "version not known" in release_note(unknown)
    assert release_note(seat_release("vllm/vllm-openai:v0.26.0", allow_nearest=True)) is None


def test_the_inventory_refuses_in_one_line_naming_host_seat_and_field():
    assert "host box: seat chat: llmfleet_seats[0].vllm_version: expected the vLLM version the image runs" \
        in refusal(image=DIGEST)
    assert "llmfleet_seats[0].image: expected a vLLM release whose KV arithmetic is modelled" \
        in refusal(image="vllm/vllm-openai:v0.34.0")
    assert "vllm_version: expected a vLLM version such as 0.26.0 (quoted" in refusal(image=DIGEST, vllm_version=0.26)
    assert "allow_nearest_vllm_release: expected true or false" in refusal(allow_nearest_vllm_release="yes")
    spec = normalize_host("box", GPUS, [seat(image="vllm/vllm-openai:v0.34.0", allow_nearest_vllm_release=True)])
    assert spec["seats"][0]["vllm_release"]["release"] == "0.33.0"


def _gate(printed, release):
    boot = {"version": printed, "kv_cache_memory_bytes": None}
    plan_seat = {"name": "chat", "kv_cache_memory_bytes": 1, "kv_cache_tokens": 1, "max_concurrency": 1.0,
                 "vllm_release": release}
    return next(g for g in vllm.boot_log_gates(plan_seat, boot) if g["gate"] == "vllm_version")


def test_the_boot_logs_version_must_be_the_minor_the_plan_assumed():
    tagged = seat_release("vllm/vllm-openai:v0.26.0")
    assert _gate("0.26.1", tagged)["ok"]
    wrong = _gate("0.33.0", tagged)
    assert not wrong["ok"]
    assert "the boot log says vLLM 0.33.0; the plan used 0.26.0's KV arithmetic (its image tag says 0.26.0)" \
        in wrong["detail"] and "set the seat's vllm_version" in wrong["detail"]
    assert _gate(None, tagged)["ok"]
    unknown = seat_release("registry:5000/vllm:custom", allow_nearest=True)
    assert _gate("0.33.0", unknown)["ok"] and not _gate("0.26.0", unknown)["ok"]
