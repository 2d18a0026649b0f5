"""Size strings as operators write them and as vLLM's human_readable_int parses them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import (
    GIB,
    MIB,
    SizeError,
    bytes_to_mib,
    human_bytes,
    human_readable_int,
    round_up,
    to_bytes,
)

# The twin's vLLM stand-in parses its flags as vLLM does (utils/argparse_utils.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "twin" / "seat"))
from fakevllm.cli import human_readable_int as stand_in_human_readable_int  # noqa: E402


@pytest.mark.parametrize("text, expected", [
    ("22GiB", 22 * GIB),
    ("5.5GiB", 5905580032),
    ("512MiB", 512 * MIB),
    ("0.5GiB", GIB // 2),
    ("3840MiB", 3840 * MIB),
    ("8G", 8 * GIB),            # vLLM: uppercase is binary
    ("8g", 8_000_000_000),      # vLLM: lowercase is decimal
    ("8.5g", 8_500_000_000),
    ("8GB", 8_000_000_000),
    ("8589934592", 8589934592),
    (" 1 KiB ", 1024),
    (10388766720, 10388766720),
    (2.0, 2),
])
def test_to_bytes_reads(text, expected):
    assert to_bytes(text) == expected


@pytest.mark.parametrize("value, message", [
    ("8.5G", "mixes decimals with the binary suffix G"),
    ("1.5", "fraction of a byte"),
    ("8 parsecs", "unknown unit 'parsecs'"),
    ("GiB", "cannot read 'GiB' as a size"),
    (-1, "non-negative byte count"),
    (1.5, "whole, non-negative byte count"),
    (True, "got a boolean"),
    ([8], "got list"),
])
def test_to_bytes_errors_name_the_value(value, message):
    with pytest.raises(SizeError) as error:
        to_bytes(value, "kv_cache_memory_bytes")
    assert str(error.value).startswith("kv_cache_memory_bytes: ")
    assert message in str(error.value)


@pytest.mark.parametrize("num_bytes, kwargs, expected", [
    (22 * GIB, {}, "22 GiB"),
    (5905580032, {}, "5.5 GiB"),
    (512 * MIB, {}, "512 MiB"),
    (0, {}, "0 B"),
    (3840 * MIB, {"unit": "GiB"}, "3.75 GiB"),
    (GIB // 3, {"precision": 4}, "341.3333 MiB"),
    ("8G", {}, "8 GiB"),
])
def test_human_bytes(num_bytes, kwargs, expected):
    assert human_bytes(num_bytes, **kwargs) == expected


def test_human_bytes_rejects_unknown_units():
    with pytest.raises(SizeError, match="unit: expected one of TiB, GiB, MiB, KiB, B"):
        human_bytes(1, unit="GB")


def test_round_up_and_mib():
    assert round_up(7549747200, GIB // 2) == 8053063680
    assert round_up(GIB, GIB // 2) == GIB
    assert bytes_to_mib(MIB + 1) == 2 and bytes_to_mib(MIB) == 1
    with pytest.raises(SizeError, match="the multiple must be positive"):
        round_up(1, 0)


@given(st.integers(0, 2 ** 50))
def test_human_bytes_round_trips_through_to_bytes_within_its_precision(num_bytes):
    text = human_bytes(num_bytes, precision=6).replace(" ", "")
    assert abs(to_bytes(text) - num_bytes) <= max(1, num_bytes // 10 ** 5)


@pytest.mark.parametrize("text, number", [
    ("32k", 32000), ("32K", 32768), ("8G", 8 * GIB), ("8.5g", 8500000000), ("25.6k", 25600),
    ("1.001k", 1000),           # float arithmetic, as vLLM's int(float(number) * 1000)
    (" 4096 ", 4096), ("1_000", 1000),
    ("8.5G", None),             # vLLM: no decimals with a binary suffix
    ("8GiB", None), ("8 G", None), ("", None), ("auto", None),
    ("-1", None),               # vLLM takes it; no count read back is negative
    ("1" * 400 + "k", None),    # vLLM overflows
])
def test_human_readable_int_reads_as_vllm_does(text, number):
    assert human_readable_int(text) == number


def _stand_in(text):
    try:
        number = stand_in_human_readable_int(text)
    except (ValueError, argparse.ArgumentTypeError):
        return None
    return number if number >= 0 else None


@given(st.from_regex(r"\A-?[0-9]{1,6}(\.[0-9]{1,4})?[kKmMgGtTx]?\Z", fullmatch=True))
def test_human_readable_int_equals_the_vllm_stand_in(text):
    assert human_readable_int(text) == _stand_in(text)
