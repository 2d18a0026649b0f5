"""Malformed inventories, fat-fingered and hostile, through the real plan playbook: every one is
refused before any host is touched, with one line naming the host, the seat or variable, and
what was expected; nothing is written; no Python exception reaches the operator.

One ansible-playbook run plans every case as its own host. Every host's address is a listening
socket of this test: a task that contacted a host would connect to it. Adding an input class is
one row in CASES: (name, edit, the words the refusal must contain).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, run_ansible
from support.adhoc import play_tasks
from support.listener import Listener

pytestmark = pytest.mark.slow

MODELS = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair" / "models"
U0, U1 = "GPU-7a1c0001-0000-4000-8000-000000000001", "GPU-7a1c0001-0000-4000-8000-000000000002"
H100 = "NVIDIA H100 80GB HBM3"

BASE = {
    "llmfleet_gpu_profile": "h100",
    "llmfleet_gpus": [{"index": 0, "uuid": U0, "name": H100, "memory_total_mib": 81559},
                      {"index": 1, "uuid": U1, "name": H100, "memory_total_mib": 81559}],
    "llmfleet_seats": [
        {"name": "alpha", "engine": "vllm", "model": "/srv/models/qwen3-8b",
         "model_config": "models/qwen3-8b/config.json", "max_model_len": 32768,
         "image": "vllm/vllm-openai:v0.33.0", "port": 8101, "weights_bytes": 16381470720,
         "volumes": ["/srv/models:/srv/models:ro"]},
        {"name": "beta", "engine": "vllm", "model": "/srv/models/llama-3.1-8b-instruct",
         "model_config": "models/llama-3.1-8b-instruct/config.json", "max_model_len": 32768,
         "kv_cache_memory_bytes": "8GiB", "image": "vllm/vllm-openai:v0.33.0", "port": 8102,
         "weights_bytes": 16060522496},
        {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB",
         "image": "llmfleet/asr-seat:twin", "port": 8190, "container_port": 8000, "gpu": 0},
    ],
    "seat_plan_cards_source": "snapshot",
}
DELETE = object()
# A secret the cases carry: no refusal, and nothing the run prints, may show it.
TOKEN = "hf_corpusSECRET0123456789"


def seat(position, **fields):
    """An edit of seat ``position``'s fields (DELETE removes one)."""
    def edit(host_vars, files):
        for key, value in fields.items():
            if value is DELETE:
                host_vars["llmfleet_seats"][position].pop(key, None)
            else:
                host_vars["llmfleet_seats"][position][key] = value
    return edit


def gpu(position, **fields):
    def edit(host_vars, files):
        host_vars["llmfleet_gpus"][position].update(fields)
    return edit


def host(**variables):
    def edit(host_vars, files):
        host_vars.update(variables)
    return edit


def both(*edits):
    def edit(host_vars, files):
        for one in edits:
            one(host_vars, files)
    return edit


def unset(*variables):
    def edit(host_vars, files):
        for variable in variables:
            host_vars.pop(variable, None)
    return edit


def renamed(suffix):
    """The case's host named ``c<number>`` and ``suffix`` (its variables inline in hosts.yml)."""
    def edit(host_vars, files):
        pass
    edit.host_suffix = suffix
    return edit


def snapshot_doc(host_name, processes=None, total=81559):
    """A gpu_info snapshot of the base host: ``processes`` = {gpu index: [process, ...]}."""
    processes = processes or {}
    gpus = []
    for index, uuid in enumerate((U0, U1)):
        listed = processes.get(index, [])
        used = sum(p["used_mib"] for p in listed)
        gpus.append({"index": index, "uuid": uuid, "name": H100, "memory_total_mib": total,
                     "memory_used_mib": used, "memory_free_mib": total - used,
                     "memory_reserved_mib": 0, "processes": listed})
    return {"schema": "llmfleet.seats/gpu_snapshot", "schema_version": 1, "host": host_name,
            "taken_at": "2026-11-30T08:00:00Z", "source": "nvml", "gpus": gpus}


def process(pid, seat_name, used_mib, managed=True):
    entry = {"pid": pid, "used_mib": used_mib, "name": "VLLM::EngineCore", "container": "vllm-" + seat_name,
             "compose_project": seat_name, "compose_service": seat_name}
    if managed:
        entry["seat"] = seat_name
    return entry


def plateau(content):
    """The plateau snapshot as ``content(host)`` (a dict is written as JSON, bytes as they are)."""
    def edit(host_vars, files):
        files["plateau.json"] = content
        host_vars["llmfleet_plateau_snapshot"] = "{{ inventory_dir }}/files/{{ inventory_hostname }}/plateau.json"
    return edit


def cards(content):
    def edit(host_vars, files):
        files["cards.json"] = content
    return edit


BAD_NAMES = ["voices\n", "Voices", "-voices", "voi ces", "", "../etc", "a/b", "v\u00f6ices", "x\x00"]
PLAN_FLAGS = [["--max-model-len", "131072"], ["--kv-cache-memory-bytes=60G"], ["--kv_cache_memory_bytes", "1"],
              ["--gpu-memory-utilization=0.9"], ["--tensor-parallel-size", "2"], ["-tp", "2"],
              ["--port", "9000"], ["--served-model-name", "x"], ["--max-model", "1"],
              ["--kv-cache-memory", "1"], ["--tool-call-parser", "hermes"], ["--reasoning_parser=qwen3"],
              ["--max-num-seqs", "4"], ["--block-size=32"], ["--override-generation-config", "{}"],
              ["--pipeline-parallel-size", "2"], ["--data-parallel-size=2"],
              ["--num-gpu-blocks-override", "10"], ["--kv-cache-dtype", "fp8"],
              ["--enable-auto-tool-choice"], ["--default-chat-template-kwargs={}"], ["--model", "x"]]


def model_config(content):
    """Seat 0's model config as ``content`` (bytes), in the case's files."""
    def edit(host_vars, files):
        files["config.json"] = lambda name: content
        host_vars["llmfleet_seats"][0]["model_config"] = "{{ inventory_dir }}/files/{{ inventory_hostname }}/config.json"
    return edit


RADIANCE_PROFILE = json.loads((REPO_ROOT / "tests" / "integration" / "fleets" / "twin-radiance" / "models"
                               / "radiance-moe" / "radiance.json").read_text())
RADIANCE_SEAT = {"name": "moe", "engine": "radiance", "model": "/srv/models/radiance-moe",
                 "model_profile": "{{ inventory_dir }}/files/{{ inventory_hostname }}/profile.json",
                 "image": "llmfleet/radiance:1.8.1", "port": 8201, "gpu": [1], "max_num_seqs": 4,
                 "max_model_len": 65536, "host_pool_mib": 30720, "ttm_min_mib": 68000, "ttm_target_mib": 70000}


def radiance(profile=None, **fields):
    """The base host with a radiance seat on GPU 1 instead of beta (``profile``: its model
    profile, a dict or bytes; ``fields``: the seat's own)."""
    def edit(host_vars, files):
        files["profile.json"] = lambda name: RADIANCE_PROFILE if profile is None else profile
        host_vars["llmfleet_seats"][1] = dict(RADIANCE_SEAT, **fields)
    return edit


CASES = [
    # names: whole-string grammars, no control characters
    *[("seat name %r" % name, seat(0, name=name), "llmfleet_seats[0].name: expected lowercase letters")
      for name in BAD_NAMES],
    ("seat name a number", seat(0, name=12), "llmfleet_seats[0].name: expected lowercase"),
    ("seat name missing", seat(0, name=DELETE), "llmfleet_seats[0].name: expected lowercase"),
    ("two seats of one name", seat(1, name="alpha"),
     "name 'alpha' is used by seat alpha (llmfleet_seats[0]) and seat alpha (llmfleet_seats[1])"),
    # exposure: an address literal, docker network names, nothing a runtime could not render as meant
    *[("take_over %r" % (value,), seat(0, take_over=value), "seat alpha: llmfleet_seats[0].take_over: expected true "
       "or false (true: a container started outside the collection in the seat's place is stopped in the window")
      for value in ("yes", 1, None, ["chat-chat-1"])],
    ("bind address a host name", seat(0, bind_address="gateway.lan"),
     "seat alpha: llmfleet_seats[0].bind_address: expected an IPv4 or IPv6 address"),
    ("bind address in brackets", seat(0, bind_address="[::1]"), "llmfleet_seats[0].bind_address: expected"),
    ("bind address with a port", seat(0, bind_address="127.0.0.1:8101"), "llmfleet_seats[0].bind_address: expected"),
    ("bind address from the defaults", host(llmfleet_seat_defaults={"vllm": {"bind_address": "lan"}}),
     "(from llmfleet_seat_defaults.vllm.bind_address)"),
    ("networks a string", seat(0, networks="gateway"), "llmfleet_seats[0].networks: expected a list of network names"),
    ("network a shell line", seat(0, networks=["gw; rm -rf /"]), "llmfleet_seats[0].networks[0].name: expected a docker network name"),
    ("network host", seat(0, networks=["host"]), "llmfleet_seats[0].networks[0].name: expected a network to join"),
    ("network external a word", seat(0, networks=[{"name": "gateway", "external": "yes"}]),
     "llmfleet_seats[0].networks[0].external: expected true or false"),
    ("systemd seat's own network", seat(0, runtime="systemd", networks=[{"name": "own", "external": False}]),
     "llmfleet_seats[0].networks[0].external: expected true: a systemd seat joins networks that exist"),
    ("two seats on one port", seat(1, port=8101),
     "port 8101 is used by seat alpha (llmfleet_seats[0]) on 127.0.0.1:8101 and seat beta (llmfleet_seats[1]) "
     "on 127.0.0.1:8101"),
    ("two seats in one container", both(seat(0, container_name="c1"), seat(1, container_name="c1")),
     "container_name 'c1' is used by"),
    # host variables of the collection's prefixes: a typo is refused with the nearest name
    *[("host variable %s" % typo, host(**{typo: value}),
       "%s: unknown variable of llmfleet.seats (did you mean %s?)" % (typo, known))
      for typo, known, value in (("llmfleet_kv_facter", "llmfleet_kv_factor", 2),
                                 ("llmfleet_gpu_profle", "llmfleet_gpu_profile", "l40s"),
                                 ("seat_rebalance_health_timout", "seat_rebalance_health_timeout", 60),
                                 ("seat_plan_min_spare", "seat_plan_min_spare_mib", 1024))],
    ("a host variable nothing reads", host(llmfleet_team_owner="ml"),
     "llmfleet_team_owner: unknown variable of llmfleet.seats (no variable of llmfleet.seats has this name)"),
    ("a variable typo and a seat's problem, at once", both(host(llmfleet_kv_facter=2), seat(0, port=0)),
     "2 problem(s) in the inventory"),
    # a plan option's problem is named beside a seat's (port 0), not after the seat is mended
    ("a seat's problem and a plan option's, at once",
     both(seat(0, port=0), host(llmfleet_kv_round_to="half")), "llmfleet_kv_round_to: cannot read 'half'"),
    ("no llmfleet_gpus", unset("llmfleet_gpus"), "llmfleet_gpus: expected a non-empty list of GPUs"),
    ("no llmfleet_seats", unset("llmfleet_seats"), "llmfleet_seats: expected a list of seats, at least one"),
    ("llmfleet_seats empty", host(llmfleet_seats=[]), "llmfleet_seats: expected a list of seats, at least one"),
    # the host's name is written into every seat file: one grammar, refused in the plan
    *[("host name c<n>%r" % suffix, renamed(suffix), "inventory host name: expected a host name of letters, digits")
      for suffix in ("\nExecStartPre=/bin/touch /tmp/pwned", "\ninjected: {privileged: true}", "\r", " x", ";id",
                     "$(id)")],
    ("unknown engine", seat(0, engine="sglang"), "seat alpha: llmfleet_seats[0].engine: expected 'vllm' or 'fixed'"),
    ("engine missing", seat(0, engine=DELETE), "llmfleet_seats[0].engine: expected"),
    ("a typo in a field", seat(0, max_model_length=1024), "llmfleet_seats[0].max_model_length: expected a known field"),
    ("a fixed field on a vllm seat", seat(0, memory_cap_bytes="1GiB"), "llmfleet_seats[0].memory_cap_bytes: expected a known field"),
    *[("port %r" % value, seat(0, port=value), "llmfleet_seats[0].port: expected an integer from 1 to 65535")
      for value in (0, 70000, -1, "8101", True, 8101.5, None)],
    *[("image %r" % value, seat(0, image=value), "llmfleet_seats[0].image: expected an image reference")
      for value in ("", "vllm/vllm-openai:v0.33.0\n", "img; rm -rf /", "$(id)", 5, "a b", None)],
    *[("container_name %r" % value, seat(0, container_name=value), "llmfleet_seats[0].container_name: expected a container name")
      for value in ("a b", "x\n", "-x", "/x", 7)],
    # GPUs a seat names
    ("gpu not on the host", seat(0, gpu=7), "llmfleet_seats[0].gpu: expected a GPU index (0, 1) or UUID of this host, got 7"),
    ("gpu by an unknown UUID", seat(0, gpu="GPU-nope"), "llmfleet_seats[0].gpu: expected a GPU index (0, 1)"),
    ("gpu a boolean", seat(0, gpu=True), "llmfleet_seats[0].gpu: expected a GPU index"),
    ("current_gpu not on the host", seat(0, current_gpu=9), "llmfleet_seats[0].current_gpu: expected a GPU index"),
    ("avoid_gpus unknown", seat(0, avoid_gpus=["x"]), "llmfleet_seats[0].avoid_gpus: expected a GPU index"),
    ("a pin to a kept-clear GPU", both(gpu(1, keep_clear=True), seat(0, gpu=1)), "llmfleet_seats[0].gpu: expected a GPU that is not kept clear"),
    ("one GPU twice for TP", seat(0, tensor_parallel_size=2, gpu=[0, 0]), "llmfleet_seats[0].gpu: expected distinct GPUs"),
    ("TP 2 pinned to one GPU", seat(0, tensor_parallel_size=2, gpu=[0]), "expected 2 GPU(s), one per tensor-parallel rank"),
    *[("tensor_parallel_size %r" % value, seat(0, tensor_parallel_size=value), "llmfleet_seats[0].tensor_parallel_size: expected an integer from 1")
      for value in (0, -2, "2", 1.5)],
    ("TP wider than the host", seat(0, tensor_parallel_size=3), "host c"),
    # context and sizes
    *[("max_model_len %r" % value, seat(0, max_model_len=value), "llmfleet_seats[0].max_model_len: expected an integer from 1 to 16777216")
      for value in (0, -1, "32k", 1.5, None, True, "publish", 2 ** 24 + 1)],
    ("max_model_len above the model's", seat(0, max_model_len=10 ** 9), "seat alpha"),
    ("max_new_tokens above max_model_len", seat(0, max_new_tokens=65536), "llmfleet_seats[0].max_new_tokens: expected at most max_model_len (32768)"),
    ("max_new_tokens zero", seat(0, max_new_tokens=0), "llmfleet_seats[0].max_new_tokens: expected an integer from 1"),
    *[("kv_cache_memory_bytes %r" % value, seat(1, kv_cache_memory_bytes=value), "llmfleet_seats[1].kv_cache_memory_bytes")
      for value in ("8.5G", "-1GiB", "abc", "1e30", 1e30, float("inf"), float("nan"), "0", 0, "16B", True, "8 GiBs")],
    ("kv_cache_memory_bytes bare 3840", seat(1, kv_cache_memory_bytes=3840), "did you mean 3840MiB?"),
    ("kv_cache_memory_bytes bare '8192'", seat(1, kv_cache_memory_bytes="8192"), "did you mean 8192MiB?"),
    ("a pin and a factor", seat(1, kv_factor=1.1), "expected either a pinned budget or kv_factor, not both"),
    *[("kv_factor %r" % value, seat(0, kv_factor=value), "llmfleet_seats[0].kv_factor: expected a finite number > 0")
      for value in (0, -1, "x", float("inf"), float("nan"), True)],
    ("kv_sizing a word", seat(0, kv_sizing="measured"),
     "llmfleet_seats[0].kv_sizing: expected rule (the factor x max_model_len) or demand"),
    ("kv_sizing demand beside a factor", seat(0, kv_sizing="demand", kv_factor=2),
     "llmfleet_seats[0].kv_sizing: expected rule with a pinned budget or a kv_factor of its own"),
    *[("llmfleet_demand_factor %r" % value, host(llmfleet_demand_factor=value),
       "llmfleet_demand_factor: expected a finite number >= 1 and <= 1024")
      for value in (0.8, float("inf"), "lots")],
    *[("kv_cache_dtype %r" % value, seat(0, kv_cache_dtype=value), "llmfleet_seats[0].kv_cache_dtype: expected one of")
      for value in ("fp7", 8, "")],
    ("weights_bytes bare 16", seat(0, weights_bytes=16), "llmfleet_seats[0].weights_bytes: expected at least 1 MiB"),
    ("weights_bytes a word", seat(0, weights_bytes="lots"), "llmfleet_seats[0].weights_bytes: cannot read 'lots'"),
    ("overhead_bytes bare 100", seat(0, overhead_bytes=100), "did you mean 100MiB?"),
    ("a fixed cap bare 3840", seat(2, memory_cap_bytes=3840), "llmfleet_seats[2].memory_cap_bytes: expected at least 1 MiB"),
    ("a fixed cap missing", seat(2, memory_cap_bytes=DELETE), "llmfleet_seats[2].memory_cap_bytes: expected the tenant's fixed memory cap"),
    ("a fixed cap negative", seat(2, memory_cap_bytes="-1MiB"), "llmfleet_seats[2].memory_cap_bytes: cannot read '-1MiB'"),
    ("a fixed boot size bare", seat(2, memory_boot_bytes=10), "llmfleet_seats[2].memory_boot_bytes: expected at least 1 MiB"),
    *[("container_port %r" % value, seat(2, container_port=value), "llmfleet_seats[2].container_port: expected an integer from 1 to 65535")
      for value in (0, "x", 70000)],
    ("a seat too big for any GPU", seat(1, kv_cache_memory_bytes="200GiB"), "host c"),
    # what the seat serves
    *[("served_model_names %r" % (value,), seat(0, served_model_names=value), "llmfleet_seats[0].served_model_names: expected a list of model names")
      for value in ([], "alpha", ["a b"], ["x\n"], [1], [""])],
    *[("tool_call_parser %r" % value, seat(0, tool_call_parser=value), "llmfleet_seats[0].tool_call_parser: expected a vLLM parser name")
      for value in ("a b", "x;y", 5, "hermes\n")],
    ("reasoning_parser a number", seat(0, reasoning_parser=5), "llmfleet_seats[0].reasoning_parser: expected a vLLM parser name"),
    *[("default_chat_template_kwargs %r" % (value,), seat(0, default_chat_template_kwargs=value),
       "llmfleet_seats[0].default_chat_template_kwargs: expected a dict of plain values")
      for value in ("x", {"a": float("nan")}, [1])],
    *[("%s %r" % (field, value), seat(0, **{field: value}), "llmfleet_seats[0].%s: expected an integer from 1" % field)
      for field, value in (("max_num_seqs", 0), ("block_size", "16"), ("max_num_batched_tokens", -5))],
    # extra args cannot set what the plan owns, in any spelling
    *[("extra_args %s" % " ".join(args), seat(0, extra_args=args), "llmfleet_seats[0].extra_args: expected flags the plan does not set")
      for args in PLAN_FLAGS],
    *[("extra_args %r" % (value,), seat(0, extra_args=value), "llmfleet_seats[0].extra_args: expected a list of non-empty strings")
      for value in ("--enforce-eager", [1], ["--x\n"])],
    # health check: nothing reaches its code
    *[("health_path %r" % value, seat(0, health_path=value), "llmfleet_seats[0].health_path: expected a URL path such as /health")
      for value in ("health", "/health'); import os; os.system('id'); ('", "/h\n", "/a b", '/x"y', 5, "", "/x$(id)")],
    *[("health_interval %r" % value, seat(0, health_interval=value), "llmfleet_seats[0].health_interval: expected a docker duration")
      for value in ("15", "15 s", "15s\n", 15, "1d")],
    ("health_start_period a word", seat(0, health_start_period="soon"), "llmfleet_seats[0].health_start_period: expected a docker duration"),
    # environment: names, scalars, secrets
    ("environment a string", seat(0, environment="A=B"), "llmfleet_seats[0].environment: expected a dict of NAME: value"),
    *[("environment name %r" % name, seat(0, environment={name: "x"}), "llmfleet_seats[0].environment name: expected a variable name")
      for name in ("1A", "A-B", "SEAT_PORT", "A B", "A\n")],
    *[("environment value %r" % (value,), seat(0, environment={"X": value}),
       "llmfleet_seats[0].environment.X: expected a string, number or boolean on one line")
      for value in ({"nested": 1}, [1], None, "a\nb", float("nan"))],
    ("a secret with a quote", seat(0, secret_environment={"HF_TOKEN": "a'b"}),
     "secret_environment.HF_TOKEN: expected a string, number or boolean on one line without a single quote, got <secret>"),
    ("a token-named variable with a quote", seat(0, environment={"HF_TOKEN": "a'b"}),
     "environment.HF_TOKEN: expected a string, number or boolean on one line without a single quote, got <secret>"),
    ("secret_environment a list", seat(0, secret_environment=["HF_TOKEN"]),
     "llmfleet_seats[0].secret_environment: expected a dict of NAME: value, got <secret>"),
    ("a secret nested", seat(0, secret_environment={"T": {"a": 1}}), "secret_environment.T: expected a string, number or boolean"),
    ("one variable plain and secret", seat(0, environment={"T": "1"}, secret_environment={"T": "22222222"}),
     "expected one value (it is in environment and secret_environment)"),
    # Ansible hides a secret's value wherever it occurs: "2" would hide parts of the window's figures
    ("a secret too short to hide", seat(0, environment={"FAKE_TOKEN_DELAY": "2"}),
     "environment.FAKE_TOKEN_DELAY: expected a secret of at least 8 characters (a secret's value is hidden wherever"),
    ("a secret in a misspelt field", seat(0, secret_enviroment={"HF_TOKEN": TOKEN}), "secret_enviroment: expected a known field"),
    ("a token as an unknown field", seat(0, hf_token=TOKEN), "llmfleet_seats[0].hf_token: expected a known field for a vllm seat (typo?), got <secret>"),
    ("a token in seat defaults for an unknown engine", host(llmfleet_seat_defaults={"sglang": {"environment": {"HF_TOKEN": TOKEN}}}),
     "llmfleet_seat_defaults: expected {vllm:"),
    ("a token in a seat list that is a dict", host(llmfleet_seats={"alpha": {"secret_environment": {"HF_TOKEN": TOKEN}}}),
     "llmfleet_seats: expected a list of seats"),
    ("a token in a seat given as a list", host(llmfleet_seats=[[{"environment": {"API_KEY": TOKEN}}]]),
     "llmfleet_seats[0].entry: expected a dict describing a seat"),
    ("a token beside a bad name", both(seat(0, name="Alpha"), seat(0, environment={"HF_TOKEN": TOKEN, "X": {"a": 1}})),
     "llmfleet_seats[0].environment.X: expected a string"),
    # volumes and command
    *[("volumes %r" % (value,), seat(0, volumes=value), "llmfleet_seats[0].volumes: expected a list of volumes such as /srv/models:/models:ro")
      for value in ("x", ["/a"], ["/a:/b\n"], ["a b:/c"], [1], ["/a:b"])],
    *[("command %r" % (value,), seat(2, command=value), "llmfleet_seats[2].command: expected a list of non-empty strings")
      for value in ("cmd", [1], ["x\n"], [""])],
    # the host's GPUs
    ("no GPUs", host(llmfleet_gpus=[]), "llmfleet_gpus: expected a non-empty list of GPUs"),
    ("GPUs not a list", host(llmfleet_gpus="0,1"), "llmfleet_gpus: expected a non-empty list of GPUs"),
    ("a GPU not a dict", host(llmfleet_gpus=["GPU-0"]), "llmfleet_gpus[0].entry: expected a dict"),
    *[("GPU uuid %r" % value, gpu(1, uuid=value), "llmfleet_gpus[1].uuid: expected a GPU UUID")
      for value in ("nope", "GPU-x\n", 5, "GPU-a b")],
    *[("GPU index %r" % value, gpu(1, index=value), "llmfleet_gpus[1].index: expected an integer from 0 up")
      for value in (-1, "1", True)],
    ("two GPUs of one index", gpu(1, index=0), "llmfleet_gpus.index: expected a different index per GPU"),
    ("two GPUs of one UUID", gpu(1, uuid=U0), "llmfleet_gpus.uuid: expected a different uuid per GPU"),
    *[("GPU memory_total_mib %r" % value, gpu(0, memory_total_mib=value), "llmfleet_gpus[0].memory_total_mib: expected an integer from 1 to")
      for value in (0, "80GiB", 81559.5)],
    ("GPU keep_clear a word", gpu(0, keep_clear="yes"), "llmfleet_gpus[0].keep_clear: expected true or false"),
    ("GPU unknown field", gpu(0, memory=81559), "llmfleet_gpus[0].memory: expected one of"),
    # the seat list and its neighbours
    ("seats a string", host(llmfleet_seats="alpha"), "llmfleet_seats: expected a list of seats"),
    ("seats a dict", host(llmfleet_seats={"alpha": {}}), "llmfleet_seats: expected a list of seats"),
    ("a seat a string", host(llmfleet_seats=["alpha"]), "llmfleet_seats[0].entry: expected a dict describing a seat"),
    ("seat defaults a string", host(llmfleet_seat_defaults="x"), "llmfleet_seat_defaults: expected {vllm:"),
    ("seat defaults for an unknown engine", host(llmfleet_seat_defaults={"sglang": {}}), "llmfleet_seat_defaults: expected {vllm:"),
    ("seat defaults with a bad volume", host(llmfleet_seat_defaults={"vllm": {"volumes": ["x"]}}),
     "llmfleet_seats[1].volumes: expected a list of volumes such as /srv/models:/models:ro without control characters, "
     "got ['x'] (from llmfleet_seat_defaults.vllm.volumes)"),
    ("retire a string", host(llmfleet_retire="alpha"), "llmfleet_retire: expected a list of seat names"),
    ("retire a listed seat", host(llmfleet_retire=["alpha"]), "llmfleet_retire[0]: seat alpha is both listed in llmfleet_seats and to be retired"),
    ("retire a bad name", host(llmfleet_retire=["Old\n"]), "llmfleet_retire[0]: expected a seat name"),
    # the plan's own options
    ("min spare negative", host(seat_plan_min_spare_mib=-1), "seat_plan_min_spare_mib: expected an integer from 0 up"),
    ("boot margin negative", host(seat_plan_boot_margin_mib=-1), "seat_plan_boot_margin_mib: expected an integer from 0 up"),
    ("boot margin above a card", host(seat_plan_boot_margin_mib=100000), "seat_plan_boot_margin_mib: expected less than the smallest GPU (81559 MiB)"),
    ("kv factor zero", host(llmfleet_kv_factor=0), "llmfleet_kv_factor: expected a finite number > 0"),
    ("a secret under a misspelt field and a plain name", seat(0, secret_enviroment={"HF": TOKEN}),
     "llmfleet_seats[0].secret_enviroment: expected a known field for a vllm seat (typo?), got <secret>"),
    ("a token under a misspelt plain field", seat(0, enviroment={"HF": TOKEN}),
     "llmfleet_seats[0].enviroment: expected a known field for a vllm seat (typo?), got {'HF': '<secret>'}"),
    ("a token in a misspelt list field", seat(0, extra_env=[TOKEN]), "llmfleet_seats[0].extra_env: expected a known field"),
    ("an empty secret", seat(0, secret_environment={"HF_TOKEN": ""}),
     "llmfleet_seats[0].secret_environment.HF_TOKEN: expected a secret's value (it is empty"),
    ("an empty token-named variable", seat(0, environment={"HF_TOKEN": " "}), "environment.HF_TOKEN: expected a secret's value"),
    ("a value over 128 KiB", seat(0, environment={"PROMPT": "x" * (128 * 1024 + 1)}),
     "llmfleet_seats[0].environment.PROMPT: expected a value of at most 131072 bytes"),
    ("an extra arg over 128 KiB", seat(0, extra_args=["--chat-template", "x" * (128 * 1024 + 1)]),
     "llmfleet_seats[0].extra_args: expected items of at most 131072 bytes"),
    ("a command over 128 KiB", seat(2, command=["serve", "x" * (128 * 1024 + 1)]),
     "llmfleet_seats[2].command: expected items of at most 131072 bytes"),
    # a seat's API key: a secret the gates use, never on the command line
    *[("the API key as %s" % " ".join(args).replace(TOKEN, "KEY"), seat(0, extra_args=args),
       "llmfleet_seats[0].extra_args: expected no secret on the command line (--api-key)")
      for args in (["--api-key", TOKEN], ["--api-key=" + TOKEN], ["--api_key", TOKEN], ["--api-k", TOKEN])],
    ("a token flag on the command line", seat(0, extra_args=["--hf-token", TOKEN]), "expected no secret on the command line (--hf-token)"),
    *[("api_key %r" % (value,), seat(0, api_key=value), "llmfleet_seats[0].api_key: expected the seat's API key")
      for value in ("", "two " + TOKEN, TOKEN + "'", 5, {"vault": TOKEN})],
    ("an api_key too short to hide", seat(0, api_key="sk-1"),
     "llmfleet_seats[0].api_key: expected a secret of at least 8 characters"),
    ("api_key and VLLM_API_KEY both", seat(0, api_key=TOKEN, secret_environment={"VLLM_API_KEY": TOKEN}),
     "llmfleet_seats[0].secret_environment.VLLM_API_KEY: expected one value (it is in environment and secret_environment, "
     "or is the api_key's), got <secret>"),
    ("a cards snapshot reserving more than the card", cards(lambda name: dict(snapshot_doc(name), gpus=[
        dict(gpu, memory_reserved_mib=90000) for gpu in snapshot_doc(name)["gpus"]])),
     "gpus[0].memory_reserved_mib: expected at most the card's memory_total_mib (81559), got 90000"),
    *[("%s beyond its range" % field, seat(0, **{field: value}), "llmfleet_seats[0].%s: expected an integer from 1 to %d"
       % (field, bound))
      for field, value, bound in (("max_num_seqs", 10 ** 9, 65536), ("block_size", 10 ** 9, 65536),
                                  ("max_num_batched_tokens", 10 ** 12, 2 ** 24))],
    ("kv factor a word", host(llmfleet_kv_factor="lots"), "llmfleet_kv_factor: expected a finite number > 0 and <= 1024, got 'lots'"),
    ("api_key on a fixed seat", seat(2, api_key=TOKEN), "llmfleet_seats[2].api_key: expected a known field for a fixed seat (typo?), got <secret>"),
    # extra args that would override the plan through another door, or that vLLM refuses at boot
    *[("extra_args %s" % " ".join(args), seat(0, extra_args=args), "llmfleet_seats[0].extra_args: expected flags that cannot "
       "override the plan (%s" % flag)
      for args, flag in ((["--config", "/srv/vllm.yaml"], "--config"), (["--config=/srv/vllm.yaml"], "--config"),
                         (["--hf-overrides", '{"max_position_embeddings": 1048576}'], "--hf-overrides"),
                         (["--hf-overrides.max_position_embeddings", "1048576"], "--hf-overrides"),
                         (["--hf_overrides={}"], "--hf-overrides"), (["--generation-config", "/srv/gen"], "--generation-config"),
                         (["--generation", "vllm"], "--generation-config"), (["--hf-config-path", "/x"], "--hf-config-path"),
                         (["--speculative-config", "{}"], "--speculative-config"),
                         (["-dcp", "2"], "--decode-context-parallel-size"))],
    ("extra_args a dotted plan flag", seat(0, extra_args=["--max-model-len.x", "1"]), "expected flags the plan does not set (--max-model-len"),
    ("extra_args an uppercase flag", seat(0, extra_args=["--Max-Model-Len", "1"]),
     "llmfleet_seats[0].extra_args: expected a flag in lowercase words"),
    ("extra_args a long flag with one dash", seat(0, extra_args=["-max-model-len", "1"]),
     "llmfleet_seats[0].extra_args: expected a short flag such as -q, or --max-model-len with two dashes"),
    ("extra_args a typographic dash", seat(0, extra_args=["\u2014max-model-len", "1"]),
     "llmfleet_seats[0].extra_args: expected an argument starting with '--', or a value (a typographic dash"),
    ("extra_args a leading space", seat(0, extra_args=[" --enforce-eager"]), "expected an argument starting with '--', or a value"),
    # what the controller reads is bounded: a device, a huge or a deep file is refused by its bound
    ("a model config that is a device", seat(0, model_config="/dev/zero"), "/dev/zero: expected a regular file"),
    ("a model config of 17 MiB", model_config(b" " * (17 * 1024 * 1024)), "larger than 16 MiB, the most it reads"),
    ("a model config nested deep", model_config(b"[" * 100000 + b"]" * 100000), "nested deeper than 64 levels"),
    ("a plateau nested deep", plateau(lambda name: b'{"a": ' * 50000 + b"1" + b"}" * 50000), "nested deeper than 64 levels"),
    ("a plateau that is a device", host(llmfleet_plateau_snapshot="/dev/zero"), "expected a regular file"),
    ("a radiance host pool of 10**18 MiB", radiance(host_pool_mib=10 ** 18),
     "seat moe: llmfleet_seats[1].host_pool_mib: expected an integer from 1 to 67108864"),
    ("a radiance max_num_seqs of a million", radiance(max_num_seqs=10 ** 6), "llmfleet_seats[1].max_num_seqs: expected an integer from 1 to 65536"),
    ("a radiance plane given in bytes", radiance(profile=dict(RADIANCE_PROFILE, plane_mib=23 * 1024 ** 3)),
     "plane_mib: expected an integer from 0 to 67108864, got 24696061952"),
    ("a radiance profile that is a device", radiance(model_profile="/dev/zero"), "expected a regular file"),
    ("a radiance profile nested deep", radiance(profile=b"[" * 100000 + b"]" * 100000), "nested deeper than 64 levels"),
    ("a radiance ladder of a million rungs", radiance(host_pool_mib=1, target_tokens=10 ** 12,
                                                      profile=dict(RADIANCE_PROFILE, plane_mib=60 * 1024 ** 2)),
     "host_pool_mib: expected a pool within 4096 rungs of 1024 MiB of holding the plane"),
    ("kv factor above its range", host(llmfleet_kv_factor=10 ** 6), "llmfleet_kv_factor: expected a finite number > 0 and <= 1024"),
    ("kv factor nan", host(llmfleet_kv_factor=float("nan")), "llmfleet_kv_factor: expected a finite number"),
    ("a seat's kv_factor above its range", seat(0, kv_factor=1e300), "llmfleet_seats[0].kv_factor: expected a finite number > 0 and <= 1024"),
    ("kv factor infinite", host(llmfleet_kv_factor=float("inf")), "llmfleet_kv_factor"),
    ("kv rounding a word", host(llmfleet_kv_round_to="half"), "llmfleet_kv_round_to: cannot read 'half'"),
    ("kv rounding bare", host(llmfleet_kv_round_to=1), "llmfleet_kv_round_to: expected at least 1 MiB"),
    ("plateau_kv_planned", host(seat_plan_plateau_kv_planned=True), "seat_plan_plateau_kv_planned: a plateau's measurement is only reused"),
    ("accept a string", host(llmfleet_plan_accept="all"), "llmfleet_plan_accept: expected a dict with"),
    ("accept an unknown key", host(llmfleet_plan_accept={"everything": True}), "llmfleet_plan_accept: expected a dict with"),
    ("accept an unknown seat list as a string", host(llmfleet_plan_accept={"unknown_plateau_seats": "old"}),
     "llmfleet_plan_accept.unknown_plateau_seats: expected a list of seat names without control characters"),
    ("accept a bad seat name", host(llmfleet_plan_accept={"fixed_cap_below_plateau": ["Asr\n"]}),
     "llmfleet_plan_accept.fixed_cap_below_plateau: expected a list of seat names"),
    ("accept a host that is a number", host(llmfleet_plan_accept={"snapshot_host": 5}),
     "llmfleet_plan_accept.snapshot_host: expected a non-empty string"),
    ("plateau_ran an infinite context", host(llmfleet_plateau_ran={"alpha": {"max_model_len": float("inf")}}),
     "llmfleet_plateau_ran.alpha.max_model_len: expected an integer from 1 up"),
    ("plateau_ran an image with a newline", host(llmfleet_plateau_ran={"alpha": {"image": "vllm\n"}}),
     "llmfleet_plateau_ran.alpha.image: expected a non-empty string, on one line"),
    ("plateau_ran a string", host(llmfleet_plateau_ran={"alpha": "8GiB"}), "llmfleet_plateau_ran.alpha: expected {kv_cache_memory_bytes"),
    ("plateau_ran a bad size", host(llmfleet_plateau_ran={"alpha": {"kv_cache_memory_bytes": "abc"}}),
     "llmfleet_plateau_ran.alpha.kv_cache_memory_bytes: cannot read"),
    ("plateau_ran an unknown field", host(llmfleet_plateau_ran={"alpha": {"kv": 1}}), "llmfleet_plateau_ran.alpha: expected"),
    ("plateau_kv a bare size", host(seat_plan_plateau_kv={"alpha": 8}), "seat_plan_plateau_kv.alpha: expected at least 1 MiB"),
    # model configs
    ("model_config missing", seat(0, model_config="models/qwen3-8b/missing.json"), "seat alpha"),
    ("model_config a directory without a config", seat(0, model_config="models"), "seat alpha"),
    ("model_config not JSON", seat(0, model_config="models/../../../../../../etc/hostname"), "seat alpha"),
    ("model_config empty", seat(0, model_config=""), "llmfleet_seats[0].model_config: expected a non-empty string"),
    ("model with a quote", seat(0, model="/srv/models/it's"), "llmfleet_seats[0].model: expected a Hugging Face model id"),
    ("model with a newline", seat(0, model="Qwen/Qwen3-8B\n"), "llmfleet_seats[0].model: expected a Hugging Face model id"),
    # the cards and the snapshots must agree with the inventory
    ("memory_total_mib not the card's", both(gpu(0, memory_total_mib=48000), cards(snapshot_doc)),
     "llmfleet_gpus[0]: memory_total_mib is 48000 in the inventory but 81559 on the card"),
    ("a cards snapshot of another host", cards(lambda name: snapshot_doc("elsewhere")),
     "the reading of the cards: recorded on host elsewhere, not"),
    ("a plateau of another host", plateau(lambda name: snapshot_doc("elsewhere")),
     "the plateau snapshot: recorded on host elsewhere"),
    ("a plateau with a seat no longer listed", plateau(lambda name: snapshot_doc(name, {0: [process(101, "old-alpha", 30000)]})),
     "it shows seat old-alpha, which the inventory does not list"),
    ("a fixed tenant above its cap at plateau", plateau(lambda name: snapshot_doc(name, {0: [process(102, "asr", 5000, False)]})),
     "memory_cap_bytes is 3840 MiB but the plateau snapshot shows the seat holding 5000 MiB"),
    ("a plateau without the inventory's GPUs", plateau(lambda name: dict(snapshot_doc(name), gpus=[])),
     "the plateau snapshot has no GPU"),
    ("a truncated plateau", plateau(lambda name: json.dumps(snapshot_doc(name)).encode()[:200]), "llmfleet_plateau_snapshot: snapshot"),
    ("a plateau in UTF-16", plateau(lambda name: json.dumps(snapshot_doc(name)).encode("utf-16")), "written as UTF-16"),
    ("a binary plateau", plateau(lambda name: b"\x00\x01\x02\xff\xfe\x80" * 10), "llmfleet_plateau_snapshot: snapshot"),
    ("a plateau with NaN", plateau(lambda name: json.dumps(snapshot_doc(name)).replace('"memory_used_mib": 0', '"memory_used_mib": NaN', 1).encode()),
     "NaN is not a number a card reports"),
    ("a plateau that is a list", plateau(lambda name: b"[]"), "the document: expected a JSON object"),
    ("a plateau that is missing", host(llmfleet_plateau_snapshot="/nonexistent/plateau.json"),
     "llmfleet_plateau_snapshot: snapshot /nonexistent/plateau.json: cannot read it"),
    ("a plateau process with a bad args list", plateau(lambda name: snapshot_doc(name, {0: [dict(process(103, "alpha", 30000), args="--x")]})),
     "processes[0].args: expected a list of strings"),
    ("a cards snapshot that is missing", host(seat_plan_cards_snapshot="/nonexistent/cards.json"),
     "seat_plan_cards_snapshot: snapshot /nonexistent/cards.json: cannot read it"),
    # the vLLM release: it decides the KV arithmetic
    ("a digest naming no vLLM version", seat(0, image="vllm/vllm-openai@sha256:" + "a" * 64),
     "seat alpha: llmfleet_seats[0].vllm_version: expected the vLLM version the image runs (its tag names none"),
    ("a vLLM release not modelled", seat(0, image="vllm/vllm-openai:v0.34.0"),
     "llmfleet_seats[0].image: expected a vLLM release whose KV arithmetic is modelled"),
    ("a vLLM release without pinned KV", seat(0, image="vllm/vllm-openai:v0.9.2"),
     "expected vLLM 0.10.2 or later: earlier releases have no --kv-cache-memory-bytes"),
    ("a vllm_version the tag contradicts", seat(0, vllm_version="0.26.0"),
     "llmfleet_seats[0].vllm_version: expected the version the image tag names (0.33.0), or no vllm_version"),
    ("a vllm_version YAML read as a number", seat(0, image="sha256:" + "b" * 64, vllm_version=0.26),
     "vllm_version: expected a vLLM version such as 0.26.0 (quoted: YAML reads 0.26 as a number)"),
    ("allow_nearest_vllm_release a string", seat(0, allow_nearest_vllm_release="yes"),
     "llmfleet_seats[0].allow_nearest_vllm_release: expected true or false"),
    # image references matched whole against docker's grammar
    *[("image %s" % label, seat(0, image=image), "llmfleet_seats[0].image: expected an image reference [REGISTRY/]NAME[:TAG]")
      for label, image in (("an uppercase digest", "vllm/vllm-openai@sha256:" + "A" * 64),
                           ("a digest of 63 digits", "vllm/vllm-openai@sha256:" + "a" * 63),
                           ("an image ID of 65 digits", "sha256:" + "b" * 65),
                           ("two tags", "vllm/vllm-openai:v0.33.0:extra"),
                           ("an uppercase name", "vLLM/vllm-openai:v0.33.0"),
                           ("a tag of 129 characters", "vllm/vllm-openai:v" + "0" * 128))],
]


def _write_case(inventory: Path, name: str, edit, port: int) -> dict:
    """The case's files; its variables in host_vars/, or returned to be written inline when its
    name is not one a file may have."""
    host_vars = copy.deepcopy(BASE)
    files = {"cards.json": snapshot_doc}
    edit(host_vars, files)
    case_dir = inventory / "files" / name
    case_dir.mkdir(parents=True)
    for file_name, content in files.items():
        content = content(name)
        (case_dir / file_name).write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    host_vars.setdefault("seat_plan_cards_snapshot", str(case_dir / "cards.json"))
    host_vars.update({"ansible_host": "127.0.0.1", "ansible_port": port, "ansible_connection": "ssh",
                      "ansible_user": "nobody"})
    if not _PLAIN_NAME.match(name):
        return host_vars
    (inventory / "host_vars" / ("%s.yml" % name)).write_text(yaml.safe_dump(host_vars, sort_keys=False))
    return None


_PLAIN_NAME = re.compile(r"\Ac[0-9]{3}\Z")


def _first_failure(report: dict) -> dict:
    """host -> the message of its first failed or unreachable task."""
    failures = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for name, result in task["hosts"].items():
                if name in failures:
                    continue
                failed_items = [item for item in result.get("results") or [] if item.get("failed")]
                if result.get("unreachable"):
                    failures[name] = "UNREACHABLE: %s" % result.get("msg")
                elif failed_items:
                    failures[name] = failed_items[0].get("msg") or json.dumps(failed_items[0])
                elif result.get("failed"):
                    failures[name] = result.get("msg") or json.dumps(result)
    return failures


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    """(host of each case, output dir, listener, host -> refusal) after one plan run."""
    root = tmp_path_factory.mktemp("corpus")
    inventory, output = root / "inventory", root / "out"
    (inventory / "host_vars").mkdir(parents=True)
    shutil.copytree(MODELS, inventory / "models")
    listener = Listener()
    names, inline = {}, {}
    for number, (label, edit, _expected) in enumerate([("valid", host(), None)] + CASES):
        names[label] = "c%03d" % number + getattr(edit, "host_suffix", "")
        inline[names[label]] = _write_case(inventory, names[label], edit, listener.port)
    (inventory / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": inline}}))
    try:
        # the hosts file, not the folder: its models/ is not inventory (docs/inventory.md)
        proc = run_ansible(["ansible-playbook", "-i", str(inventory / "hosts.yml"), "playbooks/plan.yml", "-f", "8",
                            "-e", "llmfleet_report_dir=%s" % output],
                           extra_env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}, timeout=900)
    finally:
        listener.close()
    assert "Traceback" not in proc.stdout + proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr, "a secret reached the run's output"
    report = json.loads(proc.stdout)
    return {"names": names, "output": output, "listener": listener, "failures": _first_failure(report)}


def test_the_corpus_is_large_and_a_valid_host_plans(refusals):
    assert len(CASES) >= 150
    valid = refusals["names"]["valid"]
    assert valid not in refusals["failures"], refusals["failures"].get(valid)
    assert (refusals["output"] / ("%s-plan.json" % valid)).is_file(), "the harness can succeed"


def test_no_case_contacted_its_host(refusals):
    assert refusals["listener"].connections == 0


@pytest.mark.parametrize("label, expected", [(label, expected) for label, _edit, expected in CASES],
                         ids=[label for label, _edit, _expected in CASES])
def test_each_malformed_input_is_refused_naming_host_and_field(refusals, label, expected):
    name = refusals["names"][label]
    message = refusals["failures"].get(name)
    assert message is not None, "%s (%s) was accepted" % (label, name)
    assert "host %s" % (name if _PLAIN_NAME.match(name) else repr(name)) in message, message
    assert expected in message, message
    assert "Traceback" not in message and "unexpected" not in message, message
    assert not list(refusals["output"].glob("%s*" % name)), "a refused run wrote the plan of %s" % name


# -- the modules directly ------------------------------------------------------------------------
PLAN_SEAT = {"name": "alpha", "engine": "vllm", "port": 8101, "gpus": [U0], "container": "vllm-alpha",
             "health_path": "/health", "max_model_len": 32768, "kv_cache_memory_bytes": 4 * 1024 ** 3,
             "gpu_memory_utilization": 0.5,
             "launch": {"image": "vllm/vllm-openai:v0.33.0", "model": "/srv/models/qwen3-8b",
                        "served_model_names": ["alpha"], "environment": {}, "secret_environment": [],
                        "volumes": [], "command": [], "health_interval": "15s", "health_start_period": "20m"}}


def plan_seat(**changes):
    seat = copy.deepcopy(PLAN_SEAT)
    for key, value in changes.items():
        if key.startswith("launch."):
            seat["launch"][key[len("launch."):]] = value
        else:
            seat[key] = value
    return seat


# (name, module, its arguments ({dir} is the case's own directory), the words the failure must contain)
# A seat that plans with no file: the module cases that test another argument give the plan one.
TENANT = {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr:1", "port": 8190}
MODULE_CASES = [
    ("env_mode a YAML number", "seat_files", {"project_dir": "{dir}/p", "seat": PLAN_SEAT, "env_mode": 600, "validate": False},
     "env_mode: expected an octal mode as a quoted string"),
    ("compose_mode a word", "seat_files", {"project_dir": "{dir}/p", "seat": PLAN_SEAT, "compose_mode": "rw", "validate": False},
     "compose_mode: expected an octal mode"),
    ("backup_date with a newline", "seat_files", {"project_dir": "{dir}/p", "seat": PLAN_SEAT, "backup_date": "20261101\n"},
     "backup_date: expected YYYYMMDD"),
    ("backup_tag a path", "seat_files", {"project_dir": "{dir}/p", "seat": PLAN_SEAT, "backup_tag": "rebal/../x"},
     "backup_tag: expected letters"),
    ("project_dir a file", "seat_files", {"project_dir": "{dir}/a-file", "seat": PLAN_SEAT, "validate": False},
     "expected a directory above it, found a file"),
    (".env a directory", "seat_files", {"project_dir": "{dir}/env-dir", "seat": PLAN_SEAT, "validate": False},
     "expected a file, found a directory"),
    ("a health path as code", "seat_files", {"project_dir": "{dir}/p", "validate": False,
                                             "seat": plan_seat(health_path="/h'); import os; os.system('id'); ('")},
     "seat alpha: health_path: expected a URL path such as /health"),
    ("a secret without its value", "seat_files", {"project_dir": "{dir}/p", "validate": False,
                                                  "seat": plan_seat(**{"launch.secret_environment": ["HF_TOKEN"]})},
     "secret_environment.HF_TOKEN: expected its value (text) in the secrets given to the render, got none"),
    ("secret names not a list", "seat_files", {"project_dir": "{dir}/p", "validate": False,
                                               "seat": plan_seat(**{"launch.secret_environment": "HF_TOKEN"})},
     "launch.secret_environment: expected a list of variable names"),
    ("a secret with a newline", "seat_files", {"project_dir": "{dir}/p", "validate": False, "secrets": {"HF_TOKEN": "a\nb"},
                                               "seat": plan_seat(**{"launch.secret_environment": ["HF_TOKEN"]})},
     "SEAT_SECRET_HF_TOKEN: a variables file value cannot carry a single quote or a control character safely, got <secret>"),
    ("a secret that is not text", "seat_files", {"project_dir": "{dir}/p", "validate": False, "secrets": {"HF_TOKEN": 5},
                                                 "seat": plan_seat(**{"launch.secret_environment": ["HF_TOKEN"]})},
     "secret_environment.HF_TOKEN: expected its value (text) in the secrets given to the render, got a value of type int"),
    ("an unknown runtime", "seat_files", {"project_dir": "{dir}/p", "seat": plan_seat(runtime="podman")},
     "seat alpha: runtime: expected one of compose, systemd, got 'podman'"),
    ("a systemd seat in a directory not its own", "seat_files", {"project_dir": "{dir}/p",
                                                                 "seat": plan_seat(runtime="systemd")},
     "seat alpha: project directory: expected an absolute plain path (letters, digits, '.', '_', '-', '/') "
     "ending in the seat's name"),
    ("a model with a quote", "seat_files", {"project_dir": "{dir}/p", "validate": False,
                                            "seat": plan_seat(**{"launch.model": "it's"})},
     "SEAT_MODEL: a variables file value cannot carry a single quote"),
    ("restore a file outside the seat", "seat_files", {"project_dir": "{dir}/p", "state": "restored",
                                                       "restore": {".env": {"path": "{dir}/other/.env", "backup": None}}},
     "restore..env: expected {dir}/p/.env, one of the seat's files"),
    ("restore a file the runtime does not write", "seat_files", {"project_dir": "{dir}/p", "state": "restored",
                                                                 "restore": {"passwd": {"path": "{dir}/p/passwd", "created": True}}},
     "restore.passwd: expected {dir}/p/passwd, one of the seat's files (.env, compose.yaml)"),
    ("restore from a backup elsewhere", "seat_files", {"project_dir": "{dir}/p", "state": "restored",
                                                       "restore": {".env": {"path": "{dir}/p/.env", "backup": "/etc/hostname"}}},
     "restore..env: backup: expected {dir}/p/.env.bak-YYYYMMDD-<tag> beside it"),
    ("restore an entry that is a string", "seat_files", {"project_dir": "{dir}/p", "state": "restored",
                                                         "restore": {".env": "x"}},
     "restore..env: expected {dir}/p/.env"),
    ("a plan seat without launch", "seat_files",
     {"project_dir": "{dir}/p", "seat": {"name": "alpha", "engine": "vllm", "port": 8101, "gpus": [U0]}},
     "seat alpha: launch: expected the plan seat's launch inputs"),
    ("seats a name that climbs out of the root", "seat_files",
     {"root": "{dir}", "seats": [plan_seat(name="../etc")], "validate": False},
     "seats[0].name: expected a seat name (lowercase letters"),
    ("seats twice the same seat", "seat_files", {"root": "{dir}", "seats": [PLAN_SEAT, PLAN_SEAT], "validate": False},
     "seats[1].name: expected a seat name (lowercase letters, digits, '-' or '_', starting with a letter or "
     "digit) no other seat has, got 'alpha'"),
    ("seats with one seat's secrets", "seat_files", {"root": "{dir}", "seats": [PLAN_SEAT], "secrets": {"HF_TOKEN": "hf_0123"}},
     "secrets: with seats, expected {seat: {NAME: value}}"),
    ("seats under a root that is a file", "seat_files", {"root": "{dir}/a-file", "seats": [PLAN_SEAT], "validate": False},
     "{dir}/a-file/alpha: expected a directory above it, found a file"),
    ("seats with a secret carrying a newline", "seat_files",
     {"root": "{dir}", "validate": False, "secrets": {"alpha": {"HF_TOKEN": "hf_a\nb"}},
      "seats": [plan_seat(**{"launch.secret_environment": ["HF_TOKEN"]})]},
     "SEAT_SECRET_HF_TOKEN: a variables file value cannot carry a single quote or a control character safely, got <secret>"),
    ("seats restored", "seat_files", {"root": "{dir}", "seats": [PLAN_SEAT], "state": "restored", "restore": {}},
     "state is restored but all of the following are missing: project_dir"),
    ("seats and seat", "seat_files", {"root": "{dir}", "project_dir": "{dir}/p", "seats": [PLAN_SEAT], "seat": PLAN_SEAT},
     "parameters are mutually exclusive: seat|seats"),
    ("seat_plan with a plateau of strings", "seat_plan", {"host": "h", "gpus": BASE["llmfleet_gpus"], "seats": [TENANT],
                                                          "plateau": {"gpus": "x"}},
     "host h: plateau: expected a gpu_info result with a gpus list"),
    ("seat_plan with cards missing memory", "seat_plan", {"host": "h", "gpus": BASE["llmfleet_gpus"], "seats": [TENANT],
                                                          "cards": {"gpus": [{"uuid": U0}]}},
     "host h: cards: gpus[0].memory_total_mib: expected a whole number >= 0, got None"),
    ("seat_plan with accept a list", "seat_plan", {"host": "h", "gpus": BASE["llmfleet_gpus"], "seats": [TENANT],
                                                   "accept": ["all"]},
     "llmfleet_plan_accept: expected a dict with"),
    ("seat_sizing with seats of strings", "seat_sizing", {"host": "h", "gpus": BASE["llmfleet_gpus"], "seats": [{"name": "x\n"}]},
     "llmfleet_seats[0].name: expected lowercase"),
    ("gpu_info a directory as snapshot", "gpu_info", {"source": "snapshot", "snapshot_path": "{dir}"},
     "snapshot {dir}: cannot read it"),
    ("kv_budget a word for the context", "kv_budget", {"model_config_path": str(MODELS / "qwen3-8b" / "config.json"),
                                                       "max_model_len": "long"}, "max_model_len"),
    ("kv_budget a missing config", "kv_budget", {"model_config_path": "{dir}/none.json", "max_model_len": 1024}, "{dir}/none.json"),
    ("rebalance_lock a journal of strings", "rebalance_lock", {"path": "{dir}/lock", "run_id": "r1", "state": "journaled",
                                                               "journal": {"files": "x"}}, "lock"),
    ("seat_gates seats without names", "seat_gates", {"phase": "after_boot", "seats": [{"port": 1}]},
     "seats/cards/plan_gpus: expected seat_plan and gpu_info results, missing or malformed 'container'"),
    ("rebalance_report a section of strings", "rebalance_report", {"report_dir": "{dir}/r", "run_id": "r1", "host": "h",
                                                                   "section": {"status": 5}}, "section"),
    ("seat_placement a negative capacity", "seat_placement", {"gpus": [{"id": "a", "capacity_mib": -5}],
                                                              "seats": [{"name": "s", "need_mib": 1}]}, "capacity"),
    ("gateway_routes a missing config", "gateway_routes", {"path": "{dir}/none.yaml",
                                                           "seats": [{"name": "s", "host": "h", "port": 1}]}, "{dir}/none.yaml"),
    ("gateway_load no routes", "gateway_load",
     {"url": "http://127.0.0.1:9", "routes": [], "stop_file": "{dir}/stop"}, "routes: expected a non-empty list"),
    ("seat_demand a window in words", "seat_demand",
     {"prometheus_url": "http://127.0.0.1:9", "seats": [{"name": "s"}], "window": "a week"},
     "window: expected a duration such as 90s"),
    ("gateway_load an endless stream", "gateway_load",
     {"url": "http://127.0.0.1:9", "routes": ["r"], "stop_file": "{dir}/stop", "max_seconds": "inf"},
     "max_seconds: expected a finite number of seconds > 0, got inf"),
    ("seat_demand a window ending at nan", "seat_demand",
     {"prometheus_url": "http://127.0.0.1:9", "seats": [{"name": "s"}], "at": "nan"},
     "at: expected a time in Unix seconds (a finite number > 0), got nan"),
    ("seat_drain a seat without a port", "seat_drain", {"seats": [{"name": "s", "engine": "vllm"}]},
     "seat s: port: expected a TCP port (1-65535), got None"),
    ("seat_drain an endless wait", "seat_drain", {"seats": [{"name": "s", "engine": "vllm", "port": 9}],
                                                  "timeout": "inf"},
     "timeout: expected a finite number of seconds >= 0 (0: stop at once), got inf"),
    ("vllm_boot_info a budget that is a word", "vllm_boot_info", {"log": "", "expected_kv_cache_memory_bytes": "lots"},
     "expected_kv_cache_memory_bytes"),
]


@pytest.fixture(scope="module")
def module_refusals(tmp_path_factory):
    root = tmp_path_factory.mktemp("modules")
    tasks = []
    for number, (label, module, args, _expected) in enumerate(MODULE_CASES):
        case_dir = root / ("m%03d" % number)
        (case_dir / "env-dir" / ".env").mkdir(parents=True)
        (case_dir / "a-file").write_text("not a directory\n")
        text = json.dumps(args).replace("{dir}", str(case_dir))
        tasks.append({"name": label, "llmfleet.seats.%s" % module: json.loads(text),
                      "register": "case_%03d" % number, "ignore_errors": True})
    proc, results = play_tasks(tasks, root, "-i", "localhost,", "-c", "local", timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr
    return root, results


@pytest.mark.parametrize("label, expected", [(label, expected) for label, _m, _a, expected in MODULE_CASES],
                         ids=[label for label, _m, _a, _e in MODULE_CASES])
def test_each_module_refuses_a_malformed_argument_in_one_line(module_refusals, label, expected):
    root, results = module_refusals
    number = [case[0] for case in MODULE_CASES].index(label)
    result = results[label]
    message = result.get("msg") or ""
    assert result.get("failed"), "%s was accepted: %s" % (label, json.dumps(result)[:500])
    case_dir = root / ("m%03d" % number)
    assert expected.replace("{dir}", str(case_dir)) in message, message
    assert "unexpected" not in message and "Traceback" not in message, message
    written = sorted(str(path.relative_to(case_dir)) for path in case_dir.rglob("*"))
    assert written == ["a-file", "env-dir", "env-dir/.env"], "a refused call wrote %s" % written
