"""What a host says is data: the host_vars adopt writes are loaded by Ansible's own inventory
loader and templated as a play would, and nothing a host put in a command line, a label, an
environment, a name or a mount runs on the controller (at any depth, keys too); secrets on a
command line never reach the result; only a model's own config.json inside what the container
mounts is copied; the GPU profile comes from the cards' names."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from pathlib import Path

import pytest

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

from conftest import REPO_ROOT, VENV_BIN, ansible_env

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.host_vars_file import Template, dump
from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.inventory import AdoptError, adopted_inventory
from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.read import (
    CONFIG_LIMIT,
    container_record,
    model_files,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import MANAGED_LABEL, SECRET_NAME_RE
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import PlanError, build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.card_profiles import CARD_NAMES, profile_of_card
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import GPU_PROFILES

CONFIGS = Path(__file__).resolve().parents[4] / "unit" / "fixtures" / "model_configs"
NOW = datetime.datetime(2026, 12, 1, 20, 0, tzinfo=datetime.timezone.utc)
GPU0 = "GPU-bbbb0000-0000-4000-8000-000000000000"


def _pwn(marker):
    """A template that creates ``marker`` on the controller if anything ever renders it."""
    return "{{ lookup(\"pipe\", \"touch %s\") }}" % marker


def _inspect(name, args, env=(), labels=None, mounts=(), image="vllm/vllm-openai:v0.33.0"):
    return {
        "Id": "c" * 64, "Name": "/" + name, "Image": "sha256:img", "Path": args[0], "Args": args[1:],
        "State": {"Running": True, "StartedAt": "2026-12-01T19:00:00Z"},
        "Config": {"Image": image, "Env": list(env), "Labels": labels or {}},
        "HostConfig": {"PortBindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8201"}]},
                       "NetworkMode": "bridge", "RestartPolicy": {"Name": "always"},
                       "DeviceRequests": [{"Driver": "nvidia", "DeviceIDs": [GPU0], "Capabilities": [["gpu"]]}]},
        "Mounts": [{"Type": "bind", "Source": s, "Destination": d, "RW": False} for s, d in mounts],
    }


def _cards(name="NVIDIA H100 80GB HBM3", count=1):
    return {"source": "nvml", "gpus": [
        {"index": index, "uuid": GPU0 if index == 0 else "GPU-bbbb0000-0000-4000-8000-00000000000%d" % index,
         "name": name if isinstance(name, str) else name[index], "memory_total_mib": 81559, "processes": []}
        for index in range(count)]}


def _hostile(tmp_path, marker):
    """A container whose every part a host controls holds a template, at every depth."""
    pwn = _pwn(marker)
    kwargs = {"a": {"b": pwn, pwn: [{"c": [pwn]}]}, "enable_thinking": False}
    generation = {"max_new_tokens": [[pwn, {"d": pwn}]]}
    args = ["vllm", "serve", "/srv/models/m", "--served-model-name", "chat",
            "--default-chat-template-kwargs", json.dumps(kwargs),
            "--override-generation-config", json.dumps(generation), "--trust-remote-code", pwn]
    source = str(tmp_path / ("models" + pwn.replace("/", "_")))
    return _inspect("chat" + pwn.replace(" ", "").replace("/", "_"), args,
                    env=["GREETING=" + pwn, "LIST=[%s]" % pwn],
                    labels={"com.docker.compose.service": "chat" + pwn, "com.docker.compose.project": pwn},
                    mounts=[(source, "/srv/models" + pwn)], image="vllm/vllm-openai:v0.33.0" + pwn)


def _write_inventory(tmp_path, adopted):
    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("gpu_hosts:\n  hosts:\n    gpu7:\n")
    (inventory / "host_vars" / "gpu7.yml").write_text(adopted["host_vars_text"])
    return inventory


def _templated_host_vars(inventory, extra=None):
    """Every variable of gpu7 as a play sees it: loaded by Ansible's inventory loader, then
    templated (recursively, as a task's arguments are)."""
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory / "hosts.yml")])
    variables = VariableManager(loader=loader, inventory=manager).get_vars(host=manager.get_host("gpu7"))
    variables.update(extra or {})
    templar = Templar(loader=loader, variables=variables)
    return {name: templar.template(variables[name]) for name in variables if name.startswith("llmfleet_")}


def test_nothing_a_host_says_runs_on_the_controller_at_any_depth(tmp_path):
    marker = tmp_path / "PWN"
    record = container_record(_hostile(tmp_path, marker), {}, NOW)
    adopted = adopted_inventory("gpu7", [record], _cards(), now=NOW)
    seat = adopted["host_vars"]["llmfleet_seats"][0]
    assert seat["default_chat_template_kwargs"]["a"]["b"] == _pwn(marker), "kept as the seat ran it"
    assert seat["max_new_tokens"] == [[_pwn(marker), {"d": _pwn(marker)}]]
    seen = _templated_host_vars(_write_inventory(tmp_path, adopted))
    assert not marker.exists(), "a host's text ran on the controller"
    templated = seen["llmfleet_seats"][0]
    assert templated["default_chat_template_kwargs"] == seat["default_chat_template_kwargs"], "data, as it was"
    assert templated["environment"] == {"GREETING": _pwn(marker), "LIST": "[%s]" % _pwn(marker)}
    assert templated["volumes"] == seat["volumes"] and templated["image"] == seat["image"]
    assert templated["extra_args"] == ["--trust-remote-code", _pwn(marker)]
    assert any(": default_chat_template_kwargs.a key {{ lookup(" in note and "written !unsafe (kept as text, never "
               "templated)" in note for note in adopted["notes"])


def test_the_same_text_written_plainly_would_run(tmp_path):
    """The check above can fail: without !unsafe the loader hands the template to the play."""
    marker = tmp_path / "PWN"
    inventory = _write_inventory(tmp_path, {"host_vars_text": "llmfleet_seats:\n  - a:\n      - %s\n"
                                            % json.dumps(_pwn(marker))})
    _templated_host_vars(inventory)
    assert marker.exists()


def test_the_references_adopt_makes_stay_templates(tmp_path):
    record = container_record(_inspect("chat", ["vllm", "serve", "/srv/models/m", "--api-key", "sk-live-0451"],
                                       env=["HF_TOKEN=hf_live_0451"]), {}, NOW)
    adopted = adopted_inventory("gpu7", [record], _cards(), now=NOW)
    assert "0451" not in json.dumps(adopted), "a secret reached what adopt returns"
    seen = _templated_host_vars(_write_inventory(tmp_path, adopted),
                                {"vault_chat_hf_token": "from-vault", "vault_chat_api_key": "key-from-vault"})
    seat = seen["llmfleet_seats"][0]
    assert seat["secret_environment"] == {"HF_TOKEN": "from-vault"} and seat["api_key"] == "key-from-vault"
    assert "extra_args" not in seat
    assert "secrets stay on the host: put vault_chat_api_key (its --api-key); vault_chat_hf_token in vault" \
        in adopted["notes"]
    assert not any("api_key hold" in note for note in adopted["notes"]), "adopt's own reference is no host text"


def test_a_real_play_templates_the_written_inventory_and_runs_nothing(tmp_path):
    marker = tmp_path / "PWN"
    record = container_record(_hostile(tmp_path, marker), {}, NOW)
    inventory = _write_inventory(tmp_path, adopted_inventory("gpu7", [record], _cards(), now=NOW))
    play = tmp_path / "show.yml"
    play.write_text("- hosts: gpu_hosts\n  gather_facts: false\n  connection: local\n  tasks:\n"
                    "    - ansible.builtin.copy:\n        content: '{{ llmfleet_seats | to_json }}'\n"
                    "        dest: '%s'\n      delegate_to: localhost\n" % (tmp_path / "seen.json"))
    run = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory / "hosts.yml"), str(play)],
                         cwd=REPO_ROOT, env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert not marker.exists()
    assert json.loads((tmp_path / "seen.json").read_text())[0]["environment"]["GREETING"] == _pwn(marker)


@pytest.mark.parametrize("value", [
    "plain", "", "{{ x }}", "{% if %}", "a\nb\tc\r", "quote \" and \\ back", "\x00\x07\x1b\x7f\x85\u2028\ufeff",
    "caf\u00e9 \U0001f600", "yes", "null", "- x", "#", ": x", "!unsafe", "@x", "`x`", "*a", "&a", "%x", "|", ">",
])
def test_every_string_reads_back_as_it_was(value):
    document = {"k": value, value: [value, {value: value}], "n": [1, 2.5, True, None, [], {}]}
    loaded = DataLoader().load(dump(document))
    assert loaded == document


def test_only_a_template_adopt_made_is_written_as_one():
    text = dump({"secret": Template("{{ vault_x }}"), "said": "{{ vault_x }}"})
    assert text == 'secret: "{{ vault_x }}"\nsaid: !unsafe "{{ vault_x }}"\n'


def test_a_host_name_that_is_not_one_is_refused():
    with pytest.raises(AdoptError, match="host 'gpu7\\\\nx: 1': expected a host name"):
        adopted_inventory("gpu7\nx: 1", [], _cards())


# -- secrets by name ------------------------------------------------------------------------------
@pytest.mark.parametrize("name, secret", [
    ("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("API_KEY", True), ("OPENAI_API_KEY", True),
    ("VLLM_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("DB_PASSWORD", True), ("MYSQL_PWD", True),
    ("hf_token", True), ("APIKEY", True), ("GOOGLE_APPLICATION_CREDENTIALS", True), ("BASIC_AUTH", True),
    ("api-key", True), ("hf-token", True), ("my.secret", True),
    ("TOKENIZERS_PARALLELISM", False), ("KEYBOARD", False), ("MONKEY_PATCH", False), ("AUTHOR", False),
    ("MAX_NUM_BATCHED_TOKENS", False), ("max-num-batched-tokens", False), ("TOKENIZER", False),
    ("PASSTHROUGH", False), ("SECRETARY", False), ("VLLM_LOGGING_LEVEL", False), ("HF_HOME", False),
])
def test_a_secret_is_named_by_a_whole_word(name, secret):
    assert (SECRET_NAME_RE.search(name) is not None) == secret


def test_a_secret_on_the_command_line_never_leaves_the_host():
    args = ["vllm", "serve", "/m", "--api-key", "sk-1", "--hf-token=hf-2", "--max-num-batched-tokens", "4096",
            "--tokenizer", "/t"]
    record = container_record(_inspect("chat", args, env=["TOKENIZERS_PARALLELISM=false", "OPENAI_API_KEY=sk-3"]),
                              {}, NOW)
    assert record["args"] == ["vllm", "serve", "/m", "--api-key", "<secret>", "--hf-token=<secret>",
                              "--max-num-batched-tokens", "4096", "--tokenizer", "/t"]
    assert record["environment"] == {"TOKENIZERS_PARALLELISM": "false"}
    assert record["secret_environment"] == ["OPENAI_API_KEY"]
    adopted = adopted_inventory("gpu7", [record], _cards(), now=NOW)
    seat = adopted["host_vars"]["llmfleet_seats"][0]
    assert seat["extra_args"] == ["--tokenizer", "/t"] and seat["max_num_batched_tokens"] == 4096
    assert seat["api_key"] == "{{ vault_chat_api_key }}"
    assert "seat chat: --hf-token carries a secret on its command line; left out: give it to the seat as a " \
           "secret_environment variable" in adopted["notes"]


# -- files copied from the host -----------------------------------------------------------------
def _model_dir(root, name="m", config=None):
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(config if config is not None else (CONFIGS / "qwen3-8b.json").read_text())
    return directory


def test_a_model_config_inside_its_mount_is_read(tmp_path):
    _model_dir(tmp_path / "models")
    found = model_files("/mm/m", {}, [{"source": str(tmp_path / "models"), "destination": "/mm"}])
    assert found["problem"] is None and found["model_config"]["model_type"] == "qwen3"


def test_a_path_that_climbs_out_of_its_mount_is_not_followed(tmp_path):
    _model_dir(tmp_path, "creds2", config='{"model_type": "x", "password": "hunter2"}')
    (tmp_path / "models").mkdir()
    found = model_files("/mm/../creds2", {}, [{"source": str(tmp_path / "models"), "destination": "/mm"}])
    assert found["model_config"] is None and found["model_dir"] is None
    assert found["problem"] == "/mm/../creds2 climbs out of its directory (..); not followed"


def test_a_link_out_of_the_mount_is_not_followed(tmp_path):
    outside = _model_dir(tmp_path, "outside")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m").symlink_to(outside)
    mounts = [{"source": str(tmp_path / "models"), "destination": "/mm"}]
    found = model_files("/mm/m", {}, mounts)
    assert found["model_config"] is None and "leads out of its mount" in found["problem"]
    inside = tmp_path / "models" / "n"
    inside.mkdir()
    (inside / "config.json").symlink_to(outside / "config.json")
    found = model_files("/mm/n", {}, mounts)
    assert found["model_config"] is None and "a link out of its mount" in found["problem"]


@pytest.mark.parametrize("config, why", [
    ('{"hidden_size": 1}', "not a model config (a JSON object with model_type or architectures)"),
    ('["model_type"]', "not a model config (a JSON object with model_type or architectures)"),
    ("not json", "not a model config (Expecting value"),
    ('{"model_type": "x", "pad": "%s"}' % ("x" * CONFIG_LIMIT), "over the %d a model config may have" % CONFIG_LIMIT),
    ('{"model_type": "x", "a": %s1%s}' % ("[" * 40, "]" * 40), "nested deeper than 32 levels"),
    ('{"model_type": "x", "a": %s1%s}' % ("[" * 100000, "]" * 100000), "nested deeper than a model config"),
])
def test_what_is_not_a_model_config_is_skipped_and_said(tmp_path, config, why):
    _model_dir(tmp_path / "models", config=config)
    found = model_files("/mm/m", {}, [{"source": str(tmp_path / "models"), "destination": "/mm"}])
    assert found["model_config"] is None and why in found["problem"]


def test_a_device_is_never_read(tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    os.mkfifo(tmp_path / "models" / "m" / "config.json")
    found = model_files("/mm/m", {}, [{"source": str(tmp_path / "models"), "destination": "/mm"}])
    assert "not a regular file" in found["problem"]


def _climbing(tmp_path):
    _model_dir(tmp_path, "creds2")
    return "/mm/../creds2", "/mm/../creds2 climbs out of its directory (..); not followed"


def _linked_out(tmp_path):
    (tmp_path / "models" / "m").symlink_to(_model_dir(tmp_path, "outside"))
    return "/mm/m", "/mm/m leads out of its mount (a link to %s); not followed" % (tmp_path / "outside")


def _oversized(tmp_path):
    _model_dir(tmp_path / "models", config='{"model_type": "x", "pad": "%s"}' % ("x" * CONFIG_LIMIT))
    return "/mm/m", "over the %d a model config may have); skipped" % CONFIG_LIMIT


def _not_a_config(tmp_path):
    _model_dir(tmp_path / "models", config='{"aws_secret_access_key": "x"}')
    return "/mm/m", "is not a model config (a JSON object with model_type or architectures); skipped"


def _an_inventory_group(tmp_path):
    # a JSON file is YAML: in an inventory folder given to Ansible whole, "all" is a group and its
    # vars are templated when the connection reads them
    _model_dir(tmp_path / "models", config=json.dumps({"model_type": "qwen3", "all": {"vars": {
        "ansible_ssh_common_args": "{{ lookup('pipe', 'touch /tmp/PWN') }}"}}}))
    return "/mm/m", "has a group of an Ansible inventory at its top (a mapping with vars, hosts or children)"


@pytest.mark.parametrize("case", [_climbing, _linked_out, _oversized, _not_a_config, _an_inventory_group])
def test_a_skipped_config_is_not_copied_and_the_notes_say_why(tmp_path, case):
    (tmp_path / "models").mkdir()
    model, why = case(tmp_path)
    record = container_record(_inspect("chat", ["vllm", "serve", model], mounts=[(str(tmp_path / "models"), "/mm")]),
                              {}, NOW)
    adopted = adopted_inventory("gpu7", [record], _cards(), now=NOW)
    assert adopted["files"] == {} and "model_config" not in adopted["host_vars"]["llmfleet_seats"][0]
    assert any(note.startswith("seat chat: model_config: ") and why in note and note.endswith(
        "; nothing copied: copy its config.json beside the inventory and name it") for note in adopted["notes"]), \
        adopted["notes"]


def test_a_hub_revision_that_climbs_is_refused(tmp_path):
    repo = tmp_path / "hf" / "hub" / "models--org--m"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("../../../../outside")
    _model_dir(tmp_path, "outside")
    found = model_files("org/m", {}, [{"source": str(tmp_path / "hf"), "destination": "/root/.cache/huggingface"}])
    assert found["model_config"] is None and found["problem"] == "org/m: its refs/main names no snapshot"


# -- the GPU profile ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, profile", [
    ("NVIDIA L40S", "l40s"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA B200", "b200"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx-pro-6000"),
    ("NVIDIA L40", None), ("NVIDIA GeForce RTX 4090", None), ("Tesla T4", None), (None, None),
])
def test_a_card_is_of_the_profile_its_name_says_or_of_none(name, profile):
    assert profile_of_card(name) == profile


def test_every_profile_the_sizing_knows_has_its_cards():
    assert {profile for profile, _pattern in CARD_NAMES} == set(GPU_PROFILES)
    assert all(profile_of_card(spec["name"]) == profile for profile, spec in GPU_PROFILES.items())


def test_adopt_writes_the_profile_of_the_cards_or_says_why_not():
    assert adopted_inventory("gpu7", [], _cards("NVIDIA L40S", 2))["host_vars"]["llmfleet_gpu_profile"] == "l40s"
    unknown = adopted_inventory("gpu7", [], _cards("NVIDIA L40", 1))
    assert "llmfleet_gpu_profile" not in unknown["host_vars"]
    assert unknown["notes"][0].startswith("GPU 0 (NVIDIA L40): not a card the sizing has a profile for (")
    mixed = adopted_inventory("gpu7", [], _cards(["NVIDIA L40S", "NVIDIA H100 PCIe"], 2))
    assert "llmfleet_gpu_profile" not in mixed["host_vars"]
    assert "the cards are of different profiles (h100: GPU 1; l40s: GPU 0): llmfleet_gpu_profile left unset; set " \
           "the one the plan sizes every seat by" in mixed["notes"]


# -- seats the collection runs already --------------------------------------------------------------
def test_a_managed_seat_is_said_to_be_managed_and_nothing_else(tmp_path):
    labels = {MANAGED_LABEL: "chat", "com.docker.compose.project": "chat", "com.docker.compose.service": "chat"}
    record = container_record(_inspect("chat-chat-1", ["vllm", "serve", "/m", "--kv-cache-memory-bytes", "4G"],
                                       labels=labels), {}, NOW)
    record["systemd_unit"] = None
    adopted = adopted_inventory("gpu7", [record], _cards(), now=NOW)
    notes = adopted["notes"]
    assert "container_name" not in adopted["host_vars"]["llmfleet_seats"][0], "the collection names its own"
    assert "seat chat: already run by this collection (its container chat-chat-1 is seat chat): adopted as it " \
           "runs, nothing to stop or take over" in notes
    assert not any("docker compose -p" in note or "systemctl disable" in note or "ran with" in note for note in notes)


def test_the_plan_refuses_a_profile_the_cards_contradict_unless_accepted():
    gpus = [{"index": 0, "uuid": GPU0, "name": "NVIDIA L40S", "memory_total_mib": 46068}]
    seats = [{"name": "asr", "engine": "fixed", "image": "asr@sha256:" + "a" * 64, "port": 8090,
              "memory_cap_bytes": "4GiB", "gpu": 0}]
    cards = {"source": "nvml", "gpus": [dict(gpus[0], memory_used_mib=0, memory_free_mib=46068, processes=[])]}
    assert build_plan("gpu7", gpus, seats, cards=cards, gpu_profile="l40s")["seats"][0]["name"] == "asr"
    with pytest.raises(PlanError, match="llmfleet_gpu_profile: h100, but GPU 0 is an NVIDIA L40S, whose profile "
                                        "is l40s; expected llmfleet_gpu_profile: l40s, or "
                                        "llmfleet_plan_accept.gpu_profile: h100 to size by h100 on purpose"):
        build_plan("gpu7", gpus, seats, cards=cards, gpu_profile="h100")
    assert build_plan("gpu7", gpus, seats, cards=cards, gpu_profile="h100", accept={"gpu_profile": "h100"})["seats"]
    unknown = [dict(gpus[0], name="NVIDIA L40")]
    assert build_plan("gpu7", unknown, seats, gpu_profile="h100")["seats"], "a card of no profile is not judged"


def test_a_field_nested_without_bound_is_left_out_with_a_note():
    deep = "[" * 500 + "1" + "]" * 500
    record = container_record(_inspect("chat", ["vllm", "serve", "/m", "--default-chat-template-kwargs",
                                                '{"a": %s}' % deep]), {}, NOW)
    adopted = adopted_inventory("gpu7", [record], _cards(), now=NOW)
    assert "default_chat_template_kwargs" not in adopted["host_vars"]["llmfleet_seats"][0]
    assert "seat chat: default_chat_template_kwargs nests deeper than 16 levels; left out: set it by hand" \
        in adopted["notes"]
