"""The gateway contract through a real LiteLLM proxy (litellm[proxy]==1.108.7, built by
scripts/bootstrap-litellm), driven by real ansible-playbook runs of playbooks/gateway_smoke.yml.

Behind the proxy sit the twin's vLLM stand-ins (tests/twin/seat/vllm) as host processes on the
twin's simulated GPU driver, started with the flags each contract needs, and a scalar-judge
HTTP service for the pass-through route. Every check passes on a correct seat through the
gateway and directly; each broken contract fails naming the route and check; the key never
reaches the output; a stale pass-through target is caught and repointed end to end."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_ansible
from support import litellm as support_litellm
from support.litellm import LiteLLMProxy, free_port, stop, wait_until
from replay.server import ReplayServer

pytestmark = [pytest.mark.litellm, pytest.mark.slow]

FAKE_VLLM = REPO_ROOT / "tests" / "twin" / "seat" / "vllm"
GPU_DRIVER = REPO_ROOT / "tests" / "twin" / "fakegpu" / "fakegpud.py"

GPU = "GPU-5a1c0c6e-0000-4000-8000-0000000000a0"
# Qwen3-8B's and a Gemma-3-shaped geometry: the fake seat thinks Qwen-style (<think>) or
# Gemma-style (<|channel>thought), as the real chat templates do.
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
            "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
GEMMA_LIKE = dict(QWEN3_8B, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text")
THINKING_OFF = ["--default-chat-template-kwargs", '{"enable_thinking": false}']
TOOLS = ["--enable-auto-tool-choice", "--tool-call-parser"]
# Every key ends in capitals: the checks look for its last four characters (LiteLLM's masked
# form), which digits and lower-case letters could meet by chance in Ansible's temp-file names.
SEAT_KEY = "seat-only-key-" + secrets.token_hex(8) + "SQKZ"

# name -> (model config, served names, vLLM flags): one seat per contract under test
SEATS = {
    # correct: seed 002's set of three flags (parser, reasoning parser, thinking off by default)
    "gen-small": (QWEN3_8B, ["gen-small"],
                  ["--reasoning-parser", "qwen3"] + TOOLS + ["hermes"] + THINKING_OFF),
    "no-reasoning-parser": (QWEN3_8B, ["raw-thinker"], TOOLS + ["hermes"]),
    "no-tool-parser": (QWEN3_8B, ["no-tools"], ["--reasoning-parser", "qwen3"] + THINKING_OFF),
    "char-rp": (GEMMA_LIKE, ["char-rp"], TOOLS + ["gemma4"]),
    "keyed": (QWEN3_8B, ["keyed"], ["--api-key", SEAT_KEY] + THINKING_OFF),
    "dead": (QWEN3_8B, ["dead"], []),
}


@pytest.fixture(scope="session")
def litellm_bin() -> Path:
    return support_litellm.litellm_bin()


class Twin:
    """The twin's GPU driver and one fake vLLM seat per entry of SEATS, as host processes."""

    def __init__(self, tmp: Path):
        for program in (FAKE_VLLM, GPU_DRIVER):
            if not program.exists():
                pytest.fail("the twin's %s is missing" % program)
        self.tmp = tmp
        self.procs = []
        self.socket = str(tmp / "gpu.sock")
        (tmp / "gpus.json").write_text(json.dumps({
            "schema": 1, "driver_version": "580.95.05", "nvml_version": "13.580.95.05",
            "cuda_driver_version": 13000, "faults": {},
            "gpus": [{"index": 0, "uuid": GPU, "name": "NVIDIA H200", "pci_bus_id": "00000000:18:00.0",
                      "serial": "0", "memory_total_mib": 143771, "memory_reserved_mib": 0,
                      "background_used_mib": 0, "mig_mode": False, "processes": []}]}))
        log = tmp / "fakegpud.log"
        self.driver = self._spawn([sys.executable, str(GPU_DRIVER), "--initial",
                                   str(tmp / "gpus.json"), "--state", str(tmp / "state.json"),
                                   "--socket", self.socket], log)
        wait_until(lambda: os.path.exists(self.socket), "the GPU driver", self.driver, log)
        self.urls = {}
        self.seats = {}
        for name, (config, served, flags) in SEATS.items():
            self.start(name, config, served, flags)

    def _spawn(self, argv, log: Path, env=None) -> subprocess.Popen:
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        return proc

    def start(self, name, config, served, flags):
        model = self.tmp / "models" / name
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps(config))
        port = free_port()
        url = "http://127.0.0.1:%d" % port
        log = self.tmp / ("seat-%s.log" % name)
        env = dict(os.environ, FAKEGPU_SOCKET=self.socket, NVIDIA_VISIBLE_DEVICES=GPU,
                   FAKE_VLLM_WEIGHTS_BYTES="1GiB")
        proc = self._spawn([sys.executable, str(FAKE_VLLM), "serve", str(model), "--port", str(port),
                            "--served-model-name", *served, "--max-model-len", "8192",
                            "--kv-cache-memory-bytes", "2G",
                            # pinned KV: util only gates vLLM's boot-time free-memory check
                            "--gpu-memory-utilization", "0.05", *flags], log, env)
        wait_until(lambda: urllib.request.urlopen(url + "/health", timeout=2).status == 200,
                   "seat %s" % name, proc, log)
        self.urls[name], self.seats[name] = url, proc

    def close(self):
        for proc in reversed(self.procs):
            stop(proc)


def gateway_config(twin: Twin, judge_target: str, master_key: str) -> str:
    """LiteLLM's config: a route per contract, as the seeds' gateway names them."""
    return """\
# generated by tests/integration/test_gateway_litellm.py
model_list:
  - model_name: gen-small
    litellm_params:
      model: hosted_vllm/gen-small
      api_base: {gen_small}/v1
  - model_name: gen-small-reasoning     # the thinking alias of the same seat
    litellm_params:
      model: hosted_vllm/gen-small
      api_base: {gen_small}/v1
      extra_body: {{chat_template_kwargs: {{enable_thinking: true}}}}
  - model_name: raw-thinker
    litellm_params:
      model: hosted_vllm/raw-thinker
      api_base: {no_reasoning_parser}/v1
  - model_name: no-tools
    litellm_params:
      model: hosted_vllm/no-tools
      api_base: {no_tool_parser}/v1
  - model_name: char-rp
    litellm_params: {{model: hosted_vllm/char-rp, api_base: '{char_rp}/v1'}}
  - model_name: dead-seat               # its seat is down
    litellm_params:
      model: hosted_vllm/dead
      api_base: {dead}/v1
litellm_settings:
  num_retries: 0
  request_timeout: 30
general_settings:
  master_key: {key}
  pass_through_endpoints:
    - path: /judge/score                # scalar-judge reward route
      target: {judge}
""".format(gen_small=twin.urls["gen-small"], no_reasoning_parser=twin.urls["no-reasoning-parser"],
           no_tool_parser=twin.urls["no-tool-parser"], char_rp=twin.urls["char-rp"],
           dead=twin.urls["dead"], judge=judge_target, key=master_key)


@pytest.fixture(scope="module")
def gateway(litellm_bin, tmp_path_factory):
    """The twin's seats behind one proxy, the `dead` seat stopped after the proxy started, and a
    pass-through whose target is the judge's OLD address (nothing listens there any more)."""
    tmp = tmp_path_factory.mktemp("gateway")
    master_key = "sk-" + secrets.token_hex(16) + "MQZX"
    twin = Twin(tmp)
    try:
        with ReplayServer(["judge"]) as judge:
            old_judge_port = free_port()
            config = tmp / "config.yaml"
            config.write_text(gateway_config(twin, "http://127.0.0.1:%d/score" % old_judge_port,
                                             master_key))
            proxy = LiteLLMProxy(litellm_bin, config, master_key)
            stop(twin.seats["dead"])
            try:
                yield {"proxy": proxy, "twin": twin, "judge": judge, "tmp": tmp,
                       "old_judge_port": old_judge_port, "litellm_bin": litellm_bin}
            finally:
                stop(proxy.proc)
    finally:
        twin.close()


def smoke(tmp: Path, url: str, routes: list, api_key: str | None, *options: str):
    """ansible-playbook playbooks/gateway_smoke.yml against one gateway host."""
    inventory = tmp / "inventory.json"
    host_vars = {"ansible_connection": "local", "llmfleet_gateway_url": url,
                 "llmfleet_gateway_routes": routes, "llmfleet_gateway_timeout": 30,
                 "ansible_python_interpreter": str(REPO_ROOT / ".venv" / "bin" / "python")}
    inventory.write_text(json.dumps({"gateways": {"hosts": {"gw": host_vars}}}))
    env = {"LLMFLEET_GATEWAY_API_KEY": api_key} if api_key else {}
    return run_ansible(["ansible-playbook", "-i", str(inventory), "playbooks/gateway_smoke.yml",
                        *options], extra_env=env)


TABLE_ROW = re.compile(r"^\W*(\S+)\s+(chat|stream|reasoning|tools)\s+(ok|FAIL)\s+(\S+)\s+(\S+)"
                       r"\s+([\w-]+)", re.MULTILINE)


def table_rows(stdout: str) -> list[tuple]:
    """(route, check, result, latency, ttft, reasoning key) of each printed table row."""
    return TABLE_ROW.findall(stdout)


def assert_no_key(proc, key: str):
    """Neither the key nor its last four characters (LiteLLM's masked forms) were printed."""
    output = proc.stdout + proc.stderr
    for form in (key, key[-4:]):
        assert form not in output, "a form of the key (%r) reached the output" % form


# ---------------------------------------------------------------------------------------------
# correct seats
# ---------------------------------------------------------------------------------------------

def test_every_check_passes_through_the_gateway(gateway):
    proxy = gateway["proxy"]
    routes = [{"model": "gen-small", "checks": ["chat", "stream", "tools"]},
              {"model": "gen-small-reasoning", "checks": ["chat", "stream", "reasoning"]}]
    proc = smoke(gateway["tmp"], proxy.url, routes, proxy.master_key)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table_rows(proc.stdout)
    assert [row[:3] for row in rows] == [
        ("gen-small", "chat", "ok"), ("gen-small", "stream", "ok"), ("gen-small", "tools", "ok"),
        ("gen-small-reasoning", "chat", "ok"), ("gen-small-reasoning", "stream", "ok"),
        ("gen-small-reasoning", "reasoning", "ok")], proc.stdout
    assert rows[5][5] == "reasoning_content", "LiteLLM renames delta.reasoning"
    assert rows[1][4].endswith("s") and rows[5][4].endswith("s"), "time to first token"
    assert_no_key(proc, proxy.master_key)


def _answers(url: str, key: str) -> tuple:
    """What a proxy at ``url`` answers to its readiness, model list and a chat on gen-small."""
    def ask(path, body=None):
        request = urllib.request.Request(url + path, data=body and json.dumps(body).encode(),
                                         headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())

    readiness = ask("/health/readiness")
    models = ask("/v1/models")[1]["data"]
    chat_status, chat = ask("/v1/chat/completions", {
        "model": "gen-small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})
    return readiness, sorted(model["id"] for model in models), chat_status, sorted(chat), chat["model"]


def test_a_launched_proxy_answers_as_the_command_started_one(gateway, tmp_path):
    """The tests' proxies are forked by a launcher that did LiteLLM's imports once
    (support/litellm_launcher.py). The `litellm` command, started as an operator starts it on
    the same config, answers the same, and ends the same way."""
    proxy = gateway["proxy"]
    plain_url = "http://127.0.0.1:%d" % free_port()
    with open(tmp_path / "plain.log", "w") as log:
        plain = subprocess.Popen([str(gateway["litellm_bin"]), "--config", str(proxy.config_path), "--host",
                                  "127.0.0.1", "--port", plain_url.rsplit(":", 1)[1]], stdout=log,
                                 stderr=subprocess.STDOUT, env=dict(os.environ, **support_litellm.PROXY_ENV))
    launched = LiteLLMProxy(gateway["litellm_bin"], proxy.config_path, proxy.master_key)
    try:
        wait_until(lambda: urllib.request.urlopen(plain_url + "/health/readiness", timeout=2),
                   "the litellm command", plain, tmp_path / "plain.log")
        answers = _answers(plain_url, proxy.master_key)
        assert answers[1] and answers[2] == 200, answers
        assert _answers(launched.url, proxy.master_key) == answers
    finally:
        stop(plain)
        stop(launched.proc)
    assert launched.proc.returncode == plain.returncode, (launched.proc.returncode, plain.returncode)


def test_every_check_passes_directly_on_the_seat(gateway):
    routes = [{"model": "gen-small", "checks": ["chat", "stream", "tools"]},
              {"model": "gen-small", "checks": ["reasoning"],
               "extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}]
    proc = smoke(gateway["tmp"], gateway["twin"].urls["gen-small"], routes, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table_rows(proc.stdout)
    assert [row[2] for row in rows] == ["ok"] * 4, proc.stdout
    assert rows[3][1] == "reasoning" and rows[3][5] == "reasoning", \
        "vLLM's own key, straight from the seat"


def test_seat_key_is_sent_directly_and_never_printed(gateway):
    url = gateway["twin"].urls["keyed"]
    routes = [{"model": "keyed", "checks": ["chat"]}]
    good = smoke(gateway["tmp"], url, routes, SEAT_KEY)
    assert good.returncode == 0, good.stdout
    wrong = smoke(gateway["tmp"], url, routes, SEAT_KEY[::-1])
    assert wrong.returncode != 0
    assert "route keyed, check chat: HTTP 401: Unauthorized (the api_key was rejected)" \
        in wrong.stdout, wrong.stdout
    assert_no_key(good, SEAT_KEY)
    assert_no_key(wrong, SEAT_KEY[::-1])


# ---------------------------------------------------------------------------------------------
# broken contracts
# ---------------------------------------------------------------------------------------------

BROKEN = [
    ("reasoning in content", "raw-thinker", "reasoning",
     "route raw-thinker, check reasoning: reasoning arrived inline in content (<think>, </think>):"
     " the seat needs --reasoning-parser"),
    ("missing tool parser", "no-tools", "tools",
     'route no-tools, check tools: HTTP 400: litellm.BadRequestError: Hosted_vllmException -'
     ' "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
    ("channel marker after the tool result", "char-rp", "tools",
     "route char-rp, check tools: the turn after the tool result leaks <|channel>, <channel|>"
     " into content (the seat needs --reasoning-parser)"),
    ("dead route", "dead-seat", "chat",
     "route dead-seat, check chat: HTTP 500: litellm.InternalServerError"),
]


@pytest.mark.parametrize("contract, route, check, says", BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_contract_fails_through_the_gateway(gateway, contract, route, check, says):
    proxy = gateway["proxy"]
    proc = smoke(gateway["tmp"], proxy.url, [{"model": route, "checks": [check]}],
                 proxy.master_key)
    assert proc.returncode != 0, contract
    assert says in proc.stdout, proc.stdout
    assert [row[:3] for row in table_rows(proc.stdout)] == [(route, check, "FAIL")], \
        "the contract table is printed on failure too"
    assert_no_key(proc, proxy.master_key)


@pytest.mark.parametrize("seat, served, check, says", [
    ("no-reasoning-parser", "raw-thinker", "reasoning",
     "reasoning arrived inline in content (<think>, </think>)"),
    ("no-tool-parser", "no-tools", "tools",
     'HTTP 400: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
     " to be set (the seat needs --enable-auto-tool-choice and --tool-call-parser)"),
    ("char-rp", "char-rp", "tools", "leaks <|channel>, <channel|> into content"),
    ("dead", "dead", "stream", "cannot reach http://127.0.0.1:"),
], ids=["reasoning in content", "missing tool parser", "channel marker after the tool result",
        "dead seat"])
def test_each_broken_contract_fails_directly_on_the_seat(gateway, seat, served, check, says):
    proc = smoke(gateway["tmp"], gateway["twin"].urls[seat], [{"model": served,
                                                               "checks": [check]}], None)
    assert proc.returncode != 0
    assert "route %s, check %s: " % (served, check) in proc.stdout
    assert says in proc.stdout, proc.stdout


def test_dead_route_says_the_gateway_cannot_reach_the_seat(gateway):
    proxy = gateway["proxy"]
    proc = smoke(gateway["tmp"], proxy.url, [{"model": "dead-seat", "checks": ["stream"]}],
                 proxy.master_key)
    assert proc.returncode != 0
    assert "(the gateway cannot reach the seat behind this route)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("wrong_key", ["sk-llmfleet-wrong-key-0123456789WQZX", "not-a-virtual-key-9876-ZQXW"])
def test_wrong_key_fails_and_is_never_printed(gateway, wrong_key):
    proxy = gateway["proxy"]
    proc = smoke(gateway["tmp"], proxy.url, [{"model": "gen-small", "checks": ["chat"]}],
                 wrong_key, "-vvv")
    assert proc.returncode != 0
    assert "api_key: VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in proc.stdout, "-vvv shows the args"
    # LiteLLM without a database answers every key but the master key with 400 "No connected db."
    assert "route gen-small, check chat: HTTP 400: No connected db. (the api_key was rejected)" \
        in proc.stdout, proc.stdout
    assert_no_key(proc, wrong_key)


def test_check_mode_still_probes(gateway):
    proxy = gateway["proxy"]
    proc = smoke(gateway["tmp"], proxy.url, [{"model": "raw-thinker", "checks": ["reasoning"]}],
                 proxy.master_key, "--check")
    assert proc.returncode != 0, "a dry run must not call a broken route fine"
    assert "route raw-thinker, check reasoning: reasoning arrived inline" in proc.stdout


# ---------------------------------------------------------------------------------------------
# the route audit against the proxy's own config
# ---------------------------------------------------------------------------------------------

def test_stale_pass_through_target_is_caught_and_repointed(gateway, tmp_path):
    proxy, judge, twin = gateway["proxy"], gateway["judge"], gateway["twin"]
    old_port = gateway["old_judge_port"]
    # What a client of the stale route sees:
    status, body = proxy.post("/judge/score", {"text": "x"})
    assert status == 500 and "Cannot connect to host 127.0.0.1:%d" % old_port in body

    config = tmp_path / "config.yaml"
    config.write_text(proxy.config_path.read_text())
    seats = [{"name": name, "host": "127.0.0.1", "port": int(url.rsplit(":", 1)[1]),
              "served_model_names": SEATS[name][1]} for name, url in twin.urls.items()]
    seats.append({"name": "scalar-judge", "host": "127.0.0.1", "port": judge.port,
                  "previous_port": old_port})
    args = {"path": str(config), "seats": seats, "rewrite": True, "backup_tag": "move"}

    def routes_module(*options, **overrides):
        return run_ansible(["ansible", "localhost", "-c", "local", "-m",
                            "llmfleet.seats.gateway_routes", "-a",
                            json.dumps(dict(args, **overrides)), *options])

    audit = routes_module("--check", "--diff", rewrite=False)
    assert audit.returncode != 0
    assert ("line 33 pass_through_endpoints[0] (/judge/score) target http://127.0.0.1:%d/score:"
            " moved - seat scalar-judge moved from 127.0.0.1:%d to 127.0.0.1:%d"
            % (old_port, old_port, judge.port)) in audit.stdout, audit.stdout
    assert "1 gateway target(s) do not point at their seat" in audit.stdout, \
        "every api_base points at its seat; the dead seat is still listed at its address"

    dry = routes_module("--check", "--diff")
    assert dry.returncode == 0, dry.stdout
    assert "-      target: http://127.0.0.1:%d/score" % old_port in dry.stdout
    assert "+      target: http://127.0.0.1:%d/score" % judge.port in dry.stdout
    assert config.read_text() == proxy.config_path.read_text(), "check mode wrote nothing"

    fixed = routes_module()
    assert fixed.returncode == 0 and "CHANGED" in fixed.stdout, fixed.stdout
    assert (tmp_path / ("config.yaml.bak-%s-move" % time.strftime("%Y%m%d"))).read_text() \
        == proxy.config_path.read_text()
    assert config.read_text() == proxy.config_path.read_text().replace(
        "target: http://127.0.0.1:%d/score" % old_port,
        "target: http://127.0.0.1:%d/score" % judge.port)
    again = routes_module()
    assert again.returncode == 0 and "CHANGED" not in again.stdout, again.stdout

    # The real gateway, started from the repointed file, reaches the judge.
    repointed = LiteLLMProxy(gateway["litellm_bin"], config, proxy.master_key)
    try:
        judge.queue_reply(200, '{"score": 0.75}')
        assert repointed.post("/judge/score", {"text": "x"}) == (200, '{"score": 0.75}')
    finally:
        stop(repointed.proc)
