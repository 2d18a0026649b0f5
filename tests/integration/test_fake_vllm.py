"""The twin's vLLM stand-in (tests/twin/seat/vllm) run as host processes against the twin's
simulated GPU driver (tests/twin/fakegpu/fakegpud.py), checked through real HTTP, real signals
and the driver's state.json: its CLI, boot log, memory, endpoints and failure modes."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import evaluate_kv_budget

REPO = Path(__file__).resolve().parents[2]
VLLM = REPO / "tests" / "twin" / "seat" / "vllm"
sys.path.insert(0, str(VLLM.parent))
from fakevllm.kv import Layout, Plan, PlanError, capability  # noqa: E402  (the seat's own package)
from fakevllm.model import Model  # noqa: E402
from support.fake_vllm import DRIVER, GPU0, GPU1, TOTAL_MIB, GpuDriver, Seat  # noqa: E402
from support.litellm import free_port  # noqa: E402
from support.wait import wait_for  # noqa: E402
ASR = REPO / "tests" / "twin" / "seat" / "asr-seat"
GIB, MIB = 2 ** 30, 2 ** 20

# Qwen3-8B's geometry (36 layers, 8 KV heads of 128, bf16, 40,960 native)
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
            "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# A Qwen3.5-9B-shaped Gated DeltaNet hybrid
QWEN35_9B = {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": {
    "model_type": "qwen3_5_text", "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256,
    "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "vocab_size": 248320,
    "dtype": "bfloat16"}}
GEMMA_LIKE = dict(QWEN3_8B, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text")


@pytest.fixture
def gpus(tmp_path):
    if not DRIVER.exists():
        pytest.fail("the twin's GPU driver %s is missing" % DRIVER)
    driver = GpuDriver(tmp_path)
    yield driver
    driver.stop()


@pytest.fixture
def models(tmp_path):
    def write(name, config):
        directory = tmp_path / "models" / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(config))
        return str(directory)
    return write


@pytest.fixture
def seats(gpus, tmp_path):
    started = []

    def start(model, *args, env=None, device=GPU0, program=VLLM, wait=True):
        port = free_port()
        argv = (["serve", model] if program == VLLM else []) + ["--port", str(port)] + list(args)
        environment = dict(os.environ, FAKEGPU_SOCKET=gpus.socket, NVIDIA_VISIBLE_DEVICES=device,
                           **(env or {}))
        seat = Seat(program, argv, environment, tmp_path / ("seat-%d.log" % len(started)))
        started.append(seat)
        if wait:
            seat.wait_health()
        return seat

    yield start
    for seat in started:
        seat.close()


PINNED = ["--served-model-name", "gen-small", "--max-model-len", "32768",
          "--kv-cache-memory-bytes", "8589934592", "--gpu-memory-utilization", "0.1"]


def lines_in_order(output: str, *fragments) -> None:
    position = 0
    for fragment in fragments:
        found = output.find(fragment, position)
        assert found >= 0, "%r not found after position %d in:\n%s" % (fragment, position, output)
        position = found + len(fragment)


# -- boot, memory, log ------------------------------------------------------------------------

def test_pinned_boot_logs_vllms_lines_in_order_and_holds_its_memory(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_WEIGHTS_BYTES": "16GiB"})
    lines_in_order(
        seat.output,
        "(APIServer pid=%d) INFO " % seat.proc.pid, "[startup.py:38]", "version 0.33.0",
        "non-default args: {", "'kv_cache_memory_bytes': 8589934592",
        "[model.py:2170] Using max model len 32768",
        "(EngineCore pid=", "[model_runner.py:428] Model loading took 16.0 GiB memory and",
        "[gpu_worker.py:676] Initial free memory 95.09 GiB, reserved 8.0 GiB memory for KV Cache as "
        "specified by kv_cache_memory_bytes config and skipped memory profiling.",
        "[kv_cache_utils.py:1147] GPU KV cache size: 58,240 tokens, Maximum concurrency for 32,768 "
        "tokens per request: 1.78x",
        "[entry.py:139] Starting vLLM server on http://0.0.0.0:%d" % seat.port,
        "Route: /health, Methods: GET", "INFO:     Application startup complete.")
    assert "Available KV cache memory" not in seat.output   # skipped with a pinned budget
    # context 512 + weights 16,384 + KV 3,640 x 2,359,296 B (8,190 MiB) + graphs 512
    # + activations 576 + workspace 394, all held by the engine process
    engine = gpus.processes(GPU0)
    assert len(engine) == 1 and engine[0]["pid"] != seat.proc.pid
    assert engine[0]["used_mib"] == 512 + 16384 + 8190 + 512 + 576 + 394
    assert gpus.free_mib(GPU0) == TOTAL_MIB - engine[0]["used_mib"]

    seat.proc.send_signal(signal.SIGTERM)
    assert seat.wait_exit() == 0
    # freed when the engine's connection to the driver closes, which the driver sees on its own time
    wait_for(lambda: gpus.processes(GPU0) == [], what="the driver to free the engine's memory")
    assert gpus.free_mib(GPU0) == TOTAL_MIB
    lines_in_order(seat.output, "INFO:     Shutting down", "INFO:     Finished server process")


def test_the_twin_hosts_knobs_file_sets_a_seats_defaults_under_its_own_environment(gpus, seats, models):
    """seats.json beside the driver's socket: per first served name, the knobs a seat gets
    unless its own environment sets them (how make demo gives each stand-in the overhead the
    recorded plateau measured)."""
    knobs = {"gen-small": {"FAKE_VLLM_CUDA_GRAPH_MIB": 0, "FAKE_VLLM_RUNTIME_OVERHEAD_MIB": 36,
                           "FAKE_VLLM_ACTIVATION_MIB": 0, "FAKE_VLLM_WEIGHTS_BYTES": "1GiB"},
             "someone-else": {"FAKE_VLLM_RUNTIME_OVERHEAD_MIB": 9999}}
    (Path(gpus.socket).parent / "seats.json").write_text(json.dumps(knobs))
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_WEIGHTS_BYTES": "16GiB"})
    # context 512 + weights 16,384 (its environment wins) + KV 8,190 + runtime 36 from the file
    assert gpus.processes(GPU0)[0]["used_mib"] == 512 + 16384 + 8190 + 36
    seat.close()
    (Path(gpus.socket).parent / "seats.json").write_text("[1]")
    refused = seats(models("qwen3-8b", QWEN3_8B), *PINNED, wait=False)
    assert refused.wait_exit() == 2
    assert "seats.json: expected a mapping of served names to knobs" in refused.output


def test_health_is_503_until_the_engine_is_ready(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_BOOT_DELAY_S": "1.5"},
                 wait=False)
    seat.wait_health(503, timeout=10)
    assert "Application startup complete" not in seat.output
    assert seat.http("/v1/models")[0] == 503
    seat.wait_health(200, timeout=20)
    assert "Application startup complete" in seat.output


def test_startup_check_fails_with_vllms_message_and_frees_the_gpu(gpus, seats, models):
    gpus.call({"op": "set_background", "uuid": GPU0, "mib": 10 * 1024})
    seat = seats(models("qwen3-8b", QWEN3_8B), "--kv-cache-memory-bytes", "8G", wait=False)
    assert seat.wait_exit() == 1
    # free at the snapshot = 97,887 - 10,240 - 512 (context) MiB; ceil(97,887 MiB x 0.92)
    assert ("ValueError: Free memory on device cuda:0 (85.09/95.59 GiB) on startup is less than "
            "desired GPU memory utilization (0.92, 87.95 GiB). Decrease GPU memory utilization or "
            "reduce GPU memory used by other processes.") in seat.output
    lines_in_order(seat.output, "[core.py:1584] EngineCore failed to start.",
                   "RuntimeError: Engine core initialization failed. See root cause above. "
                   "Failed core proc(s): {}")
    assert gpus.processes(GPU0) == []


def test_startup_check_passes_at_exactly_the_requested_memory(gpus, seats, models):
    # ceil(97,887 MiB x 0.5) bytes is 48,943.5 MiB; free after the context must reach it
    gpus.call({"op": "set_background", "uuid": GPU0, "mib": TOTAL_MIB - 48944 - 512})
    seat = seats(models("qwen3-8b", QWEN3_8B), "--gpu-memory-utilization", "0.5",
                 "--kv-cache-memory-bytes", "1G", "--max-model-len", "4096",
                 env={"FAKE_VLLM_WEIGHTS_BYTES": "1GiB"})
    assert "GPU KV cache size" in seat.output


def test_admission_check_failure_carries_vllms_estimate(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), "--max-model-len", "131072",
                 "--kv-cache-memory-bytes", "8G", "--gpu-memory-utilization", "0.1",
                 env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, wait=False)
    assert seat.wait_exit() == 1
    assert ("ValueError: To serve at least one request with the model's max seq len (131072), (18.0 "
            "GiB KV cache is needed, which is larger than the available KV cache memory (8.0 GiB). "
            "Based on the available memory, the estimated maximum model length is 58224.") in seat.output
    assert "User-specified max_model_len (131072) is greater than the derived" in seat.output


def test_a_context_beyond_the_native_window_needs_the_override(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), "--max-model-len", "131072", wait=False)
    assert seat.wait_exit() == 1
    assert ("Value error, User-specified max_model_len (131072) is greater than the derived "
            "max_model_len (max_position_embeddings=40960 or model_max_length=None in model's "
            "config.json). To allow overriding this maximum, set the env var "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.") in seat.output


def test_util_path_charges_a_co_booting_neighbour_to_this_seat(gpus, seats, models):
    """Seed 000: util-sized KV is a co-boot lottery. A neighbour that allocates between this
    seat's snapshot and its profile run comes out of this seat's KV."""
    config = models("qwen3-8b", QWEN3_8B)
    args = ["--max-model-len", "32768", "--gpu-memory-utilization", "0.5"]
    alone = seats(config, *args)
    alone_kv = float(alone.output.split("Available KV cache memory: ")[1].split(" GiB")[0])
    alone.close()
    contested = seats(config, *args, env={"FAKE_VLLM_BOOT_DELAY_S": "2"}, wait=False)
    deadline = time.monotonic() + 10
    while "Loading model from scratch" not in contested.output:   # after the snapshot
        assert time.monotonic() < deadline, contested.output
        time.sleep(0.02)
    gpus.call({"op": "set_background", "uuid": GPU0, "mib": 4096})
    contested.wait_health()
    contested_kv = float(contested.output.split("Available KV cache memory: ")[1].split(" GiB")[0])
    assert alone_kv - contested_kv == pytest.approx(4.0, abs=0.011)
    lines_in_order(contested.output, "Available KV cache memory", "CUDA graph memory profiling is enabled",
                   "GPU KV cache size", "CUDA graph pool memory", "Replace gpu_memory_utilization "
                   "config with `--kv-cache-memory=")


def test_max_model_len_auto_fits_the_budget(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), "--max-model-len", "auto", "--kv-cache-memory-bytes",
                 "4G", "--gpu-memory-utilization", "0.1")
    # 4 GiB = 1,820 blocks of 16 tokens; one is the null block
    assert ("Auto-fit max_model_len: reduced from 40960 to 29104 to fit in available KV cache "
            "memory (4.0 GiB GPU)") in seat.output
    assert seat.http("/v1/models")[1]["data"][0]["max_model_len"] == 29104


# -- the CLI ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [("32k", 32000), ("32K", 32768), ("20480", 20480)])
def test_max_model_len_takes_vllms_human_readable_ints(seats, models, value, expected):
    seat = seats(models("qwen3-8b", QWEN3_8B), "--max-model-len", value, "--kv-cache-memory-bytes",
                 "8G", "--gpu-memory-utilization", "0.1", "--served-model-name", "a", "b")
    status, cards = seat.http("/v1/models")
    assert status == 200
    assert [(c["id"], c["max_model_len"], c["root"]) for c in cards["data"]] == [
        ("a", expected, cards["data"][0]["root"]), ("b", expected, cards["data"][0]["root"])]
    assert cards["data"][0]["root"].endswith("qwen3-8b") and cards["data"][0]["owned_by"] == "vllm"


def test_kv_cache_memory_works_as_the_abbreviation_vllm_suggests(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), "--kv-cache-memory=8589934592", "--max-model-len",
                 "32768", "--gpu-memory-utilization", "0.1")
    assert "reserved 8.0 GiB memory for KV Cache" in seat.output


@pytest.mark.parametrize("args, code, message", [
    (["--kv-cache-memory-gib", "22"], 2,
     "vllm serve: error: unrecognized arguments: --kv-cache-memory-gib 22"),
    (["--kv-cache-memory-bytes", "8.5G"], 2, "Decimals are not allowed with binary suffixes like G. "
                                             "Did you mean to use 8.5g instead?"),
    (["--kv-cache-dtype", "fp9"], 2, "argument --kv-cache-dtype: invalid choice: 'fp9'"),
    (["--enable-auto-tool-choice"], 1,
     "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"),
    (["--enable-auto-tool-choice", "--tool-call-parser", "qwen3"], 1,
     "KeyError: 'invalid tool call parser: qwen3 (chose from {"),
    (["--reasoning-parser", "qwen4"], 1, "KeyError: 'invalid reasoning parser: qwen4"),
])
def test_bad_arguments_fail_as_vllm_fails(seats, models, args, code, message):
    seat = seats(models("qwen3-8b", QWEN3_8B), *args, wait=False)
    assert seat.wait_exit() == code
    assert message in seat.output


def test_a_missing_model_is_vllms_invalid_repository_error(seats, tmp_path):
    seat = seats(str(tmp_path / "nowhere"), wait=False)
    assert seat.wait_exit() == 1
    assert "ValueError: Invalid repository ID or local directory specified: '%s'." % (
        tmp_path / "nowhere") in seat.output


def test_no_gpu_is_vllms_device_error(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), device="none", wait=False)
    assert seat.wait_exit() == 1
    assert "RuntimeError: Failed to infer device type" in seat.output


# -- the API ----------------------------------------------------------------------------------

def test_chat_and_stream_are_shaped_like_vllm(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--default-chat-template-kwargs",
                 '{"enable_thinking": false}')
    status, reply = seat.chat([{"role": "user", "content": "What is the capital of France?"}],
                              model="gen-small")
    assert status == 200
    assert reply["object"] == "chat.completion" and reply["id"].startswith("chatcmpl-")
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["reasoning"] is None
    assert choice["message"]["content"].startswith("This is gen-small answering")
    assert reply["usage"]["completion_tokens"] == 24
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + 24

    events = seat.stream([{"role": "user", "content": "What is the capital of France?"}],
                         stream_options={"include_usage": True})
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == events[0]["id"] for e in events)
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == choice["message"]["content"]
    assert events[-2]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 24


def test_reasoning_is_inline_without_a_parser_and_split_with_one(seats, models):
    config = models("qwen3-8b", QWEN3_8B)
    plain = seats(config, *PINNED)
    content = plain.chat([{"role": "user", "content": "hi"}])[1]["choices"][0]["message"]
    assert content["content"].startswith("<think>\nLet me think") and content["reasoning"] is None
    plain.close()

    parsed = seats(config, *PINNED, "--reasoning-parser", "qwen3")
    message = parsed.chat([{"role": "user", "content": "hi"}])[1]["choices"][0]["message"]
    assert message["reasoning"].startswith("Let me think") and "<think>" not in message["content"]
    events = parsed.stream([{"role": "user", "content": "hi"}])
    deltas = [e["choices"][0]["delta"] for e in events[1:-1]]
    assert "".join(d.get("reasoning", "") for d in deltas) == message["reasoning"]
    assert "".join(d.get("content", "") for d in deltas) == message["content"]
    assert not any("reasoning_content" in d for d in deltas)
    off = parsed.chat([{"role": "user", "content": "hi"}], chat_template_kwargs={"enable_thinking": False})
    assert off[1]["choices"][0]["message"]["reasoning"] is None


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_TURN = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": None, "tool_calls": [{"id": "call-1", "type": "function", "function": {
                 "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
             {"role": "tool", "tool_call_id": "call-1", "content": "21 C and sunny"}]


def test_tools_need_both_flags_and_the_reasoning_parser_keeps_tool_turns_clean(seats, models):
    config = models("gemma", GEMMA_LIKE)
    bare = seats(config, *PINNED)
    status, error = bare.chat([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS)
    assert status == 400 and error == {"error": {
        "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "type": "BadRequestError", "param": None, "code": 400}}
    status, error = bare.chat([{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice="required")
    assert status == 400 and error["error"]["message"] == \
        'tool_choice="required" requires --tool-call-parser to be set'
    bare.close()

    tools_only = seats(config, *PINNED, "--enable-auto-tool-choice", "--tool-call-parser", "gemma4")
    status, reply = tools_only.chat([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS)
    call = reply["choices"][0]
    assert status == 200 and call["finish_reason"] == "tool_calls"
    assert call["message"]["tool_calls"][0]["function"] == {"name": "get_weather",
                                                            "arguments": '{"city": "Paris"}'}
    assert call["message"]["tool_calls"][0]["id"].startswith("chatcmpl-tool-")
    leaked = tools_only.chat(TOOL_TURN, tools=TOOLS)[1]["choices"][0]["message"]["content"]
    assert leaked.startswith("<|channel>thought\n<channel|>The tool returned")
    tools_only.close()

    full_set = seats(config, *PINNED, "--enable-auto-tool-choice", "--tool-call-parser", "gemma4",
                     "--reasoning-parser", "gemma4")
    clean = full_set.chat(TOOL_TURN, tools=TOOLS)[1]["choices"][0]["message"]["content"]
    assert clean.startswith("The tool returned: 21 C and sunny")
    events = full_set.stream([{"role": "user", "content": "Weather?"}], tools=TOOLS)
    calls = [e["choices"][0]["delta"]["tool_calls"] for e in events if e["choices"][0]["delta"].get("tool_calls")]
    assert calls and calls[0][0]["function"]["name"] == "get_weather"


def test_output_is_capped_by_max_new_tokens_and_the_context_not_by_a_max_tokens_key(seats, models):
    config = models("qwen3-8b", QWEN3_8B)
    runaway = [{"role": "user", "content": "Tag this memory entry [runaway]"}]
    capped = seats(config, "--max-model-len", "2048", "--kv-cache-memory-bytes", "1G",
                   "--gpu-memory-utilization", "0.1", "--default-chat-template-kwargs",
                   '{"enable_thinking": false}', "--override-generation-config", '{"max_new_tokens": 64}')
    reply = capped.chat(runaway)[1]
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 64
    assert capped.chat(runaway, max_tokens=10)[1]["usage"]["completion_tokens"] == 10
    assert capped.chat(runaway, max_tokens=500)[1]["usage"]["completion_tokens"] == 64
    capped.close()

    ignored = seats(config, "--max-model-len", "2048", "--kv-cache-memory-bytes", "1G",
                    "--gpu-memory-utilization", "0.1", "--default-chat-template-kwargs",
                    '{"enable_thinking": false}', "--override-generation-config", '{"max_tokens": 64}')
    reply = ignored.chat(runaway)[1]
    # only the context stops it: max_model_len - prompt
    assert reply["usage"]["completion_tokens"] == 2048 - reply["usage"]["prompt_tokens"]


def test_requests_beyond_the_context_are_vllms_400s(seats, models):
    model = models("qwen3-8b", QWEN3_8B)
    seat = seats(model, "--max-model-len", "1024", "--kv-cache-memory-bytes",
                 "1G", "--gpu-memory-utilization", "0.1")
    status, error = seat.chat([{"role": "user", "content": "word " * 2000}])
    assert status == 400
    assert error["error"]["message"].startswith(
        "This model's maximum context length is 1024 tokens. However, your prompt contains at least 1025 "
        "input tokens, which exceeds this limit even without any output tokens.")
    status, error = seat.chat([{"role": "user", "content": "hi"}], max_tokens=4096)
    assert status == 400 and error["error"]["message"] == (
        "max_tokens=4096 cannot be greater than max_model_len=1024. Please request fewer output tokens. "
        "(parameter=max_tokens, value=4096)")
    status, error = seat.chat([{"role": "user", "content": "hi"}], model="other")
    # the served name is the model's path when none is given
    assert status == 404 and error["error"]["message"] == "The model `other` does not exist. Valid aliases: %s." % model


def test_metrics_version_and_api_key(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--api-key", "sk-seat")
    status, text = seat.http("/metrics")
    assert status == 200
    assert 'vllm:num_requests_running{model_name="gen-small",engine="0"} 0.0' in text
    assert 'vllm:kv_cache_usage_perc{model_name="gen-small",engine="0"} 0.0' in text
    info = next(line for line in text.splitlines() if line.startswith("vllm:cache_config_info{"))
    for label in ('num_gpu_blocks="3640"', 'kv_cache_memory_bytes="8589934592"', 'block_size="16"',
                  'kv_cache_size_tokens="58240"', 'gpu_memory_utilization="0.1"'):
        assert label in info
    assert seat.http("/version") == (200, {"version": "0.33.0"})
    assert seat.http("/v1/models") == (401, {"error": "Unauthorized"})
    assert seat.http("/v1/models", headers={"Authorization": "Bearer sk-seat"})[0] == 200
    assert seat.http("/health")[0] == 200


# -- faults -----------------------------------------------------------------------------------

def test_oom_at_boot_is_torchs_error_and_leaves_the_gpu_free(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_FAULT": "oom_at_boot"}, wait=False)
    assert seat.wait_exit() == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total " \
           "capacity of 95.59 GiB of which" in seat.output
    assert gpus.processes(GPU0) == []


def test_oom_on_the_first_long_request_kills_the_engine_and_the_server_exits_0(gpus, seats, models):
    """Seed 003: every boot gate passes, the first real long request kills the worker, and the
    API server exits cleanly, so restart: on-failure would never fire."""
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--default-chat-template-kwargs",
                 '{"enable_thinking": false}',
                 env={"FAKE_VLLM_FAULT": "oom_on_long_request", "FAKE_VLLM_WATCHDOG_S": "0.5"})
    assert seat.chat([{"role": "user", "content": "short"}])[0] == 200
    status, error = seat.chat([{"role": "user", "content": "long [runaway]"}], max_tokens=30000)
    assert status == 500 and error["error"] == {
        "message": "The server had an error while processing your request.",
        "type": "InternalServerError", "param": None, "code": 500}
    assert seat.wait_exit() == 0
    lines_in_order(seat.output, "Application startup complete.", "EngineCore encountered a fatal error.",
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB.",
                   "AsyncLLM output_handler failed.", "EngineDeadError", "INFO:     Shutting down")
    assert gpus.processes(GPU0) == []


def test_graph_memory_grows_with_the_shape_asked_and_a_larger_one_ooms_at_capture(gpus, seats, models):
    """What the ladder finds: CUDA graphs for max_num_seqs x max_model_len, while the pinned KV
    stays exactly what was asked."""
    knob = {"FAKE_VLLM_GRAPH_MIB_PER_MTOKEN": "40000"}
    small = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--max-num-seqs", "16", env=knob)
    graphs = 512 + math.ceil(40000 * 16 * 32768 / 1e6)
    assert "Graph capturing finished in 0 secs, took %.2f GiB" % (graphs / 1024) in small.output
    assert "reserved 8.0 GiB memory for KV Cache" in small.output
    small.close()
    large = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--max-num-seqs", "64", env=knob, wait=False)
    assert large.wait_exit() == 1
    lines_in_order(large.output, "reserved 8.0 GiB memory for KV Cache",
                   "self.cudagraph_manager.capture(", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert gpus.processes(GPU0) == []


def test_the_first_long_request_takes_memory_for_the_context_and_keeps_it(gpus, seats, models):
    def held():
        return sum(p["used_mib"] for p in gpus.processes(GPU0))

    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--default-chat-template-kwargs",
                 '{"enable_thinking": false}', env={"FAKE_VLLM_LONG_REQUEST_MIB_PER_KTOKEN": "100"})
    booted = held()
    assert seat.chat([{"role": "user", "content": "short"}])[0] == 200 and held() == booted
    assert seat.chat([{"role": "user", "content": "long [runaway]"}], max_tokens=30000)[0] == 200
    assert held() == booted + 100 * 32768 // 1024, "charged once, by the first long request, and kept"
    assert seat.chat([{"role": "user", "content": "long [runaway]"}], max_tokens=30000)[0] == 200
    assert held() == booted + 3200
    seat.close()
    greedy_env = {"FAKE_VLLM_LONG_REQUEST_MIB_PER_KTOKEN": "3000", "FAKE_VLLM_WATCHDOG_S": "0.5"}
    greedy = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--default-chat-template-kwargs",
                   '{"enable_thinking": false}', env=greedy_env)
    assert greedy.chat([{"role": "user", "content": "long [runaway]"}], max_tokens=30000)[0] == 500
    assert greedy.wait_exit() == 0, "boot is not runtime: the server exits clean"


def test_health_stuck_at_503(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_FAULT": "health_stuck"}, wait=False)
    deadline = time.monotonic() + 20
    while "Application startup complete" not in seat.output:
        assert time.monotonic() < deadline and seat.proc.poll() is None, seat.output
        time.sleep(0.05)
    assert seat.http("/health")[0] == 503
    assert seat.http("/v1/models")[0] == 200


def test_crash_after_ready_frees_memory_turns_health_503_and_exits_0(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED,
                 env={"FAKE_VLLM_FAULT": "crash_after_ready", "FAKE_VLLM_CRASH_AFTER_S": "0.5",
                      "FAKE_VLLM_WATCHDOG_S": "3"})
    assert gpus.processes(GPU0)
    seat.wait_health(503, timeout=10)
    # the driver frees a context when the engine's connection to it closes, as the server's does:
    # which of the two the machine gets to first is its own business, on a real host too
    wait_for(lambda: gpus.processes(GPU0) == [], what="the driver to free the crashed engine's memory")
    assert seat.wait_exit() == 0
    assert "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup" in seat.output


def test_memory_creeps_to_a_plateau_and_a_short_card_means_autotuner_fallbacks(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED,
                 env={"FAKE_VLLM_CREEP_MIB": "1000", "FAKE_VLLM_CREEP_SECONDS": "1", "FAKE_VLLM_CREEP_STEPS": "4"})
    engine_pid = gpus.processes(GPU0)[0]["pid"]
    at_boot = gpus.used_by(engine_pid, GPU0)
    wait_for(lambda: gpus.used_by(engine_pid, GPU0) >= at_boot + 1000, 60, "the four creep steps")
    assert gpus.used_by(engine_pid, GPU0) == at_boot + 1000
    time.sleep(2)  # two more creep intervals: a fifth step would show
    assert gpus.used_by(engine_pid, GPU0) == at_boot + 1000, "past the plateau it stays flat"
    seat.close()

    gpus.call({"op": "set_background", "uuid": GPU0, "mib": TOTAL_MIB - at_boot - 100})
    short = seats(models("qwen3-8b", QWEN3_8B), *PINNED,
                  env={"FAKE_VLLM_CREEP_MIB": "1000", "FAKE_VLLM_CREEP_SECONDS": "0.4", "FAKE_VLLM_CREEP_STEPS": "2"})
    wait_for(lambda: short.output.count("[Autotuner]: OOM detected, falling back to default tactic") >= 2, 60,
             "two autotuner fall-backs")
    assert short.http("/health")[0] == 200, "fall-backs slow a seat down, they do not kill it"


# -- shapes beyond one GPU and plain attention -------------------------------------------------

def test_tensor_parallel_2_runs_one_worker_per_gpu(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, "--tensor-parallel-size", "2",
                 device="%s,%s" % (GPU0, GPU1))
    workers = [gpus.processes(GPU0), gpus.processes(GPU1)]
    assert all(len(w) == 1 for w in workers) and workers[0][0]["pid"] != workers[1][0]["pid"]
    assert seat.output.count("] Model loading took 7.63 GiB memory") == 2
    assert "(Worker_TP0 pid=%d)" % workers[0][0]["pid"] in seat.output
    assert "(Worker_TP1 pid=%d)" % workers[1][0]["pid"] in seat.output
    # 4 KV heads per rank: twice the blocks of TP=1 for the same per-GPU budget
    assert "GPU KV cache size: 116,496 tokens, Maximum concurrency for 32,768 tokens per request: 3.56x" \
        in seat.output
    seat.close()
    assert gpus.processes(GPU0) == [] and gpus.processes(GPU1) == []


def test_a_gated_deltanet_hybrid_aligns_its_block_and_checks_max_num_seqs(seats, models):
    config = models("qwen3.5-9b", QWEN35_9B)
    refused = seats(config, "--max-model-len", "32768", "--kv-cache-memory-bytes", "8G",
                    "--gpu-memory-utilization", "0.1", wait=False)
    assert refused.wait_exit() == 1
    lines_in_order(refused.output, "Setting attention block size to 576 tokens",
                   "GPU KV cache size: 225,900 tokens, Maximum concurrency for 32,768 tokens per request: 6.89x",
                   "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (455).")
    booted = seats(config, "--max-model-len", "32768", "--kv-cache-memory-bytes", "8G",
                   "--gpu-memory-utilization", "0.1", "--max-num-seqs", "256")
    assert 'num_gpu_blocks="455"' in booted.http("/metrics")[1]


def test_the_asr_tenant_holds_its_cap_and_transcribes(gpus, seats):
    seat = seats(None, "--memory", "3840MiB", program=ASR, device="1")
    assert [p["used_mib"] for p in gpus.processes(GPU1)] == [3840]
    assert seat.http("/v1/audio/transcriptions", body={"audio": "x"}, method="POST")[0] == 200
    seat.close()
    assert gpus.processes(GPU1) == []
    gpus.call({"op": "set_background", "uuid": GPU1, "mib": TOTAL_MIB - 1000})
    short = seats(None, "--memory", "3840MiB", program=ASR, device="1", wait=False)
    assert short.wait_exit() == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.75 GiB." in short.output


def test_the_asr_tenant_takes_its_cap_in_the_inventorys_units(gpus, seats):
    """The twin sets FAKE_ASR_MEMORY from an inventory's memory_cap_bytes, e.g. 3400MB (SI)."""
    seat = seats(None, "--memory", "3400MB", program=ASR, device="1")
    assert [p["used_mib"] for p in gpus.processes(GPU1)] == [-(-3400 * 10 ** 6 // 2 ** 20)]
    seat.close()


# -- the seat's KV arithmetic against the 8 GiB vectors of the collection's KV tests (TP=1) --

REFERENCE_MODELS = {
    "qwen3-8b": QWEN3_8B,
    "llama-3.1-8b": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                     "torch_dtype": "bfloat16"},
    "gemma-3-27b": {"model_type": "gemma3_text", "hidden_size": 5376, "num_hidden_layers": 62,
                    "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                    "sliding_window": 1024, "sliding_window_pattern": 6,
                    "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
    "gpt-oss-20b": {"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 24,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                    "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 12,
                    "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
    "deepseek-v2-lite": {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
                         "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
                         "qk_rope_head_dim": 64, "max_position_embeddings": 163840, "torch_dtype": "bfloat16"},
    "qwen3-next-80b": {"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
                       "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                       "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                       "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                       "max_position_embeddings": 262144, "torch_dtype": "bfloat16"},
    "qwen3.5-9b": QWEN35_9B,
}


@pytest.mark.parametrize("name, kv_dtype, max_len, expected", [
    ("qwen3-8b", "auto", 32768, (58240, "1.78")), ("qwen3-8b", "fp8", 32768, (116496, "3.56")),
    ("qwen3-8b", "auto", 131072, 58224), ("llama-3.1-8b", "auto", 32768, (65536, "2.00")),
    ("llama-3.1-8b", "fp8", 131072, 131056),
    ("gemma-3-27b", "auto", 32768, 14960), ("gemma-3-27b", "fp8", 32768, (50045, "1.53")),
    ("gemma-3-27b", "fp8", 131072, 105152),
    ("gpt-oss-20b", "auto", 32768, (232332, "7.09")), ("gpt-oss-20b", "fp8", 131072, (620762, "4.74")),
    ("deepseek-v2-lite", "auto", 32768, (276160, "8.43")), ("deepseek-v2-lite", "fp8", 131072, (552320, "4.21")),
    ("qwen3-next-80b", "auto", 32768, (300869, "9.18")), ("qwen3-next-80b", "fp8", 131072, (647294, "4.94")),
    ("qwen3.5-9b", "auto", 131072, (251636, "1.92")), ("qwen3.5-9b", "fp8", 32768, (394035, "12.03")),
])
def test_the_seats_kv_arithmetic_reproduces_the_reference_vectors(name, kv_dtype, max_len, expected):
    layout = Layout(Model(name, "/nonexistent", REFERENCE_MODELS[name]), kv_dtype)
    if isinstance(expected, int):    # a boot failure: the estimated maximum length in vLLM's error
        with pytest.raises(PlanError, match="the estimated maximum model length is %d\\." % expected):
            Plan(layout, 8 * GIB, max_len, 256, True)
    else:
        plan = Plan(layout, 8 * GIB, max_len, 256, True)
        assert (plan.tokens, "%.2f" % plan.max_concurrency) == expected


@pytest.mark.parametrize("kv_lora_rank, qk_rope_head_dim, block_size", [(512, 64, 64), (256, 32, 16)])
def test_an_fp8_mla_seat_takes_flashmla_blocks_only_for_576_wide_latent_heads(kv_lora_rank, qk_rope_head_dim,
                                                                              block_size):
    """vLLM 0.33 on Hopper: FlashMLA's 64-token blocks for DeepSeek's heads, Triton MLA's 16 otherwise."""
    model_config = dict(REFERENCE_MODELS["deepseek-v2-lite"], kv_lora_rank=kv_lora_rank,
                        qk_rope_head_dim=qk_rope_head_dim)
    plan = Plan(Layout(Model("mla", "/nonexistent", model_config), "fp8"), 8 * GIB, 32768, 256, True)
    planned = evaluate_kv_budget(model_config, 32768, 8 * GIB, kv_cache_dtype="fp8", max_num_seqs=256)
    assert planned["block_size"] == block_size
    assert plan.tokens == planned["kv_cache_tokens"]


@pytest.mark.parametrize("card, profile", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA L40S", "l40s"),
                                           ("NVIDIA A100-SXM4-80GB", "a100")])
@pytest.mark.parametrize("name, kv_dtype", [("qwen3-8b", "auto"), ("deepseek-v2-lite", "fp8"),
                                            ("qwen3-next-80b", "auto"), ("qwen3-next-80b", "fp8")])
def test_the_seat_sizes_as_the_plan_does_for_the_card_it_simulates(card, profile, name, kv_dtype):
    """The stand-in follows the card's compute capability (an L40S has no FlashInfer GDN prefill
    and no FlashMLA), as the plan follows llmfleet_gpu_profile."""
    layout = Layout(Model(name, "/nonexistent", REFERENCE_MODELS[name]), kv_dtype, sm=capability(card))
    planned = evaluate_kv_budget(REFERENCE_MODELS[name], 32768, 8 * GIB, kv_cache_dtype=kv_dtype, max_num_seqs=256,
                                 gpu=profile)
    assert layout.block_size == planned["block_size"]
    assert Plan(layout, 8 * GIB, 32768, 256, True).tokens == planned["kv_cache_tokens"]


def test_a_gpu_that_falls_off_the_bus_kills_the_engine(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED,
                 env={"FAKE_VLLM_CREEP_MIB": "400", "FAKE_VLLM_CREEP_SECONDS": "2",
                      "FAKE_VLLM_CREEP_STEPS": "4", "FAKE_VLLM_WATCHDOG_S": "0.3"})
    gpus.call({"op": "set_faults", "faults": {"gpu_lost": [0]}})
    assert seat.wait_exit() == 0
    lines_in_order(seat.output, "Application startup complete.", "EngineCore encountered a fatal error.",
                   "RuntimeError: CUDA error: GPU has fallen off the bus", "INFO:     Shutting down")


def test_sigterm_during_boot_stops_the_seat_and_frees_the_gpu(gpus, seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_BOOT_DELAY_S": "30"}, wait=False)
    deadline = time.monotonic() + 10
    while not gpus.processes(GPU0):
        assert time.monotonic() < deadline, seat.output
        time.sleep(0.02)
    seat.proc.send_signal(signal.SIGTERM)
    assert seat.wait_exit(timeout=10) == 0
    assert gpus.processes(GPU0) == [] and "Application startup complete" not in seat.output


def test_metrics_show_a_request_in_flight(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_STEP_DELAY_MS": "40"})
    worker = threading.Thread(target=seat.chat, args=([{"role": "user", "content": "word " * 5000}],))
    worker.start()
    running = 'vllm:num_requests_running{model_name="gen-small",engine="0"} 1.0'
    wait_for(lambda: running in seat.http("/metrics")[1], 60, "the request in flight")
    text = seat.http("/metrics")[1]
    worker.join()
    assert running in text
    usage = float(text.split('vllm:kv_cache_usage_perc{model_name="gen-small",engine="0"} ')[1].split()[0])
    assert usage == pytest.approx(5007 / 58240, abs=1e-6)    # the prompt's tokens of the pool
    after = seat.http("/metrics")[1]
    assert 'vllm:num_requests_running{model_name="gen-small",engine="0"} 0.0' in after
    assert 'vllm:prompt_tokens_total{model_name="gen-small",engine="0"} 5007.0' in after
