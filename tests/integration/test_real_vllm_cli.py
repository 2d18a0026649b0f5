"""Every flag the collection renders for a vLLM 0.32 seat, parsed by the real ``vllm serve``.

The seat's files are rendered by each runtime as a window writes them; the command line is then
read back the way the runtime hands it to the container (``docker compose config`` resolves the
compose project with its .env; serve.sh is run with its seat.env and a docker that records its
arguments). The real engine's own parser, its serve-argument checks, the API server's parser
checks and the engine configuration it builds (which reads the model) judge the result.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import release_flags, release_parsers
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, systemd
from conftest import REPO_ROOT
from support.need import need_root_and
from support.real_vllm import ENGINE_ENV, GQA_MODEL, real_vllm_python, tiny_model

pytestmark = [pytest.mark.realengine, pytest.mark.slow]

PARSER = REPO_ROOT / "tests" / "realengine" / "parse_serve_args.py"
IMAGE = "llmfleet/vllm-cpu:0.32.0"


def _seat(model, **launch):
    """A plan seat using every flag the collection renders for vLLM."""
    return {
        "name": "chat", "engine": "vllm", "port": 8011, "container": "vllm-chat",
        "gpus": ["GPU-6c1f2f2e-0d0b-4c59-9d3e-1a2b3c4d5e01"], "health_path": "/health",
        "max_model_len": 2048, "kv_cache_memory_bytes": 64 << 20, "gpu_memory_utilization": 0.12,
        "launch": dict({
            "image": IMAGE, "model": str(model), "served_model_names": ["chat", "chat-large", "it's $HOME"],
            "tensor_parallel_size": 1, "kv_cache_dtype": "fp8", "block_size": 64, "max_num_seqs": 32,
            "max_num_batched_tokens": 4096, "tool_call_parser": "hermes", "reasoning_parser": "qwen3",
            "default_chat_template_kwargs": {"enable_thinking": False, "nested": {"a": [1, "two"]}},
            "max_new_tokens": 1024, "extra_args": ["--disable-log-stats", "--seed=7"]}, **launch),
    }


def _compose_argv(seat, tmp_path):
    project = tmp_path / "compose"
    project.mkdir()
    for name, text in compose.render(seat, "host1").items():
        (project / name).write_text(text)
    resolved = subprocess.run(["docker", "compose", "--project-directory", str(project), "config",
                               "--format", "json"], capture_output=True, text=True, check=False)
    assert resolved.returncode == 0, resolved.stderr
    services = json.loads(resolved.stdout)["services"]
    (service,) = services.values()
    # compose prints a literal "$" escaped as "$$"; the container gets one
    return [arg.replace("$$", "$") for arg in service["command"]]


def _systemd_argv(seat, tmp_path):
    project = tmp_path / "systemd" / seat["name"]  # a seat's directory is named after it
    project.mkdir(parents=True)
    files = systemd.render(seat, "host1", project_dir=str(project))
    for name, text in files.items():
        (project / name).write_text(text)
    stub = tmp_path / "bin" / "docker"
    stub.parent.mkdir()
    record = tmp_path / "docker-argv.json"
    stub.write_text("#!/usr/bin/env python3\nimport json, sys\njson.dump(sys.argv[1:], open(%r, 'w'))\n"
                    % str(record))
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": "%s:%s" % (stub.parent, os.environ["PATH"])}
    # seat.env as systemd's EnvironmentFile reads it: NAME=value lines, values shell-quoted
    for line in (project / systemd.ENV_FILE).read_text().splitlines():
        if line and not line.startswith("#"):
            name, _equals, value = line.partition("=")
            env[name] = shlex.split(value)[0] if value else ""
    ran = subprocess.run(["sh", str(project / systemd.SERVE_FILE)], env=env, capture_output=True,
                         text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    argv = json.loads(record.read_text())
    return argv[argv.index(IMAGE) + 1:]


def _parse(*requests):
    """The real parser's answers to ``requests`` ("--flags", "--parsers" or a list of command
    lines), in one run of the engine's python; one answer per request (a list per command-line list)."""
    proc = subprocess.run([str(real_vllm_python()), str(PARSER)]
                          + [request if isinstance(request, str) else json.dumps(request) for request in requests],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, **ENGINE_ENV))
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = iter(json.loads(line) for line in proc.stdout.splitlines() if line.startswith(("{", "[")))
    return [next(answers) if isinstance(request, str) else [next(answers) for _argv in request] for request in requests]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """The real parser's verdicts on the rendered command lines (and on two it must refuse), its
    flags and its parser names: one import of vLLM for the three tests."""
    need_root_and("docker")
    tmp_path = tmp_path_factory.mktemp("cli")
    model = tiny_model(GQA_MODEL)
    seat = _seat(model)
    compose_argv, systemd_argv = _compose_argv(seat, tmp_path), _systemd_argv(seat, tmp_path)
    # a flag 0.32 does not know and a parser it does not have: the same judge must refuse them
    unknown_flag = compose_argv + ["--no-such-flag"]
    (tmp_path / "bad").mkdir()
    unknown_parser = _compose_argv(_seat(model, tool_call_parser="no_such_parser"), tmp_path / "bad")
    verdicts, flags, parsers = _parse([compose_argv, unknown_flag, unknown_parser], "--flags", "--parsers")
    return {"compose": compose_argv, "systemd": systemd_argv, "verdicts": verdicts, "flags": flags, "parsers": parsers}


def test_every_rendered_flag_is_taken_by_the_real_vllm_serve_for_both_runtimes(judged):
    compose_argv = judged["compose"]
    assert compose_argv == judged["systemd"], "both runtimes hand the engine the same command line"
    for flag in ("--served-model-name", "--kv-cache-memory-bytes", "--max-num-seqs", "--enable-auto-tool-choice",
                 "--tool-call-parser", "--reasoning-parser", "--default-chat-template-kwargs",
                 "--override-generation-config", "--kv-cache-dtype", "--block-size", "--disable-log-stats"):
        assert flag in compose_argv, flag
    assert compose_argv[compose_argv.index("--served-model-name") + 3] == "it's $HOME"
    verdicts = judged["verdicts"]
    assert verdicts[0] == {"ok": True}, verdicts[0]
    assert not verdicts[1]["ok"] and "--no-such-flag" in verdicts[1]["error"], verdicts[1]
    assert not verdicts[2]["ok"] and "no_such_parser" in verdicts[2]["error"], verdicts[2]


def test_the_flags_read_from_0_32s_source_are_the_real_parsers(judged):
    """The table the plan checks every release's flags with is read from source; for 0.32 the real
    parser is there to say it reads right: the same flags, but for the ``--no-`` form argparse adds
    to each switch and its own ``--help``."""
    live = judged["flags"]
    table = release_flags("0.32.0")
    assert table <= set(live)
    assert {flag for flag in set(live) - table if not flag.startswith("--no-")} == {"-h", "--help"}
    assert all("--" + flag[5:] in table for flag in set(live) - table if flag.startswith("--no-"))


def test_the_parser_names_read_from_0_32s_source_are_the_real_registries(judged):
    """The names the plan accepts for --tool-call-parser and --reasoning-parser on 0.32 are the
    ones its API server's registries hold."""
    for field, names in judged["parsers"].items():
        assert release_parsers("0.32.0", field) == set(names), field
