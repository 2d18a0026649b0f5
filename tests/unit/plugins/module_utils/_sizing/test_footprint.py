"""_footprint: weights from real safetensors files (index total, else the headers), overhead
measured at plateau or declared or defaulted, fixed tenants' caps, and the boot-gate util
exactly as vLLM's startup check computes it."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.footprint import (
    DEFAULT_OVERHEAD_MIB,
    MIN_OVERHEAD_MIB,
    FootprintError,
    boot_gate_utilization,
    checkpoint_bytes,
    measured_overhead_mib,
    fixed_footprint,
    vllm_footprint,
    weights_bytes_per_gpu,
)

MIB = 1024 * 1024


def write_safetensors(path, tensors):
    """A real safetensors file: {name: bytes of data} laid out back to back."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, size in tensors.items():
        header[name] = {"dtype": "BF16", "shape": [size // 2], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_weights_come_from_the_index_total_when_there_is_one(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16_386_789_376}, "weight_map": {}}))
    assert checkpoint_bytes(str(tmp_path)) == 16_386_789_376
    seat = {"name": "coder", "tensor_parallel_size": 2}
    assert weights_bytes_per_gpu(seat, str(tmp_path / "config.json")) == 8_193_394_688


def test_weights_come_from_the_safetensors_headers_not_the_file_sizes(tmp_path):
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a": 4096, "b": 1000})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"c": 2222})
    files_total = sum(p.stat().st_size for p in tmp_path.glob("*.safetensors"))
    assert checkpoint_bytes(str(tmp_path)) == 4096 + 1000 + 2222 < files_total
    # three ranks: every GPU holds at least its share (rounded up)
    assert weights_bytes_per_gpu({"name": "s", "tensor_parallel_size": 3},
                                 str(tmp_path / "config.json")) == math.ceil(7318 / 3)


def test_a_git_lfs_pointer_is_named_not_counted(tmp_path):
    (tmp_path / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 4548144832\n")
    with pytest.raises(FootprintError) as refused:
        weights_bytes_per_gpu({"name": "gen-small"}, str(tmp_path / "config.json"))
    assert str(refused.value).startswith("seat gen-small: weights_bytes: %s: not a safetensors "
                                         "file" % (tmp_path / "model.safetensors"))


def test_declared_weights_win_and_a_missing_checkpoint_is_one_clear_error(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", {"a": 10})
    config = str(tmp_path / "config.json")
    assert weights_bytes_per_gpu({"name": "s", "weights_bytes": 4548144832}, config) == 4548144832
    with pytest.raises(FootprintError) as refused:
        weights_bytes_per_gpu({"name": "voices"}, str(tmp_path / "empty" / "config.json"))
    assert "seat voices: weights_bytes: not declared" in str(refused.value)
    assert checkpoint_bytes(str(tmp_path / "nowhere")) is None


PLATEAU = {"gpus": [
    {"uuid": "GPU-0", "processes": [{"pid": 11, "used_mib": 30500, "compose_service": "coder"},
                                    {"pid": 12, "used_mib": 3700, "compose_service": "parakeet-nemo"}]},
    {"uuid": "GPU-1", "processes": [
        {"pid": 21, "used_mib": 30900, "compose_project": "coder", "compose_service": "coder"},
        {"pid": 22, "used_mib": 410, "compose_project": "coder", "compose_service": "coder"}]},
]}


def test_overhead_is_the_plateau_less_weights_and_kv_on_the_fullest_gpu():
    # coder holds 30,500 MiB on GPU-0 and 31,310 MiB on GPU-1 (two processes)
    assert measured_overhead_mib("coder", PLATEAU, 15000, 13000) == 31310 - 28000
    assert measured_overhead_mib("nobody", PLATEAU, 1, 1) is None
    assert measured_overhead_mib("coder", None, 1, 1) is None
    # a measurement below a CUDA context is not believed
    assert measured_overhead_mib("coder", PLATEAU, 20000, 11000) == MIN_OVERHEAD_MIB


def test_footprint_takes_declared_then_measured_then_default_overhead():
    seat = {"name": "coder", "engine": "vllm", "image": "vllm/vllm-openai:v0.33.0", "model": "m",
            "max_model_len": 65536}
    kv, weights = 13000 * MIB, 15000 * MIB
    ran = {"kv_cache_memory_bytes": kv, "image": seat["image"], "model": "m", "max_model_len": 65536}
    measured = vllm_footprint(seat, kv, weights, PLATEAU, ran)
    assert (measured["overhead_mib"], measured["overhead_source"]) == (3310, "measured at plateau")
    assert measured["footprint_mib"] == 15000 + 13000 + 3310
    # the KV the seat ran with at the plateau is what is subtracted, not the planned one: a
    # raised pin grows the footprint by exactly the difference
    rerun = vllm_footprint(seat, 20000 * MIB, weights, PLATEAU, ran)
    assert rerun["overhead_mib"] == 3310 and rerun["footprint_mib"] == 15000 + 20000 + 3310
    assert rerun["overhead_source"] == "measured at plateau (it ran with 13000 MiB of KV there)"
    unknown_kv = vllm_footprint(seat, kv, weights, PLATEAU)
    assert (unknown_kv["overhead_mib"], unknown_kv["overhead_source"]) == (DEFAULT_OVERHEAD_MIB, "default")
    declared = vllm_footprint(dict(seat, overhead_bytes=2560 * MIB), kv, weights, PLATEAU, ran)
    assert (declared["overhead_mib"], declared["overhead_source"]) == (2560, "declared")
    assert declared["boot_footprint_mib"] <= declared["footprint_mib"]


@pytest.mark.parametrize("field, value", [("image", "vllm/vllm-openai:v0.32.0"), ("model", "other"),
                                          ("max_model_len", 131072)])
def test_a_measurement_is_not_reused_for_another_launch(field, value):
    seat = {"name": "coder", "engine": "vllm", "image": "vllm/vllm-openai:v0.33.0", "model": "m",
            "max_model_len": 65536}
    ran = {"kv_cache_memory_bytes": 13000 * MIB, "image": seat["image"], "model": "m", "max_model_len": 65536}
    ran[field] = value
    footprint = vllm_footprint(seat, 13000 * MIB, 15000 * MIB, PLATEAU, ran)
    assert footprint["overhead_mib"] == DEFAULT_OVERHEAD_MIB
    assert footprint["overhead_source"] == "default: at the plateau it ran %s %s (the plan: %s)" % (
        field, value, seat[field])


def test_a_fixed_tenant_is_its_cap():
    parakeet = {"name": "parakeet-nemo", "engine": "fixed", "memory_cap_bytes": 3840 * MIB}
    footprint = fixed_footprint(parakeet)
    assert footprint["footprint_mib"] == footprint["boot_footprint_mib"] == 3840
    assert footprint["overhead_source"] == "fixed cap"


@settings(max_examples=500, deadline=None)
@given(total_mib=st.integers(8000, 200000), share=st.floats(0.01, 0.95), margin_mib=st.integers(0, 4096))
def test_boot_gate_util_is_the_smallest_step_vllm_accepts(total_mib, share, margin_mib):
    footprint_mib = int(total_mib * share)
    need = (footprint_mib + margin_mib) * MIB
    if need > total_mib * MIB:
        with pytest.raises(FootprintError):
            boot_gate_utilization(footprint_mib, margin_mib, total_mib)
        return
    util = boot_gate_utilization(footprint_mib, margin_mib, total_mib)
    hundredths = round(util * 100)
    assert util == hundredths / 100  # a 0.01 step, as the CLI would carry it
    # vLLM's request_memory: requested = ceil(total_memory * gpu_memory_utilization)
    assert math.ceil(total_mib * MIB * util) >= need
    if hundredths > 1:
        assert math.ceil(total_mib * MIB * ((hundredths - 1) / 100)) < need


def test_boot_gate_for_seed_001s_gen():
    # gen held 34,558 MiB at util 0.38 on a 97,887 MiB card (seed 001): that footprint needs
    # 0.37 with up to ~1.5 GiB of margin and 0.38, where it ended, with ~2 GiB
    assert boot_gate_utilization(34558, 1024, 97887) == 0.37
    assert boot_gate_utilization(34558, 1500, 97887) == 0.37
    assert boot_gate_utilization(34558, 2000, 97887) == 0.38


def test_a_safetensors_header_nested_deeper_than_the_cap_is_refused_not_a_recursion_error(tmp_path):
    header = b"[" * 100000 + b"]" * 100000
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(FootprintError, match=r"the safetensors header cannot be read"):
        checkpoint_bytes(str(tmp_path))


def test_an_index_that_is_not_an_object_falls_back_to_the_headers(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text("[]")
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    assert checkpoint_bytes(str(tmp_path)) == 4
