"""The hand-over, as a new operator walks it on a twin host: seats started by hand as compose
projects under /srv/compose/<name> (the collection's own seat directory; a util-sized vLLM seat
with a token and restart: on-failure, a pinned one, an ASR tenant) → playbooks/adopt.yml → the
first windows.

- Without the seats' take_over, the window is refused before anything is touched, naming each
  hand-started container and what it holds.
- With it, a window whose new seat dies at boot is rolled back: the hand-started containers run
  again as they ran (names, images, health), their files byte for byte, and the report's verdict
  is measured against the host as observed before the window.
- Then the real hand-over: the seats run as the collection's, the hand-started containers are
  gone with their files kept as dated backups, the dry run and the report name what was taken
  over, and a second run changes nothing and moves nothing.
- The plan's "now" columns of a hand-started seat show what its container runs (its context and
  the KV bytes, tokens and concurrency its boot log printed), and never its token.
- A second operator's host, on L40S cards (adopt writes the l40s profile), goes through the same way.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import run_ansible
from support.rollout import FLEET, rebalance, report_of, state, twin_pair, wait_healthy
from support.wait import DOCKER_HEALTH_POLL_S, wait_for
from test_adopt_twin import _adopt

from twinlib import fleet

pytestmark = [pytest.mark.twin, pytest.mark.slow]

TOKEN = "hf_twin_handover_secret_0731"
GPU1, GPU2 = "GPU-7a1c0001-0000-4000-8000-000000000001", "GPU-7a1c0001-0000-4000-8000-000000000002"


def _device(uuid):
    return {"resources": {"reservations": {"devices": [{"driver": "nvidia", "device_ids": [uuid], "capabilities": ["gpu"]}]}}}


PROJECTS = {
    "chat": {"image": "vllm/vllm-openai:v0.33.0", "restart": "on-failure",
             "command": ["/srv/models/qwen3-8b", "--served-model-name", "chat", "--port", "8000",
                         "--max-model-len", "8192", "--gpu-memory-utilization", "0.35"],
             "environment": {"HF_TOKEN": TOKEN}, "ports": ["8211:8000"],
             "volumes": ["/srv/models:/srv/models:ro"], "deploy": _device(GPU1)},
    "coder": {"image": "vllm/vllm-openai:v0.33.0", "restart": "unless-stopped",
              "command": ["/srv/models/llama-3.1-8b-instruct", "--served-model-name", "coder", "--port", "8000",
                          "--max-model-len", "16384", "--kv-cache-memory-bytes", "4G"],
              "ports": ["8212:8000"], "volumes": ["/srv/models:/srv/models:ro"], "deploy": _device(GPU2)},
    "asr": {"image": "llmfleet/asr-seat:twin", "restart": "unless-stopped", "ports": ["8213:8000"],
            "deploy": _device(GPU1)},
}
HAND_MADE = ["asr-asr-1", "chat-chat-1", "coder-coder-1"]
START = [{"hosts": "twin1", "gather_facts": False, "tasks": [
    {"name": "Make each project's directory", "ansible.builtin.file": {
        "path": "/srv/compose/{{ item }}", "state": "directory", "mode": "0755"}, "loop": ["chat", "coder", "asr"]},
    {"name": "Write each project by hand, as the operator did",
     "ansible.builtin.copy": {"dest": "/srv/compose/{{ item.key }}/compose.yaml", "mode": "0644",
                              "content": "{{ {'services': {item.key: item.value}} | to_nice_yaml }}"},
     "loop": "{{ projects | dict2items }}", "loop_control": {"label": "{{ item.key }}"}},
    # one at a time, each healthy before the next, as the operator booted them
    {"name": "Start each project", "ansible.builtin.command": {
        "cmd": "docker compose up --detach --wait --wait-timeout 120", "chdir": "/srv/compose/{{ item }}"},
     "loop": ["chat", "coder", "asr"], "changed_when": True},
    {"name": "Wait until every seat answers (the ASR tenant holds its memory from then on)",
     "ansible.builtin.uri": {"url": "http://{{ ansible_host }}:{{ item }}/health"},
     "register": "up", "until": "up.status == 200", "retries": 120, "delay": 1, "loop": [8211, 8212, 8213]},
]}]


# twin1 on H100 cards, as the fleet has them; twin2 (the second operator's) on L40S cards
SPEC = {"description": "The hand-over: twin1 on two H100, twin2 on two L40S.",
        "hosts": [{"name": "twin1", "gpus": [{"count": 2, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                                              "uuids": [GPU1, GPU2]}]},
                  {"name": "twin2", "gpus": [{"count": 2, "name": "NVIDIA L40S", "memory_total_mib": 46068,
                                              "uuids": ["GPU-7a1c0002-0000-4000-8000-000000000001",
                                                        "GPU-7a1c0002-0000-4000-8000-000000000002"]}]}],
        "images": {"vllm/vllm-openai:v0.33.0": "vllm", "llmfleet/asr-seat:twin": "asr"}}


def _booted(host, container):
    """What a container's boot log says it runs: context, KV bytes, tokens and concurrency."""
    log = fleet.find_host(host).docker(["logs", container]).stdout
    tokens = re.findall(r"GPU KV cache size: ([\d,]+) tokens", log)
    context, concurrency = re.findall(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", log)[-1]
    reserved = re.findall(r"reserved ([\d.]+) GiB memory for KV Cache", log)
    available = re.findall(r"Available KV cache memory: ([\d.]+) GiB", log)
    gib = float((reserved or available)[-1])
    return {"max_model_len": int(context.replace(",", "")), "kv_gib": gib,
            "kv_cache_tokens": int(tokens[-1].replace(",", "")), "max_concurrency": float(concurrency)}


def _assert_now_as_it_runs(plan_seat, booted, kv_bytes=None):
    """The plan's now values of a hand-started seat are what its container runs."""
    now = plan_seat["now"]
    assert (now["max_model_len"], now["kv_cache_tokens"], now["max_concurrency"]) == (
        booted["max_model_len"], booted["kv_cache_tokens"], booted["max_concurrency"]), (now, booted)
    assert now["kv_cache_memory_bytes"] == (kv_bytes or round(booted["kv_gib"] * 2 ** 30)), (now, booted)


def _now_row(said, seat):
    """The seat's row of the plan's now -> planned table, as the dry run printed it."""
    table = said[said.index("| concurrency now → planned |"):]
    return table[table.index("| %s | " % seat):].split(" | ", 1)[1].split("| seat |")[0]


def _hand_made(host_state):
    return {name: info for name, info in host_state["containers"].items() if name in HAND_MADE}


def _managed():
    """{container name: the seat it runs, or "" for a container outside the collection} on twin1."""
    out = fleet.find_host("twin1").docker(["ps", "-a", "--format", '{{.Names}} {{.Label "io.llmfleet.seat"}}']).stdout
    return dict((line.split(" ", 1) + [""])[:2] for line in out.splitlines())


@pytest.fixture(scope="module")
def handover(tmp_path_factory):
    root = tmp_path_factory.mktemp("handover")
    spec = root / "spec.json"
    spec.write_text(json.dumps(SPEC))
    with twin_pair(spec) as twin_inventory:
        start = root / "start.yml"
        start.write_text(yaml.safe_dump(START, sort_keys=False))
        started = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), "-i", twin_inventory,
                               str(start), "-e", json.dumps({"projects": PROJECTS})])
        assert started.returncode == 0, started.stdout[-4000:] + started.stderr[-2000:]
        adopted = _adopt(twin_inventory, root / "inventory")
        assert adopted.returncode == 0, adopted.stdout[-4000:] + adopted.stderr[-2000:]
        inventory = root / "inventory"
        (inventory / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {"twin1": None}}}))
        # the operator's own group variables: where the seats live on this host, how patient to be
        shutil.copytree(FLEET / "group_vars", inventory / "group_vars")
        yield {"root": root, "twin": twin_inventory, "inventory": inventory,
               "host_vars": inventory / "host_vars" / "twin1.yml"}


class _Unsafe(str):
    """A value adopt wrote as ``!unsafe`` (host data Ansible must never template), kept so."""


class _Loader(yaml.SafeLoader):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: _Unsafe(loader.construct_scalar(node)))
_Dumper.add_representer(_Unsafe, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value)))


def _seats(handover, **fields):
    """The adopted host_vars with ``fields`` set on every seat (``{seat: value}`` sets one seat's)."""
    data = yaml.load(handover["host_vars"].read_text(), Loader=_Loader)
    for seat in data["llmfleet_seats"]:
        for field, value in fields.items():
            if isinstance(value, dict):
                if seat["name"] in value:
                    seat[field] = value[seat["name"]]
            else:
                seat[field] = value
    handover["host_vars"].write_text(yaml.dump(data, Dumper=_Dumper, sort_keys=False))


def _window(handover, name, *extra, check=False):
    report = handover["root"] / name
    proc = rebalance(handover["inventory"] / "hosts.yml", handover["twin"], report, "-e", "target=twin1",
                     "-e", "vault_chat_hf_token=" + TOKEN, *extra, check=check)
    return proc, report


def test_the_handover(handover):
    before = state("twin1")
    assert sorted(_hand_made(before)) == HAND_MADE and all(
        running == "running" for _cid, running, _healthy in _hand_made(before).values())

    # 1. Adopted as it is, nothing says to take the hand-made projects over: refused, untouched.
    _seats(handover, take_over=False)
    refused, _report = _window(handover, "refused")
    assert refused.returncode != 0
    said = " ".join(refused.stdout.split())
    for container, holds in (("chat-chat-1", "seat chat: its compose project chat"),
                             ("coder-coder-1", "seat coder: its compose project coder"),
                             ("asr-asr-1", "seat asr: its compose project asr")):
        assert "container %s (compose project" % container in said, said[-4000:]
        assert holds in said
    assert state("twin1") == before, "a refused window touched the host"

    # 2. Taken over, and the new chat dies at boot: the host comes back as it was, and says so.
    _seats(handover, take_over=True, environment={"chat": {"FAKE_VLLM_FAULT": "oom_at_boot"}})
    dry, _report = _window(handover, "dry", "--check", "--diff", check=True)
    said = " ".join(dry.stdout.split())  # the callback folds long lines
    assert "taken over (stopped first, brought back by a rollback): asr-asr-1 for seat asr" in said
    assert "chat-chat-1 for seat chat (seat chat: its compose project chat, its container name chat-chat-1, " \
           "its GPU memory (compose service chat), its port 0.0.0.0:8211; removed; compose project chat, its files in " \
           "/srv/compose/chat)" in said, said[said.find("taken over ("):][:1500]
    assert state("twin1") == before, "the dry run touched the host"
    # the plan shows each hand-started seat as its container runs it, read from the host
    chat, coder = _booted("twin1", "chat-chat-1"), _booted("twin1", "coder-coder-1")
    assert chat["max_model_len"] == 8192 and coder["max_model_len"] == 16384
    row = _now_row(said, "chat")
    assert row.startswith("0 → ") and "| 8,192 → " in row and "| {:,} → ".format(chat["kv_cache_tokens"]) in row \
        and "| %.2fx → " % chat["max_concurrency"] in row, row
    row = _now_row(said, "coder")
    assert "| 16,384 → " in row and "| 4 GiB → " in row and "| {:,} → ".format(coder["kv_cache_tokens"]) in row, row
    assert TOKEN not in dry.stdout + dry.stderr
    failed, report_dir = _window(handover, "failed")
    assert failed.returncode != 0
    section = report_of(report_dir)["hosts"]["twin1"]
    planned = {seat["name"]: seat for seat in section["plan"]["seats"]}
    _assert_now_as_it_runs(planned["chat"], chat)
    _assert_now_as_it_runs(planned["coder"], coder, kv_bytes=4 * 2 ** 30)
    assert TOKEN not in json.dumps(section)
    assert section["status"] == "rolled_back", section["error"]
    assert section["rollback"]["complete"] and section["rollback"]["problems"] == []
    assert any(action.startswith("brought back: chat-chat-1 recreated from its compose files")
               for action in section["actions"]), section["actions"]
    as_before = {name: (running, healthy) for name, (_cid, running, healthy) in _hand_made(before).items()}
    wait_for(lambda: {name: (running, healthy) for name, (_cid, running, healthy)
                      in _hand_made(state("twin1")).items()} == as_before,
             what="the hand-made containers running (and healthy) as before", interval=DOCKER_HEALTH_POLL_S)
    after = state("twin1")
    assert sorted(_hand_made(after)) == HAND_MADE
    assert _managed() == {name: "" for name in HAND_MADE}, "only the hand-made containers, none of the collection's"
    assert {name: data for name, data in after["files"].items() if ".bak-" not in name} == before["files"]

    # 3. The hand-over itself.
    _seats(handover, environment={"chat": {}})
    applied, report_dir = _window(handover, "applied", check=True)
    section = report_of(report_dir)["hosts"]["twin1"]
    assert section["status"] == "applied"
    # adopted with their own container names, now the collection's seats
    assert _managed() == {"chat-chat-1": "chat", "coder-coder-1": "coder", "asr-asr-1": "asr"}
    wait_healthy("twin1")  # docker's own healthcheck runs on its interval, after the window's gates
    now = state("twin1")
    assert not {cid for cid, _r, _h in now["containers"].values()} & {cid for cid, _r, _h in before["containers"].values()}
    for project in ("chat", "coder", "asr"):
        kept = [name for name in now["files"] if name.startswith(project + "/compose.yaml.bak-")]
        assert len(kept) == 1 and now["files"][kept[0]] == before["files"][project + "/compose.yaml"], \
            "the hand-made compose.yaml of %s is kept as its dated backup" % project
    assert "taken over for seat chat: chat-chat-1 removed (compose project chat, its files in /srv/compose/chat)" \
        in section["actions"], section["actions"]
    report_md = (report_dir / "report.md").read_text()
    assert "taken over for seat coder: coder-coder-1 stopped" in report_md, "the report says what was taken over"
    assert TOKEN not in applied.stdout + json.dumps(section)

    # 4. A second run changes nothing and moves nothing.
    again, report_dir = _window(handover, "again", check=True)
    section = report_of(report_dir)["hosts"]["twin1"]
    assert section["status"] == "unchanged", section["actions"]
    assert section["plan"]["moves"] == []
    assert state("twin1")["containers"] == now["containers"]
    assert "changed=0" in again.stdout.split("PLAY RECAP")[-1]


# A second operator, on twin2: one compose project of their own name holding two seats under
# /srv/stacks/llm (not the collection's directory), one of them reached only through their
# gateway's network and the host's loopback, and a container started with docker run.
B_GPU1, B_GPU2 = "GPU-7a1c0002-0000-4000-8000-000000000001", "GPU-7a1c0002-0000-4000-8000-000000000002"
STACK = {"name": "llm", "services": {
    "qwen": {"image": "vllm/vllm-openai:v0.33.0", "restart": "always",
             "command": ["/srv/models/qwen3-8b", "--served-model-name", "qwen", "--port", "8000",
                         "--max-model-len", "8192", "--kv-cache-memory-bytes", "4G"],
             "ports": ["127.0.0.1:9300:8000"], "networks": ["gateway-b"],
             "volumes": ["/srv/models:/srv/models:ro"], "deploy": _device(B_GPU1)},
    "whisper": {"image": "llmfleet/asr-seat:twin", "restart": "always", "ports": ["9301:8000"],
                "deploy": _device(B_GPU2)},
}, "networks": {"gateway-b": {"external": True}}}
START_B = [{"hosts": "twin2", "gather_facts": False, "tasks": [
    {"name": "Make the stack's directory", "ansible.builtin.file": {
        "path": "/srv/stacks/llm", "state": "directory", "mode": "0755"}},
    {"name": "Write the stack", "ansible.builtin.copy": {
        "dest": "/srv/stacks/llm/docker-compose.yml", "mode": "0644", "content": "{{ stack | to_nice_yaml }}"}},
    {"name": "Make the gateway's network", "ansible.builtin.command": {
        "argv": ["docker", "network", "create", "gateway-b"]}, "changed_when": True},
    {"name": "Start the stack", "ansible.builtin.command": {
        "cmd": "docker compose up --detach --wait --wait-timeout 120", "chdir": "/srv/stacks/llm"},
     "changed_when": True},
    {"name": "Start the embedder by hand", "ansible.builtin.command": {"argv": [
        "docker", "run", "--detach", "--name", "embedder", "--restart", "always", "--publish", "9302:8000",
        "--gpus", "device=" + B_GPU1, "llmfleet/asr-seat:twin"]}, "changed_when": True},
    # on the host itself: qwen answers on its loopback alone
    {"name": "Wait until every seat answers", "ansible.builtin.uri": {"url": "http://127.0.0.1:{{ item }}/health"},
     "register": "up", "until": "up.status == 200", "retries": 120, "delay": 1, "loop": [9300, 9301, 9302]},
]}]


def test_a_second_operators_host_goes_through_the_same_way(handover):
    root = handover["root"] / "operator-b"
    start = handover["root"] / "start-b.yml"
    start.write_text(yaml.safe_dump(START_B, sort_keys=False))
    started = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), "-i", handover["twin"],
                           str(start), "-e", json.dumps({"stack": STACK})])
    assert started.returncode == 0, started.stdout[-4000:] + started.stderr[-2000:]
    adopted = run_ansible(["ansible-playbook", "-i", str(FLEET / "hosts.yml"), "-i", handover["twin"],
                           "playbooks/adopt.yml", "-e", "target=twin2", "-e", "adopt_output=%s" % root])
    assert adopted.returncode == 0, adopted.stdout[-4000:] + adopted.stderr[-2000:]
    (root / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {"twin2": None}}}))
    shutil.copytree(FLEET / "group_vars", root / "group_vars")
    b = {"root": root, "twin": handover["twin"], "inventory": root, "host_vars": root / "host_vars" / "twin2.yml"}
    adopted_vars = yaml.load(b["host_vars"].read_text(), Loader=_Loader)
    assert adopted_vars["llmfleet_gpu_profile"] == "l40s", "adopt names the profile of the L40S cards"
    assert {gpu["name"] for gpu in adopted_vars["llmfleet_gpus"]} == {"NVIDIA L40S"}
    docker = fleet.find_host("twin2").docker

    def containers():
        out = docker(["ps", "-a", "--format", '{{.Names}} {{.State}} {{.Label "io.llmfleet.seat"}}']).stdout
        return {fields[0]: tuple(fields[1:]) for fields in (line.split(" ") for line in out.splitlines())}

    before = containers()
    assert before == {"llm-qwen-1": ("running", ""), "llm-whisper-1": ("running", ""), "embedder": ("running", "")}

    qwen_booted = _booted("twin2", "llm-qwen-1")
    # a failed first window puts the stack and the docker-run container back as they ran
    _seats(b, environment={"qwen": {"FAKE_VLLM_FAULT": "oom_at_boot"}})
    failed = rebalance(root / "hosts.yml", handover["twin"], handover["root"] / "b-failed", "-e", "target=twin2",
                       check=False)
    assert failed.returncode != 0
    section = report_of(handover["root"] / "b-failed")["hosts"]["twin2"]
    assert section["status"] == "rolled_back" and section["rollback"]["complete"], section["rollback"]
    qwen_now = next(seat for seat in section["plan"]["seats"] if seat["name"] == "qwen")
    _assert_now_as_it_runs(qwen_now, qwen_booted, kv_bytes=4 * 2 ** 30)
    wait_for(lambda: containers() == before, what="twin2's containers as before", interval=DOCKER_HEALTH_POLL_S)
    assert docker(["inspect", "--format", "{{.HostConfig.RestartPolicy.Name}}", "embedder"]).stdout.strip() == "always"

    # the hand-over
    _seats(b, environment={"qwen": {}})
    rebalance(root / "hosts.yml", handover["twin"], handover["root"] / "b-applied", "-e", "target=twin2")
    now = containers()
    assert now["embedder"] == ("running", "embedder"), "the collection's embedder seat"
    assert now["embedder-before-llmfleet"][0] == "exited", "the hand-started one, kept aside"
    assert docker(["inspect", "--format", "{{.HostConfig.RestartPolicy.Name}}",
                   "embedder-before-llmfleet"]).stdout.strip() == "no", "it cannot come back beside the seat"
    assert now["llm-qwen-1"] == ("running", "qwen") and now["llm-whisper-1"] == ("running", "whisper")
    qwen = json.loads(docker(["inspect", "llm-qwen-1"]).stdout)[0]
    assert {b["HostIp"] for bindings in qwen["HostConfig"]["PortBindings"].values() for b in bindings} == \
        {"127.0.0.1"}, "published no wider than the operator had it"
    assert "gateway-b" in qwen["NetworkSettings"]["Networks"], "on the operator's gateway network"
    assert fleet.find_host("twin2").path("/srv/stacks/llm/docker-compose.yml") and Path(
        fleet.find_host("twin2").path("/srv/stacks/llm/docker-compose.yml")).is_file(), "their files stay"
