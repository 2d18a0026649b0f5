"""llmfleet.seats.kv_budget and the KV filters through the real `ansible` command, against the
8 GiB vectors of the KV unit tests (tests/unit/plugins/module_utils/_sizing/test_kv_sizing.py)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO_ROOT, run_ansible

FIXTURES = REPO_ROOT / "tests" / "unit" / "fixtures" / "model_configs"


def adhoc(module, args, *options):
    """`ansible localhost [OPTIONS] -m MODULE -a ARGS`, parsed with the json callback."""
    proc = run_ansible(["ansible", "localhost", *options, "-m", module, "-a", args],
                       extra_env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                                  "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    plays = json.loads(proc.stdout)["plays"]
    return proc.returncode, plays[0]["tasks"][0]["hosts"]["localhost"]


def kv_budget(*args):
    return adhoc("llmfleet.seats.kv_budget", " ".join(args))


@pytest.mark.parametrize("model, dtype, length, tokens, concurrency", [
    ("qwen3-8b", "auto", 32768, 58240, 1.78),
    ("gpt-oss-20b", "fp8", 131072, 620762, 4.74),
    ("gemma-3-27b-it", "fp8", 32768, 50045, 1.53),
    ("deepseek-v2-lite", "fp8", 32768, 552320, 16.86),
])
def test_ad_hoc_run_reproduces_the_reference_vectors(model, dtype, length, tokens, concurrency):
    rc, result = kv_budget("model_config_path=%s" % (FIXTURES / (model + ".json")),
                           "max_model_len=%d" % length, "kv_cache_memory_bytes=8G",
                           "kv_cache_dtype=%s" % dtype)
    assert rc == 0, result
    assert (result["kv_cache_tokens"], result["max_concurrency"]) == (tokens, concurrency)
    assert result["boot_ok"] is True and result["changed"] is False


def test_ad_hoc_run_reports_vllms_refusal():
    rc, result = kv_budget("model_config_path=%s" % (FIXTURES / "qwen3-next-80b-a3b.json"),
                           "max_model_len=32768", "kv_cache_memory_bytes=8G")
    assert rc == 0
    assert result["boot_ok"] is False
    assert result["boot_error"].startswith("max_num_seqs (1024) exceeds available Mamba cache "
                                           "blocks (606).")


def test_ad_hoc_sizing_in_check_mode():
    rc, result = adhoc("llmfleet.seats.kv_budget", "model_config_path=%s max_model_len=published"
                       % (FIXTURES / "qwen3-8b.json"), "--check")
    assert rc == 0, result
    assert result["kv_cache_memory_bytes"] == 8053063680 and result["changed"] is False
    assert result["vllm_args"] == ["--kv-cache-memory-bytes", "8053063680", "--max-model-len",
                                   "40960"]


def test_bad_input_is_one_clear_failure():
    rc, result = kv_budget("model_config_path=/nonexistent/config.json", "max_model_len=4096",
                           "seat=gen-small")
    assert rc != 0
    assert result["msg"] == ("seat gen-small: model config /nonexistent/config.json: cannot "
                             "read it (No such file or directory)")
    assert "Traceback" not in json.dumps(result)


def test_filters_render_in_a_real_run():
    template = ("{{ '%s' | llmfleet.seats.kv_cache_tokens(32768, '8G') }} "
                "{{ '%s' | llmfleet.seats.kv_cache_bytes('published') "
                "| llmfleet.seats.human_bytes }} {{ '5.5GiB' | llmfleet.seats.to_bytes }}"
                % (FIXTURES / "qwen3-8b.json", FIXTURES / "qwen3-8b.json"))
    rc, result = adhoc("ansible.builtin.debug", "msg=\"%s\"" % template)
    assert rc == 0, result
    assert result["msg"] == "58240 7.5 GiB 5905580032"


def test_ansible_doc_renders_the_module_and_filters():
    module = run_ansible(["ansible-doc", "llmfleet.seats.kv_budget"])
    assert module.returncode == 0 and "kv_cache_memory_bytes" in module.stdout
    names = ["llmfleet.seats.%s" % name for name in ("kv_cache_tokens", "kv_cache_bytes", "kv_budget", "to_bytes",
                                                     "human_bytes", "published_max_model_len")]
    filters = run_ansible(["ansible-doc", "-t", "filter", *names])
    assert filters.returncode == 0, filters.stderr
    # each filter's page starts with its own name
    assert [line.split()[2] for line in filters.stdout.splitlines() if line.startswith("> FILTER ")] == names
