"""Hostile and odd host inputs to adopt, one row each: a crafted container (as docker inspect
returns it, with whatever files its mounts hold) goes through adopt's own functions
(``container_record``, then ``adopted_inventory``), and the host_vars it writes are loaded by
Ansible's inventory loader and templated as a play would. For every row: nothing runs on the
controller, every value reads back as the host had it (data, never a template), no secret
appears in what adopt returns, and every note is one clean line; the row's note (or refusal)
names the seat or container and the field. Adding an input class is one row in CASES:
(name, edit of the container, the words its note or refusal must contain)."""

from __future__ import annotations

import datetime
import json
import os
import re

import pytest

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.inventory import AdoptError, adopted_inventory
from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.read import CONFIG_LIMIT, container_record

NOW = datetime.datetime(2026, 12, 1, 20, 0, tzinfo=datetime.timezone.utc)
GPU0 = "GPU-bbbb0000-0000-4000-8000-000000000000"
CARDS = {"source": "nvml", "gpus": [{"index": 0, "uuid": GPU0, "name": "NVIDIA H100 80GB HBM3",
                                     "memory_total_mib": 81559, "processes": []}]}
CONFIG = '{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096}'
# Secrets the rows carry: adopt's result and notes never show them.
TOKEN, KEY = "hf_corpusSECRET0451", "sk-corpusSECRET0451"
PWN = "{{ lookup('pipe', 'touch %s') }}"


def _container(mount_source):
    """A vLLM server the way docker inspect shows it, serving /srv/models/m from mount_source."""
    return {
        "Id": "c" * 64, "Name": "/chat", "Image": "sha256:img", "Path": "vllm",
        "Args": ["serve", "/srv/models/m", "--served-model-name", "chat", "--max-model-len", "8192"],
        "State": {"Running": True, "StartedAt": "2026-12-01T19:00:00Z"},
        "Config": {"Image": "vllm/vllm-openai:v0.33.0", "Env": [], "Labels": {}},
        "HostConfig": {"PortBindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8201"}]},
                       "NetworkMode": "bridge", "RestartPolicy": {"Name": "always"},
                       "DeviceRequests": [{"Driver": "nvidia", "DeviceIDs": [GPU0], "Capabilities": [["gpu"]]}]},
        "Mounts": [{"Type": "bind", "Source": str(mount_source), "Destination": "/srv/models", "RW": False}],
    }


def args(*extra):
    def edit(attrs, root, pwn):
        attrs["Args"] += [part.replace("PWN", pwn) for part in extra]
    return edit


def model(path):
    def edit(attrs, root, pwn):
        attrs["Args"][1] = path
    return edit


def env(*pairs):
    def edit(attrs, root, pwn):
        attrs["Config"]["Env"] += [pair.replace("PWN", pwn) for pair in pairs]
    return edit


def field(setter):
    def edit(attrs, root, pwn):
        setter(attrs, pwn)
    return edit


def config(text=None, make=None):
    """The served model's config.json: its text, or made by ``make(path, root)``."""
    def edit(attrs, root, pwn):
        path = root / "m" / "config.json"
        path.unlink()
        if make:
            make(path, root)
        else:
            path.write_text(text.replace("PWN", json.dumps(pwn)[1:-1]))
    return edit


def _link_out(path, root):
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(CONFIG)
    path.symlink_to(outside / "config.json")


def _deep(levels, leaf):
    return "%s%s%s" % ('{"a": ' * levels, leaf, "}" * levels)


CASES = [
    # command lines: a template anywhere, at any depth, keys too
    ("template as a positional argument", args("--trust-remote-code", "PWN"), "seat chat: extra_args[1] hold Jinja"),
    ("template as a flag's value", args("--tokenizer-mode", "PWN"), "seat chat: extra_args[1] hold Jinja"),
    ("template deep in a JSON flag", args("--default-chat-template-kwargs", json.dumps({"a": {"b": [{"c": "PWN"}]}})),
     "seat chat: default_chat_template_kwargs.a.b[0].c hold Jinja"),
    ("template as a JSON flag's key", args("--default-chat-template-kwargs", json.dumps({"PWN": 1})),
     "seat chat: default_chat_template_kwargs key {{ lookup("),
    ("template in the served name", args("--served-model-name", "PWN"), "seat chat: served_model_names"),
    ("JSON nested without bound", args("--default-chat-template-kwargs", _deep(40, '"PWN"')),
     "seat chat: default_chat_template_kwargs nests deeper than 16 levels; left out"),
    # secrets on a command line and in the environment
    ("--api-key and its value", args("--api-key", KEY), "vault_chat_api_key (its --api-key)"),
    ("--api-key=value", args("--api-key=" + KEY), "vault_chat_api_key (its --api-key)"),
    ("another secret flag", args("--hf-token", TOKEN), "seat chat: --hf-token carries a secret on its command line"),
    ("a secret variable", env("HF_TOKEN=" + TOKEN), "vault_chat_hf_token"),
    ("a secret variable whose name is no name", env("MY-TOKEN=" + TOKEN),
     "seat chat: a secret whose name is not a variable name (left out)"),
    # names, labels, environment, image and mounts the host chose
    ("template in an environment value", env("GREETING=PWN"), "seat chat: environment.GREETING hold Jinja"),
    ("template as an environment name", env("PWN=1"), "seat chat: environment key {{ lookup("),
    ("control characters in an environment value", env("BANNER=a\nb\x1b[2J"), None),
    ("template in the container name", field(lambda a, pwn: a.update(Name="/chat" + pwn)),
     ": container_name: its container's name is none docker gives"),
    ("control characters in the container name", field(lambda a, pwn: a.update(Name="/chat\n\x07x")),
     "seat chat-x: container_name: its container's name is none docker gives"),
    ("template in the compose service label",
     field(lambda a, pwn: a["Config"]["Labels"].update({"com.docker.compose.service": "chat" + pwn})),
     "seat chat-lookup-pipe-touch-"),  # the seat is named from it, in the seat grammar
    ("template in the compose project label",
     field(lambda a, pwn: a["Config"]["Labels"].update({"com.docker.compose.project": pwn})),
     "compose project {{ lookup("),
    ("template in the image", field(lambda a, pwn: a["Config"].update(Image="vllm/vllm-openai:v0.33.0" + pwn)),
     "seat chat: image hold Jinja"),
    ("template in a mount's destination", field(lambda a, pwn: a["Mounts"].append(
        {"Type": "bind", "Source": "/srv/cache", "Destination": "/cache" + pwn, "RW": True})),
     "seat chat: volumes[1] hold Jinja"),
    # the model's config.json: only a model config inside the mount is copied
    ("config path that climbs out of its mount", model("/srv/models/../../etc"),
     "seat chat: model_config: /srv/models/../../etc climbs out of its directory (..); not followed"),
    ("config dir outside every mount", model("/opt/m"), "seat chat: model_config: /opt/m is inside the image"),
    ("config.json a link out of the mount", config(make=_link_out), "seat chat: model_config: "),
    ("oversized config.json", config('{"model_type": "x", "pad": "%s"}' % ("x" * CONFIG_LIMIT)),
     "over the %d a model config may have" % CONFIG_LIMIT),
    ("config.json nested too deep", config('{"model_type": "x", "a": %s1%s}' % ("[" * 40, "]" * 40)),
     "nested deeper than 32 levels"),
    ("config.json not JSON", config("PWN"), "is not a model config"),
    ("config.json a pipe", config(make=lambda path, root: os.mkfifo(path)), "not a regular file"),
    ("config.json an inventory group", config('{"model_type": "x", "all": {"vars": {"x": "PWN"}}}'),
     "seat chat: model_config: the host's config.json has a group of an Ansible inventory"),
    ("template inside config.json", config('{"model_type": "qwen3", "architectures": ["PWN"]}'), None),
    ("hub id that climbs", model("../../etc/passwd"), "seat chat: model_config: ../../etc/passwd is neither a path"),
]


def _templated(tmp_path, adopted):
    """gpu7's llmfleet_ variables as a play sees them, adopt's vault references given values."""
    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("gpu_hosts:\n  hosts:\n    gpu7:\n")
    (inventory / "host_vars" / "gpu7.yml").write_text(adopted["host_vars_text"])
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory / "hosts.yml")])
    variables = VariableManager(loader=loader, inventory=manager).get_vars(host=manager.get_host("gpu7"))
    variables.update({name: "from-vault" for name in re.findall(r"\bvault_\w+", adopted["host_vars_text"])})
    variables.setdefault("inventory_dir", str(inventory))
    templar = Templar(loader=loader, variables=variables)
    return {name: templar.template(variables[name]) for name in variables if name.startswith("llmfleet_")}


def _without_references(value):
    """A value with adopt's own vault references (the only templates it writes) taken out."""
    if isinstance(value, dict):
        return {k: _without_references(v) for k, v in value.items()
                if not (isinstance(v, str) and re.fullmatch(r"\{\{ vault_\w+ \}\}", v)) and v != "from-vault"}
    if isinstance(value, list):
        return [_without_references(item) for item in value]
    return value


@pytest.mark.parametrize("name, edit, expected", CASES, ids=[case[0] for case in CASES])
def test_a_hostile_container_is_adopted_as_data(tmp_path, name, edit, expected):
    root = tmp_path / "models"
    (root / "m").mkdir(parents=True)
    (root / "m" / "config.json").write_text(CONFIG)
    marker = tmp_path / "PWN"
    attrs = _container(root)
    edit(attrs, root, PWN % marker)
    record = container_record(attrs, {}, NOW)
    adopted = adopted_inventory("gpu7", [record], CARDS, now=NOW)

    shown = json.dumps(adopted)
    assert TOKEN not in shown and KEY not in shown, "a secret left the host"
    for note in adopted["notes"]:
        assert "\n" not in note and not re.search(r"[\x00-\x1f\x7f]", note), "a note is one clean line: %r" % note
    if expected:
        assert any(expected in note for note in adopted["notes"]), adopted["notes"]

    seen = _templated(tmp_path, adopted)
    assert not marker.exists(), "a host's text ran on the controller"
    assert _without_references(seen) == _without_references(adopted["host_vars"]), "read back as the host had it"


REFUSALS = [
    ("a host name that is a template", lambda record: ("gpu7{{ x }}", [record]), "host 'gpu7{{ x }}': expected"),
    ("a container's args that are no list", lambda record: ("gpu7", [dict(record, args="vllm serve")]),
     "host gpu7: containers[0]: args not as adopt_info returns them"),
    ("a container's environment value no text", lambda record: ("gpu7", [dict(record, environment={"A": ["x"]})]),
     "host gpu7: containers[0]: environment not as adopt_info returns them"),
]


@pytest.mark.parametrize("name, build, expected", REFUSALS, ids=[case[0] for case in REFUSALS])
def test_what_is_no_adopt_info_result_is_refused_in_one_line(tmp_path, name, build, expected):
    (tmp_path / "m").mkdir()
    record = container_record(_container(tmp_path), {}, NOW)
    host, containers = build(record)
    with pytest.raises(AdoptError) as refused:
        adopted_inventory(host, containers, CARDS, now=NOW)
    assert expected in str(refused.value) and "\n" not in str(refused.value)
