"""What a vLLM container started outside the collection runs now, for the plan's "now" columns:
numbers from an allow-list of its flags and from its boot log's KV lines, each in a plausible
range, and nothing else of either (a command line carries secrets and text Ansible would
template)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.attribution import Containers, attribute_processes
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker, DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import (
    RUNNING_LOG_BYTES,
    checked_running,
    container_running,
    running_numbers,
)

UTIL_BOOT = "\n".join([
    "INFO 12-03 10:00:00 [__init__.py:1] vLLM API server version 0.33.0",
    "INFO 12-03 10:00:20 [gpu_worker.py:1] Available KV cache memory: 20.37 GiB",
    "INFO 12-03 10:00:21 [kv_cache_utils.py:1] GPU KV cache size: 131,072 tokens",
    "INFO 12-03 10:00:21 [kv_cache_utils.py:2] Maximum concurrency for 8,192 tokens per request: 16.00x",
    "INFO:     Application startup complete.",
]) + "\n"
PINNED_BOOT = "\n".join([
    "INFO 12-03 10:00:00 [__init__.py:1] vLLM API server version 0.33.0",
    "INFO 12-03 10:00:20 [gpu_worker.py:1] Initial free memory 75.00 GiB, reserved 4.0 GiB memory for KV Cache "
    "as specified by kv_cache_memory_bytes config and skipped memory profiling.",
    "INFO 12-03 10:00:21 [kv_cache_utils.py:1] GPU KV cache size: 29,120 tokens",
    "INFO 12-03 10:00:21 [kv_cache_utils.py:2] Maximum concurrency for 16,384 tokens per request: 1.78x",
]) + "\n"
TOKEN = "hf_runningSECRET0123456789"


def test_a_util_sized_server_shows_its_flags_and_what_its_boot_printed():
    args = ["vllm", "serve", "/srv/models/qwen3-8b", "--max-model-len", "8192", "--gpu-memory-utilization", "0.35",
            "--max-num-seqs=64", "-tp", "1", "--kv-cache-dtype", "fp8"]
    assert running_numbers(args, UTIL_BOOT) == {
        "max_model_len": 8192, "gpu_memory_utilization": 0.35, "max_num_seqs": 64, "tensor_parallel_size": 1,
        "kv_cache_dtype": "fp8", "kv_cache_memory_bytes": round(20.37 * 2 ** 30), "kv_cache_tokens": 131072,
        "max_concurrency": 16.0}


def test_a_pinned_server_keeps_its_exact_bytes_from_the_flag():
    args = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--max-model-len", "16384",
            "--kv-cache-memory-bytes", "4G"]
    assert running_numbers(args, PINNED_BOOT) == {"max_model_len": 16384, "kv_cache_memory_bytes": 4 * 2 ** 30,
                                                  "kv_cache_tokens": 29120, "max_concurrency": 1.78}
    assert running_numbers(args) == {"max_model_len": 16384, "kv_cache_memory_bytes": 4 * 2 ** 30}, \
        "without its log, the command line's numbers"


def test_a_hostile_command_line_and_log_give_numbers_and_nothing_else():
    args = ["vllm", "serve", "{{ lookup('pipe', 'id') }}", "--api-key", TOKEN, "--hf-token=" + TOKEN,
            "--max-model-len", "{{ 8192 }}", "--gpu-memory-utilization", "1.5", "--max-num-seqs", "-3",
            "--tensor-parallel-size", "9999", "--kv-cache-dtype", "{{ x }}", "--kv-cache-memory-bytes", "9" * 40,
            "--served-model-name", TOKEN, "--override-generation-config", '{"a": "{{ b }}"}']
    log = ("HF_TOKEN=%s\n{{ lookup('env', 'HOME') }}\n"
           "INFO 12-03 10:00:21 [kv_cache_utils.py:1] GPU KV cache size: 99,999,999,999,999,999 tokens\n"
           "INFO 12-03 10:00:21 [kv_cache_utils.py:2] Maximum concurrency for 8,192 tokens per request: 1e400x\n"
           % TOKEN)
    numbers = running_numbers(args, log)
    assert numbers == {"max_model_len": 8192}, "only the plausible number the log printed"
    shown = json.dumps(numbers)
    assert TOKEN not in shown and "{{" not in shown and "lookup" not in shown


@pytest.mark.parametrize("args", [
    ["python3", "server.py", "--max-model-len", "8192"],
    [],
    ["vllm", "serve", 5],
    "vllm serve /m --max-model-len 8192",
])
def test_what_does_not_run_vllms_server_gives_nothing(args):
    assert running_numbers(args, UTIL_BOOT) == {}


def test_only_the_head_of_a_long_log_is_read():
    late = "x" * RUNNING_LOG_BYTES + "\n" + UTIL_BOOT
    assert running_numbers(["vllm", "serve", "/m"], late) == {}
    assert running_numbers(["vllm", "serve", "/m"], UTIL_BOOT + "y" * RUNNING_LOG_BYTES)["kv_cache_tokens"] == 131072


@pytest.mark.parametrize("record, expected", [
    ({"max_model_len": 8192, "max_concurrency": 16.0}, {"max_model_len": 8192, "max_concurrency": 16.0}),
    ({"max_model_len": 8192.5, "kv_cache_tokens": True, "max_concurrency": float("inf")}, {}),
    ({"gpu_memory_utilization": 0, "kv_cache_memory_bytes": 2 ** 60, "max_num_seqs": 0}, {}),
    ({"kv_cache_dtype": "fp8_e4m3", "api_key": TOKEN, "command": ["vllm"]}, {"kv_cache_dtype": "fp8_e4m3"}),
    ("{{ lookup('pipe', 'id') }}", {}),
    (None, {}),
])
def test_a_record_read_back_keeps_only_plausible_numbers(record, expected):
    assert checked_running(record) == expected


class _LoggedDocker:
    """What container_running asks of the Docker runner: a log's head from a start time."""

    def __init__(self, log=UTIL_BOOT, fails=False):
        self.log, self.fails, self.asked = log, fails, []

    def log_head(self, container, limit, since=None, timeout=30):
        self.asked.append((container, limit, since))
        if self.fails:
            raise DockerError("docker logs failed (rc=1): no such container")
        return self.log


def _attrs(args, started="2026-12-03T10:00:00.123456789Z"):
    return {"Id": "c0ffee", "Path": args[0], "Args": args[1:], "State": {"StartedAt": started},
            "Config": {"Env": ["HF_TOKEN=" + TOKEN], "Labels": {"com.docker.compose.service": "chat"}}}


def test_a_container_is_read_from_its_process_and_its_current_boots_log():
    docker = _LoggedDocker()
    args = ["vllm", "serve", "/m", "--max-model-len", "8192", "--api-key", TOKEN]
    assert container_running(docker, _attrs(args)) == {
        "max_model_len": 8192, "kv_cache_memory_bytes": round(20.37 * 2 ** 30), "kv_cache_tokens": 131072,
        "max_concurrency": 16.0}
    assert docker.asked == [("c0ffee", RUNNING_LOG_BYTES, "2026-12-03T10:00:00.123456789Z")]
    # a start time that is not docker's is never passed on as an argument
    container_running(docker, _attrs(args, started="--until=0"))
    assert docker.asked[-1][2] is None
    assert container_running(_LoggedDocker(fails=True), _attrs(args)) == {"max_model_len": 8192}
    assert container_running(docker, _attrs(["/usr/bin/asr-seat", "--port", "8000"])) is None


def test_attribution_carries_the_numbers_of_a_hand_started_server_only():
    hand, ours = "c" * 64, "d" * 64
    args = ["vllm", "serve", "/m", "--max-model-len", "8192", "--api-key", TOKEN]
    managed = dict(_attrs(args), Id=ours, Config={"Image": "v", "Cmd": args[2:], "Labels": {
        "io.llmfleet.seat": "chat", "com.docker.compose.service": "chat"}})

    class Engine(_LoggedDocker):
        docker_host = None

        def inspect(self, ids):
            return {hand: dict(_attrs(args), Id=hand), ours: managed}, None

    gpus = [{"index": 0, "uuid": "GPU-a", "memory_used_mib": 2000, "processes": [
        {"pid": 11, "used_mib": 1000}, {"pid": 12, "used_mib": 1000}]}]
    result, warnings = attribute_processes(
        gpus, Containers(Engine(), running=container_running),
        read_cgroup=lambda pid: ("0::/docker/%s\n" % (hand if pid == 11 else ours), None), read_age=lambda pid: 1)
    assert warnings == []
    started, seat = result[0]["processes"]
    assert started["running"] == {"max_model_len": 8192, "kv_cache_memory_bytes": round(20.37 * 2 ** 30),
                                  "kv_cache_tokens": 131072, "max_concurrency": 16.0}
    assert "running" not in seat and seat["seat"] == "chat", "the collection's own seat is read by its command"
    assert TOKEN not in json.dumps(started)
    without, _warnings = attribute_processes(
        gpus, Containers(Engine()), read_cgroup=lambda pid: ("0::/docker/%s\n" % hand, None), read_age=lambda pid: 1)
    assert "running" not in without[0]["processes"][0], "read only where gpu_info asks the engines"


def _docker_cli(tmp_path, script):
    cli = tmp_path / "docker"
    cli.write_text("#!/bin/sh\n" + script + "\n")
    cli.chmod(0o755)
    return Docker(binary=str(cli))


def test_a_logs_head_reads_no_more_than_asked_of_an_endless_log(tmp_path):
    docker = _docker_cli(tmp_path, 'echo "$@" >&2; yes "INFO a log line that never ends"')
    head = docker.log_head("chat", 5000, since="2026-12-03T10:00:00Z", timeout=20)
    assert len(head.encode()) == 5000 and head.startswith("logs --since 2026-12-03T10:00:00Z chat\n")


def test_a_logs_head_that_docker_refuses_says_why(tmp_path):
    docker = _docker_cli(tmp_path, 'echo "Error response from daemon: No such container: chat" >&2; exit 1')
    with pytest.raises(DockerError, match="docker logs failed \\(rc=1\\): Error response from daemon: No such"):
        docker.log_head("chat", 5000)
    assert _docker_cli(tmp_path, 'printf "short log"').log_head("chat", 5000) == "short log"
