"""A server's command line read back as its argparse reads it: the last occurrence of a flag
wins, ``--flag=value`` and ``--flag value`` are one flag, a flag followed by a flag has no value,
and every engine reads its flags this one way."""

from __future__ import annotations

import argparse

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._engines import radiance, vllm
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.argv import flag_value, split_flags
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import adopted_fields, running_numbers


@pytest.mark.parametrize("args, value", [
    (["m", "--max-model-len", "4096"], "4096"),
    (["m", "--max-model-len=4096"], "4096"),
    (["m", "--max-model-len", "4096", "--max-model-len", "8192"], "8192"),
    (["m", "--max-model-len=4096", "--max-model-len", "8192"], "8192"),
    (["m", "--max-model-len", "4096", "--max-model-len=8192"], "8192"),
    (["m", "--max-model-len=a=b"], "a=b"),
    (["m", "--max-model-len", "-1"], "-1"),            # a negative number is a value
    (["m", "--max-model-len", "--enforce-eager"], None),
    (["m", "--max-model-len"], None),
    (["m", "--max-model-len", "4096", "--max-model-len"], None),   # the last one has none
    (["m", "--", "--max-model-len", "4096"], None),    # positional after --
    (["m", "--max-model-len-x", "4096"], None),        # spelled exactly
    (["m"], None),
])
def test_flag_value_keeps_the_last_occurrence(args, value):
    assert flag_value(args, "--max-model-len") == value


@pytest.mark.parametrize("args", [
    ["--max-model-len", "4096", "--max-model-len", "8192"],
    ["--max-model-len=4096", "--max-model-len", "8192"],
    ["--max-model-len", "-1"],
    ["--max-model-len", "4096", "--enforce-eager", "--max-model-len=16"],
])
def test_flag_value_is_what_argparse_stores(args):
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-model-len")
    parser.add_argument("--enforce-eager", action="store_true")
    assert flag_value(args, "--max-model-len") == parser.parse_args(args).max_model_len


def test_split_flags_keeps_every_occurrence_in_order():
    pairs, positionals = split_flags(["serve", "m", "--a", "1", "--b", "--a=2", "-", "--c", "x", "y", "--", "--d"])
    assert pairs == [("--a", ["1"]), ("--b", []), ("--a", ["2"]), ("--c", ["x"])]
    assert positionals == ["serve", "m", "-", "y", "--d"]


def test_a_flag_that_takes_several_values_takes_them_up_to_the_next_flag():
    pairs, positionals = split_flags(["--names", "a", "b", "--x", "1", "c"], many=lambda flag: flag == "--names")
    assert pairs == [("--names", ["a", "b"]), ("--x", ["1"])] and positionals == ["c"]


def test_vllm_reads_its_own_flags_the_one_way():
    process = {"image": "vllm/vllm-openai:v0.33.0",
               "args": ["m", "--max-model-len=4096", "--kv-cache-memory-bytes", "1024",
                        "--max-model-len", "8192"]}
    assert vllm.ran(process) == {"image": "vllm/vllm-openai:v0.33.0", "model": "m", "max_model_len": 8192,
                                 "kv_cache_memory_bytes": 1024}
    numbers = running_numbers(["vllm", "serve", "m", "--max-model-len", "4096", "--max-model-len=8k"])
    assert numbers["max_model_len"] == 8000
    fields, _port, _util, _notes = adopted_fields(["vllm", "serve", "m", "--max-model-len=4096", "--max-model-len",
                                                   "8192", "--served-model-name", "a", "b"])
    assert fields["max_model_len"] == 8192 and fields["served_model_names"] == ["a", "b"]


def test_radiance_reads_its_own_flags_the_one_way():
    args = ["--max-num-seqs", "4", "--max-model-len=8192", "--gpu-headroom-mib", "512", "--host-pool-mib=0",
            "--prefix-cache-mib", "0", "--placement", "spread", "--checkpoint-slots", "8", "--max-num-seqs=6"]
    record = radiance.ran({"image": "radiance:1.8.1", "args": args})
    assert record["max_num_seqs"] == 6 and record["max_model_len"] == 8192 and record["placement"] == "spread"
    assert radiance.ran({"image": "radiance:1.8.1", "args": args[:-1] + ["--max-num-seqs"]}) is None
