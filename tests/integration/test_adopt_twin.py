"""`playbooks/adopt.yml` on a fleet twin host that the operator started by hand (a compose
project of their own: a util-sized vLLM seat with a token, a pinned one, an ASR tenant), and on
a second host where a hostile container runs (a template nested in its command line, an API key
on it, a model path that climbs out of its mount): it writes a starting inventory the plan accepts, keeps
the token and the key on the host at every verbosity, runs nothing of what the host said on the
controller (adopt, then plan), copies no file from outside a model directory, writes nothing in
check mode and never overwrites an inventory."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader

from conftest import REPO_ROOT, VENV_BIN, ansible_env, run_ansible
from support.rollout import FLEET, twin_pair

pytestmark = [pytest.mark.twin, pytest.mark.slow]

PLAYBOOK = REPO_ROOT / "playbooks" / "adopt.yml"
TOKEN = "hf_twin_adopt_secret_0451"
GPU1, GPU2 = "GPU-7a1c0001-0000-4000-8000-000000000001", "GPU-7a1c0001-0000-4000-8000-000000000002"
COMPOSE = {"name": "ops", "services": {
    "chat": {"image": "vllm/vllm-openai:v0.33.0", "restart": "unless-stopped",
             "command": ["/srv/models/qwen3-8b", "--served-model-name", "chat", "--port", "8000",
                         "--max-model-len", "8192", "--gpu-memory-utilization", "0.35"],
             "environment": {"HF_TOKEN": TOKEN, "VLLM_LOGGING_LEVEL": "INFO"},
             "ports": ["8211:8000"], "volumes": ["/srv/models:/srv/models:ro"],
             "deploy": {"resources": {"reservations": {"devices": [
                 {"driver": "nvidia", "device_ids": [GPU1], "capabilities": ["gpu"]}]}}}},
    "coder": {"image": "vllm/vllm-openai:v0.33.0",
              "command": ["/srv/models/llama-3.1-8b-instruct", "--served-model-name", "coder", "--port", "8000",
                          "--max-model-len", "16384", "--kv-cache-memory-bytes", "4G",
                          "--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"],
              "ports": ["8212:8000"], "volumes": ["/srv/models:/srv/models:ro"],
              "deploy": {"resources": {"reservations": {"devices": [
                  {"driver": "nvidia", "device_ids": [GPU2], "capabilities": ["gpu"]}]}}}},
    # reached only through the gateway: on the host alone, on the gateway's own network
    "asr": {"image": "llmfleet/asr-seat:twin", "ports": ["127.0.0.1:8213:8000"], "networks": ["gateway"],
            "deploy": {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "device_ids": [GPU1], "capabilities": ["gpu"]}]}}}},
}, "networks": {"gateway": {"external": True}}}
# The hostile container, on twin2: what it runs would touch MARKER on the controller if adopt's
# inventory were ever templated; its model path climbs out of its mount to a JSON beside the
# models.
HOSTILE_GPU = "GPU-7a1c0002-0000-4000-8000-000000000001"
MARKER = Path(tempfile.gettempdir()) / ("llmfleet-adopt-twin-pwn-%d" % os.getpid())
PWN = '{{ lookup("pipe", "touch %s") }}' % MARKER
API_KEY = "sk-intruder-key-0451"
CREDS = {"model_type": "llama", "db_password": "creds-on-the-host-0451"}
INTRUDER = {"name": "intruder", "services": {
    "hostile": {"image": "vllm/vllm-openai:v0.33.0", "restart": "always",
                "command": ["/mm/../creds2", "--served-model-name", "hostile", "--port", "8000",
                            "--max-model-len", "4096", "--kv-cache-memory-bytes", "1G", "--api-key", API_KEY,
                            "--gpu-memory-utilization", "0.3",
                            "--default-chat-template-kwargs", json.dumps({"a": {"b": PWN}, "c": [{"d": [PWN]}]})],
                "environment": {"GREETING": PWN},
                "ports": ["8214:8000"], "volumes": ["/srv/models:/mm:ro", "/srv/models/qwen3-8b:/creds2:ro"],
                "deploy": {"resources": {"reservations": {"devices": [
                    {"driver": "nvidia", "device_ids": [HOSTILE_GPU], "capabilities": ["gpu"]}]}}}},
}}
START = [{"hosts": "twin1", "gather_facts": False, "tasks": [
    {"name": "Make the project's directory", "ansible.builtin.file": {"path": "/srv/ops", "state": "directory", "mode": "0700"}},
    {"name": "Write the operator's own compose project", "ansible.builtin.copy": {
        "dest": "/srv/ops/compose.yaml", "content": yaml.safe_dump(COMPOSE, sort_keys=False), "mode": "0600"}},
    {"name": "Make the gateway's network", "ansible.builtin.shell": {
        "cmd": "docker network inspect gateway >/dev/null 2>&1 || docker network create gateway"}},
    {"name": "Start it", "ansible.builtin.command": {
        "cmd": "docker compose -f /srv/ops/compose.yaml up --detach --wait --wait-timeout 120"}},
    {"name": "Wait until both vLLM seats answer", "ansible.builtin.uri": {"url": "http://{{ ansible_host }}:{{ item }}/health"},
     "register": "up", "until": "up.status == 200", "retries": 60, "delay": 1, "loop": [8211, 8212]},

]}]


def _intruder_tasks(compose):
    """Start the hostile container from ``compose`` (a file copied as it is: the play never
    templates what it holds)."""
    return [
        {"name": "Make the directories", "ansible.builtin.file": {"path": "{{ item }}", "state": "directory",
                                                                  "mode": "0700"},
         "loop": ["/srv/creds2", "/srv/intruder"]},
        {"name": "Put a JSON the hostile model path climbs to beside the models", "ansible.builtin.copy": {
            "dest": "/srv/creds2/config.json", "content": json.dumps(CREDS), "mode": "0644"}},
        {"name": "Write the intruder's compose project", "ansible.builtin.copy": {
            "src": str(compose), "dest": "/srv/intruder/compose.yaml", "mode": "0600"}},
        {"name": "Start it", "ansible.builtin.command": {
            "cmd": "docker compose -f /srv/intruder/compose.yaml up --detach --wait --wait-timeout 120"}},
        {"name": "Wait until it answers", "ansible.builtin.uri": {"url": "http://{{ ansible_host }}:8214/health"},
         "register": "up", "until": "up.status == 200", "retries": 60, "delay": 1},
    ]


def _adopt(twin_inventory, output, *extra):
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(FLEET / "hosts.yml"), "-i", twin_inventory,
                           str(PLAYBOOK), "-e", "target=twin1", "-e", "adopt_output=%s" % output] + list(extra),
                          cwd=REPO_ROOT, env=ansible_env(), capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def adopted(tmp_path_factory):
    root = tmp_path_factory.mktemp("adopt")
    with twin_pair() as twin_inventory:
        start = root / "start.yml"
        (root / "intruder.yaml").write_text(yaml.safe_dump(INTRUDER, sort_keys=False))
        start.write_text(yaml.safe_dump(START + [{"hosts": "twin2", "gather_facts": False,
                                                  "tasks": _intruder_tasks(root / "intruder.yaml")}], sort_keys=False))
        MARKER.unlink(missing_ok=True)
        started = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), "-i", twin_inventory, str(start)])
        assert started.returncode == 0, started.stdout[-4000:] + started.stderr[-2000:]
        dry = _adopt(twin_inventory, root / "dry", "--check")
        first = _adopt(twin_inventory, root / "inventory", "-vvv")
        again = _adopt(twin_inventory, root / "inventory")
        output = root / "inventory"
        (output / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {"twin1": None}}}))
        plan = run_ansible(["ansible-playbook", "-i", str(output / "hosts.yml"), "-i", twin_inventory,
                            "playbooks/plan.yml", "-e", "target=twin1", "-e", "vault_chat_hf_token=from-vault",
                            "-e", "llmfleet_report_dir=%s" % (root / "plan")])
        hostile = _adopt(twin_inventory, root / "hostile", "-vvv", "-e", "target=twin2")
        marker_after_adopt = MARKER.exists()
        (root / "hostile" / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {"twin2": None}}}))
        _complete_the_hostile_seat(root / "hostile" / "host_vars" / "twin2.yml")
        hostile_plan = run_ansible(["ansible-playbook", "-i", str(root / "hostile" / "hosts.yml"), "-i", twin_inventory,
                                    "playbooks/plan.yml", "-e", "target=twin2", "-e", "vault_hostile_api_key=from-vault",
                                    "-e", "llmfleet_report_dir=%s" % (root / "hostile-plan")])
        yield {"root": root, "dry": dry, "first": first, "again": again, "plan": plan, "hostile": hostile,
               "hostile_plan": hostile_plan, "marker_after_adopt": marker_after_adopt,
               "marker_after_plan": MARKER.exists()}
    MARKER.unlink(missing_ok=True)


def _complete_the_hostile_seat(path):
    """What the notes ask of the operator for the seat whose model path adopt refused: name its
    config and weights, and keep it on its card (lines added to the text, so adopt's !unsafe
    tags stay as written)."""
    text = path.read_text()
    seat = '  - name: "hostile"\n'
    assert text.count(seat) == 1, text
    path.write_text(text.replace(seat, seat + '    model_config: "%s"\n    weights_bytes: "15623MiB"\n    gpu: "%s"\n'
                                 % (FLEET / "models" / "qwen3-8b" / "config.json", HOSTILE_GPU)))


def _host_vars(adopted):
    """The written host_vars as Ansible loads them (its loader knows !unsafe)."""
    return DataLoader().load((adopted["root"] / "inventory" / "host_vars" / "twin1.yml").read_text())


def test_the_host_is_adopted_as_it_runs(adopted):
    first = adopted["first"]
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    seats = {seat["name"]: seat for seat in _host_vars(adopted)["llmfleet_seats"]}
    assert sorted(seats) == ["asr", "chat", "coder"]
    chat, coder, asr = seats["chat"], seats["coder"], seats["asr"]
    assert (chat["engine"], chat["current_gpu"], chat["port"], chat["max_model_len"]) == ("vllm", GPU1, 8211, 8192)
    assert chat["served_model_names"] == ["chat"] and "kv_cache_memory_bytes" not in chat
    assert chat["environment"] == {"VLLM_LOGGING_LEVEL": "INFO"}
    assert chat["secret_environment"] == {"HF_TOKEN": "{{ vault_chat_hf_token }}"}
    assert chat["weights_bytes"] == "15623MiB", "the safetensors index the seat loads"
    assert chat["model_config"] == "models/twin1/chat/config.json"
    config = json.loads((adopted["root"] / "inventory" / chat["model_config"]).read_text())
    assert config == json.loads((FLEET / "models" / "qwen3-8b" / "config.json").read_text())
    assert (coder["kv_cache_memory_bytes"], coder["tool_call_parser"], coder["current_gpu"]) == ("4GiB", "llama3_json", GPU2)
    assert asr["engine"] == "fixed" and asr["current_gpu"] == GPU1 and asr["memory_cap_bytes"] == "3840MiB"
    assert (asr["port"], asr["container_port"]) == (8213, 8000)
    assert (asr["bind_address"], asr["networks"]) == ("127.0.0.1", [{"name": "gateway", "external": True}]), \
        "published on the host alone, on the gateway's network: kept, never widened"
    assert chat["bind_address"] == "0.0.0.0" and "networks" not in chat, "8211:8000 is every interface, kept so"
    text = (adopted["root"] / "inventory" / "host_vars" / "twin1.yml").read_text()
    assert "# - seat chat: ran util-sized (--gpu-memory-utilization 0.35)" in text
    assert "compose project ops runs asr, chat, coder now: take_over: true, so the first rebalance stops them" in text
    assert all(seat["take_over"] is True for seat in seats.values()), "adopted from outside the collection"


def test_the_token_stays_on_the_host(adopted):
    first = adopted["first"]
    assert TOKEN not in first.stdout + first.stderr, "the token reached the -vvv output"
    for path in (adopted["root"] / "inventory").rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(), "the token reached %s" % path


def test_the_plan_reads_the_adopted_inventory(adopted):
    plan = adopted["plan"]
    assert plan.returncode == 0, plan.stdout[-4000:] + plan.stderr[-2000:]
    planned = json.loads((adopted["root"] / "plan" / "twin1-plan.json").read_text())
    assert sorted(seat["name"] for seat in planned["seats"]) == ["asr", "chat", "coder"]
    kv = {seat["name"]: (seat["kv_rule"], seat["kv_mib"]) for seat in planned["seats"]}
    assert kv["coder"] == ("pinned 4 GiB", 4096), "the pin it ran with"
    assert kv["chat"][0] == "rule 1.25x", "the util-sized seat is sized by the rule"
    markdown = (adopted["root"] / "plan" / "twin1-plan.md").read_text()
    assert "`127.0.0.1:8213`; networks: gateway (external)" in markdown, "the plan shows the exposure adopt kept"
    assert "`0.0.0.0:8211` **all interfaces**" in markdown
    assert not any(seat["moved"] for seat in planned["seats"]), "adopted where they run, and the plan keeps them there"


def test_check_mode_writes_nothing(adopted):
    assert adopted["dry"].returncode == 0, adopted["dry"].stdout[-4000:]
    assert not (adopted["root"] / "dry").exists()


def test_an_inventory_is_never_overwritten(adopted):
    again = adopted["again"]
    assert again.returncode != 0
    assert "host twin1: %s exists: adopt writes a starting inventory and never overwrites one" % (
        adopted["root"] / "inventory" / "host_vars" / "twin1.yml") in again.stdout


def test_nothing_the_hostile_container_says_runs_on_the_controller(adopted):
    assert adopted["hostile"].returncode == 0, adopted["hostile"].stdout[-4000:]
    assert not adopted["marker_after_adopt"], "adopt ran the host's template on the controller"
    assert adopted["hostile_plan"].returncode == 0, adopted["hostile_plan"].stdout[-4000:]
    assert not adopted["marker_after_plan"], "the plan of the adopted inventory ran the host's template"
    path = adopted["root"] / "hostile" / "host_vars" / "twin2.yml"
    hostile = {seat["name"]: seat for seat in DataLoader().load(path.read_text())["llmfleet_seats"]}["hostile"]
    assert hostile["default_chat_template_kwargs"] == {"a": {"b": PWN}, "c": [{"d": [PWN]}]}, "kept, as data"
    assert hostile["environment"] == {"GREETING": PWN}
    assert "GREETING: !unsafe " in path.read_text() and "api_key: \"{{ vault_hostile_api_key }}\"" in path.read_text()
    planned = json.loads((adopted["root"] / "hostile-plan" / "twin2-plan.json").read_text())
    assert [seat["name"] for seat in planned["seats"]] == ["hostile"]


def test_no_file_outside_a_model_directory_is_copied(adopted):
    output = adopted["root"] / "inventory"
    copied = sorted(str(path.relative_to(output)) for path in output.rglob("*") if path.is_file())
    assert [path for path in copied if path.startswith("models/")] == [
        "models/twin1/chat/config.json", "models/twin1/coder/config.json"], copied
    hostile = adopted["root"] / "hostile"
    assert not (hostile / "models").exists(), "a file outside the model directory was copied"
    for path in [*output.rglob("*"), *hostile.rglob("*")]:
        if path.is_file():
            assert CREDS["db_password"] not in path.read_text(), "the JSON outside the mount reached %s" % path
    assert "# - seat hostile: model_config: /mm/../creds2 climbs out of its directory (..); not followed; " \
           "nothing copied" in (hostile / "host_vars" / "twin2.yml").read_text()


def test_the_api_key_stays_on_the_host(adopted):
    assert API_KEY not in adopted["hostile"].stdout + adopted["hostile"].stderr, "the key reached the -vvv output"
    for path in [*(adopted["root"] / "hostile").rglob("*"), *(adopted["root"] / "hostile-plan").rglob("*")]:
        if path.is_file():
            assert API_KEY not in path.read_text(errors="replace"), "the key reached %s" % path
