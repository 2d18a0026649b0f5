"""Adopting a host: a vLLM command line read back as seat fields, a container's docker inspect
read as adopt_info returns it (model configs found through its mounts, secrets never carried),
and the starting inventory the filter makes of it, which the plan accepts as it is."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

import pytest
from support.fuzz import malformed

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.inventory import (
    AdoptError,
    adopted_inventory,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.read import (
    container_record,
    docker_run_services,
    model_files,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import (
    adopted_fields,
    model_of,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm import server_args
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import build_plan, inventory_problems

CONFIGS = Path(__file__).resolve().parents[4] / "unit" / "fixtures" / "model_configs"
NOW = datetime.datetime(2026, 12, 1, 20, 0, tzinfo=datetime.timezone.utc)
GPU0, GPU1 = "GPU-aaaa0000-0000-4000-8000-000000000000", "GPU-aaaa0000-0000-4000-8000-000000000001"


# -- the command line -------------------------------------------------------------------------
@pytest.mark.parametrize("args, rest", [
    (["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"], ["Qwen/Qwen3-8B", "--port", "8000"]),
    (["/usr/local/bin/vllm", "serve", "/m"], ["/m"]),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"], ["--model", "/m"]),
    (["python3", "server.py"], None),
])
def test_server_args_find_vllms_own(args, rest):
    assert server_args(args) == rest


def test_the_model_is_the_positional_or_the_flag():
    assert model_of(["vllm", "serve", "/models/a", "--max-model-len", "4096"]) == "/models/a"
    assert model_of(["vllm", "serve", "--model=/models/b"]) == "/models/b"
    assert model_of(["python3", "app.py", "--model", "x"]) is None


def test_a_util_sized_command_line_reads_back_as_fields():
    fields, port, util, notes = adopted_fields([
        "vllm", "serve", "/srv/models/qwen3-8b", "--served-model-name", "chat", "chat-alias",
        "--port=8001", "--max-model-len", "32K", "--gpu-memory-utilization", "0.3", "-tp", "2",
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning_parser", "qwen3",
        "--trust-remote-code", "--host", "0.0.0.0",
        "--override-generation-config", '{"max_new_tokens": 2048}', "--pipeline-parallel-size", "2"])
    assert fields == {"model": "/srv/models/qwen3-8b", "served_model_names": ["chat", "chat-alias"],
                      "max_model_len": 32768, "tensor_parallel_size": 2, "tool_call_parser": "hermes",
                      "reasoning_parser": "qwen3", "max_new_tokens": 2048,
                      "extra_args": ["--trust-remote-code", "--host", "0.0.0.0"]}
    assert (port, util) == (8001, 0.3)
    assert notes == ["--pipeline-parallel-size 2 cannot be planned by the collection; dropped"]


def test_a_pinned_budget_is_kept_and_util_was_only_its_boot_gate():
    fields, port, util, _notes = adopted_fields([
        "vllm", "serve", "m", "--kv-cache-memory-bytes", "8589934592", "--gpu-memory-utilization", "0.9"])
    assert fields["kv_cache_memory_bytes"] == "8GiB" and util is None and port == 8000


def test_a_planned_flag_it_cannot_read_is_dropped_not_passed_on():
    fields, _port, _util, notes = adopted_fields(["vllm", "serve", "m", "--max-model-len", "auto", "--block-size", "x"])
    assert "max_model_len" not in fields and "extra_args" not in fields
    assert notes == ["--max-model-len auto is not a value the collection can carry over; dropped",
                     "--block-size x is not a value the collection can carry over; dropped"]


# -- the container ------------------------------------------------------------------------------
def _hub(tmp_path):
    """A Hugging Face cache as huggingface_hub lays it out: a snapshot of links to blobs."""
    repo = tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-8B"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "blobs").mkdir()
    (repo / "blobs" / "cfg").write_text((CONFIGS / "qwen3-8b.json").read_text())
    (repo / "blobs" / "w1").write_bytes(b"x" * 3000)
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(repo / "blobs" / "cfg")
    (snapshot / "model-00001.safetensors").symlink_to(repo / "blobs" / "w1")
    return tmp_path / "hf"


def _inspect(name, args, env=(), devices=(GPU0,), ports=None, mounts=(), started="2026-11-29T08:00:00.123456789Z",
             service=None):
    return {
        "Id": name * 4, "Name": "/" + name, "Image": "sha256:img", "Path": args[0], "Args": args[1:],
        "State": {"Running": True, "StartedAt": started},
        "Config": {"Image": "vllm/vllm-openai:v0.33.0", "Env": list(env) + ["PATH=/usr/bin"],
                   "Labels": {"com.docker.compose.project": "ops", "com.docker.compose.service": service or name}},
        "HostConfig": {"PortBindings": ports if ports is not None else {"8000/tcp": [{"HostIp": "", "HostPort": "8201"}]},
                       "NetworkMode": "bridge", "IpcMode": "host", "RestartPolicy": {"Name": "unless-stopped"},
                       "DeviceRequests": [{"Driver": "nvidia", "Count": 0, "DeviceIDs": list(devices),
                                           "Capabilities": [["gpu"]]}]},
        "Mounts": [{"Type": "bind", "Source": s, "Destination": d, "RW": False} for s, d in mounts],
    }


def test_a_container_reads_as_its_own_launch_without_its_secrets(tmp_path):
    hub = _hub(tmp_path)
    attrs = _inspect("chat", ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "8192"],
                     env=["HF_TOKEN=hf_do_not_copy", "VLLM_LOGGING_LEVEL=INFO", "PATH=/usr/bin"],
                     mounts=[(str(hub), "/root/.cache/huggingface")], started="2026-11-29T08:00:00Z")
    record = container_record(attrs, {"sha256:img": ["PATH=/usr/bin"]}, NOW)
    assert "hf_do_not_copy" not in json.dumps(record)
    assert record["environment"] == {"VLLM_LOGGING_LEVEL": "INFO"}, "the image's own PATH is not the seat's"
    assert record["secret_environment"] == ["HF_TOKEN"]
    assert record["ports"] == [{"container_port": 8000, "host_port": 8201, "host_ip": "", "protocol": "tcp"}]
    assert record["gpu_device_ids"] == [GPU0] and record["restart_policy"] == "unless-stopped"
    assert record["running_s"] == int((NOW - datetime.datetime(2026, 11, 29, 8, tzinfo=datetime.timezone.utc)).total_seconds())
    model = record["model"]
    assert model["name"] == "Qwen/Qwen3-8B" and model["problem"] is None
    assert model["model_config"]["model_type"] == json.loads((CONFIGS / "qwen3-8b.json").read_text())["model_type"]
    assert model["weights_bytes"] == 3000


def test_a_model_path_is_followed_through_the_longest_mount(tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "models" / "m" / "config.json").write_text((CONFIGS / "qwen3-8b.json").read_text())
    (tmp_path / "models" / "m" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16381470720}, "weight_map": {}}))
    mounts = [{"source": "/nowhere", "destination": "/srv", "read_only": True},
              {"source": str(tmp_path / "models"), "destination": "/srv/models", "read_only": True}]
    found = model_files("/srv/models/m", {}, mounts)
    assert found["model_dir"] == str(tmp_path / "models" / "m") and found["weights_bytes"] == 16381470720
    assert model_files("/opt/baked-in", {}, mounts)["problem"] == "/opt/baked-in is inside the image (no mount holds it)"
    assert "not in the Hugging Face cache" in model_files("org/absent", {"HF_HOME": "/srv/hf"}, mounts)["problem"]


# -- the starting inventory ---------------------------------------------------------------------
def _cards(processes):
    return {"source": "nvml", "gpus": [
        {"index": 0, "uuid": GPU0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
         "memory_used_mib": 30000, "memory_free_mib": 51559, "processes": processes.get(0, [])},
        {"index": 1, "uuid": GPU1, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
         "memory_used_mib": 3840, "memory_free_mib": 77719, "processes": processes.get(1, [])}]}


def _records(tmp_path, started="2026-11-29T08:00:00Z"):
    models = tmp_path / "models"
    (models / "qwen3-8b").mkdir(parents=True)
    (models / "qwen3-8b" / "config.json").write_text((CONFIGS / "qwen3-8b.json").read_text())
    (models / "qwen3-8b" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16381470720}}))
    mounts = [(str(models), "/srv/models")]
    chat = _inspect("chat", ["vllm", "serve", "/srv/models/qwen3-8b", "--max-model-len", "8192",
                             "--gpu-memory-utilization", "0.3"],
                    env=["HF_TOKEN=hf_do_not_copy", "GREETING={{ lookup('pipe', 'id') }}"], mounts=mounts, started=started)
    coder = _inspect("Coder_1", ["vllm", "serve", "/srv/models/qwen3-8b", "--max-model-len", "4096",
                                 "--kv-cache-memory-bytes", "4G"],
                     ports={"8000/tcp": [{"HostPort": "8202"}]}, mounts=mounts, started=started, service="coder")
    asr = _inspect("asr", ["python3", "serve.py"], devices=(GPU1,),
                   ports={"9000/tcp": [{"HostPort": "8203"}]}, started=started)
    web = _inspect("web", ["nginx"], devices=(), ports={})
    web["HostConfig"]["DeviceRequests"] = []
    return [container_record(attrs, {"sha256:img": ["PATH=/usr/bin"]}, NOW) for attrs in (chat, coder, asr, web)]


def test_the_starting_inventory_plans_as_it_is(tmp_path):
    cards = _cards({1: [{"pid": 7, "used_mib": 3700, "container": "asr", "compose_service": "asr"}]})
    adopted = adopted_inventory("gpu7", _records(tmp_path), cards, now=NOW)
    host_vars, notes = adopted["host_vars"], adopted["notes"]
    assert [g["uuid"] for g in host_vars["llmfleet_gpus"]] == [GPU0, GPU1]
    chat, coder, asr = host_vars["llmfleet_seats"]
    assert chat == {"name": "chat", "image": "vllm/vllm-openai:v0.33.0", "current_gpu": GPU0,
                    "volumes": ["%s:/srv/models:ro" % (tmp_path / "models")], "engine": "vllm",
                    "model": "/srv/models/qwen3-8b", "max_model_len": 8192, "port": 8201,
                    "bind_address": "0.0.0.0", "served_model_names": ["chat"],
                    "model_config": "models/gpu7/chat/config.json", "weights_bytes": "15623MiB",
                    "environment": {"GREETING": "{{ lookup('pipe', 'id') }}"},
                    "secret_environment": {"HF_TOKEN": "{{ vault_chat_hf_token }}"}, "take_over": True}
    assert coder["name"] == "coder" and coder["container_name"] == "Coder_1"
    assert coder["kv_cache_memory_bytes"] == "4GiB" and coder["port"] == 8202
    assert asr == {"name": "asr", "image": "vllm/vllm-openai:v0.33.0", "current_gpu": GPU1, "engine": "fixed",
                   "memory_cap_bytes": "3700MiB", "port": 8203, "container_port": 9000, "bind_address": "0.0.0.0",
                   "take_over": True}
    assert "hf_do_not_copy" not in json.dumps(adopted)
    assert "GREETING: !unsafe \"{{ lookup('pipe', 'id') }}\"" in adopted["host_vars_text"], "kept as data"
    assert "seat chat: environment.GREETING hold Jinja markers; written !unsafe (kept as text, never templated): " \
           "check it is what the seat should run" in notes
    assert any(note.startswith("seat chat: ran util-sized (--gpu-memory-utilization 0.3)") for note in notes)
    assert any("vault_chat_hf_token" in note for note in notes)
    assert "seat asr: publishes no port; set port and container_port" not in notes
    # every seat ran two days: the reading is the plateau, with what the pinned seat ran
    assert host_vars["llmfleet_plateau_snapshot"] == "{{ inventory_dir }}/snapshots/gpu7-plateau-20261201.json"
    assert host_vars["llmfleet_plateau_ran"] == {"coder": {"kv_cache_memory_bytes": "4GiB", "image": "vllm/vllm-openai:v0.33.0",
                                                           "model": "/srv/models/qwen3-8b", "max_model_len": 4096}}
    assert json.loads(adopted["files"]["snapshots/gpu7-plateau-20261201.json"])["host"] == "gpu7"

    inventory = tmp_path / "inventory"
    for path, text in adopted["files"].items():
        (inventory / path).parent.mkdir(parents=True, exist_ok=True)
        (inventory / path).write_text(text)
    seats = [dict(seat, secret_environment={"HF_TOKEN": "hf_from_vault"}) if "secret_environment" in seat else seat
             for seat in host_vars["llmfleet_seats"]]
    assert inventory_problems("gpu7", host_vars["llmfleet_gpus"], seats) == []
    plan = build_plan("gpu7", host_vars["llmfleet_gpus"], seats, inventory_dir=str(inventory), cards=cards)
    shown = {"asr": GPU1}  # moves count from the cards, which show only asr (its compose service)
    assert sorted(plan["moves"]) == sorted(seat["name"] for seat in plan["seats"]
                                           if seat["name"] in shown and seat["gpus"] != [shown[seat["name"]]])
    assert {seat["name"]: seat["footprint_mib"] for seat in plan["seats"]}["asr"] == 3700


def _process(root, pid, argv, cgroup):
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in argv) + b"\0")
    (root / str(pid) / "cgroup").write_text(cgroup)


def test_the_service_whose_docker_run_started_a_container_is_found_in_proc(tmp_path):
    _process(tmp_path, 41, ["/usr/bin/docker", "run", "--rm", "--name", "qwen", "sha256:da40"],
             "1:name=systemd:/system.slice/qwen-fp8.service\n0::/system.slice/qwen-fp8.service\n")
    _process(tmp_path, 42, ["docker", "container", "run", "--name=embed", "img"], "0::/system.slice/embed.service\n")
    _process(tmp_path, 43, ["docker", "run", "--name", "by-hand", "img"], "0::/user.slice/user-0.slice/session-3.scope\n")
    _process(tmp_path, 44, ["docker", "ps", "--name", "x"], "0::/system.slice/cron.service\n")
    _process(tmp_path, 45, ["/bin/sh", "/opt/qwen/serve.sh"], "0::/system.slice/qwen-fp8.service\n")
    assert docker_run_services(str(tmp_path)) == {"qwen": "qwen-fp8.service", "embed": "embed.service"}


def test_a_seat_a_systemd_unit_runs_is_adopted_as_a_systemd_seat_and_its_policy_is_said(tmp_path):
    records = _records(tmp_path)
    chat = dict(records[0], systemd_unit={"name": "qwen-fp8.service", "restart": "on-failure",
                                          "fragment": "/etc/systemd/system/qwen-fp8.service"},
                image="sha256:" + "d" * 64)
    cards = _cards({1: [{"pid": 7, "used_mib": 3700, "container": "asr"}]})
    adopted = adopted_inventory("gpu7", [chat] + records[1:], cards, now=NOW)
    seats = {seat["name"]: seat for seat in adopted["host_vars"]["llmfleet_seats"]}
    assert seats["chat"]["runtime"] == "systemd" and seats["chat"]["image"] == "sha256:" + "d" * 64
    assert "runtime" not in seats["coder"], "a compose seat stays the default"
    notes = adopted["notes"]
    assert "seat chat: run by the systemd unit qwen-fp8.service now: disable it (systemctl disable --now " \
           "qwen-fp8.service) before the first rebalance starts the collection's own, llmfleet-seat-chat.service" in notes
    assert "seat chat: ran with Restart=on-failure, which never restarts vLLM after a worker fault (its API server " \
           "exits 0); the collection's seat restarts always" in notes
    assert not any(note.startswith("seat coder: ran with") for note in notes), "unless-stopped restarts a clean exit"


def test_young_seats_get_no_plateau_and_no_gpu_no_seat(tmp_path):
    adopted = adopted_inventory("gpu7", _records(tmp_path, started="2026-12-01T19:00:00Z"), _cards({}), now=NOW)
    assert "llmfleet_plateau_snapshot" not in adopted["host_vars"] and not any(
        path.startswith("snapshots/") for path in adopted["files"])
    assert "web" not in [seat["name"] for seat in adopted["host_vars"]["llmfleet_seats"]]
    assert "seat asr: not a vLLM server and holds no GPU memory now: set memory_cap_bytes" in adopted["notes"]
    assert any(note.startswith("plateau: the youngest seat has run 3600 s, under a day") for note in adopted["notes"])


def test_a_reading_that_is_not_one_is_refused():
    with pytest.raises(AdoptError, match="host gpu7: cards: expected a gpu_info result with its source and gpus"):
        adopted_inventory("gpu7", [], {"gpus": "none"})
    with pytest.raises(AdoptError, match="host gpu7: cards: expected a gpu_info result with its source and gpus"):
        adopted_inventory("gpu7", [], {"gpus": []})


VALUES = [None, True, 0, -1, 2 ** 70, 1.5, "", "x", "{{ x }}", "a\nb", "/", [], ["x"], {}, {"a": 1}, [{}]]


@pytest.mark.parametrize("seed", range(300))
def test_whatever_docker_and_the_cards_say_is_adopted_or_refused_never_crashes(tmp_path, seed):
    rng = random.Random(seed)
    attrs = _inspect("chat", ["vllm", "serve", "/srv/models/m", "--max-model-len", "8192", "--kv-cache-memory-bytes", "4G"],
                     env=["HF_TOKEN=t", "A=b"], mounts=[(str(tmp_path), "/srv/models")])
    cards = _cards({0: [{"pid": 7, "used_mib": 3700, "container": "chat"}]})
    for _edit in range(rng.randint(1, 3)):
        if rng.random() < 0.7:
            mutated = malformed(rng, attrs, VALUES, times=1)
            attrs = mutated if isinstance(mutated, dict) else attrs  # docker inspect gives objects
        else:
            cards = malformed(rng, cards, VALUES, times=1)
    try:
        adopted_inventory("gpu7", [container_record(attrs, {}, NOW)], cards, now=NOW)
    except ValueError:
        pass


def test_a_seat_whose_image_names_no_version_takes_the_one_its_boot_log_printed(tmp_path):
    records = _records(tmp_path)
    digest = "sha256:" + "d" * 64
    chat = dict(records[0], image=digest, vllm_version="0.26.0")
    coder = dict(records[1], image=digest, vllm_version=None)
    cards = _cards({1: [{"pid": 7, "used_mib": 3700, "container": "asr"}]})
    adopted = adopted_inventory("gpu7", [chat, coder] + records[2:], cards, now=NOW)
    seats = {seat["name"]: seat for seat in adopted["host_vars"]["llmfleet_seats"]}
    assert seats["chat"]["vllm_version"] == "0.26.0"
    assert "vllm_version" not in seats["coder"]
    assert "seat coder: neither its image nor its boot log names the vLLM version it runs; set vllm_version " \
           "(its KV arithmetic depends on it)" in adopted["notes"]
    tagged = adopted_inventory("gpu7", records, cards, now=NOW)
    assert all("vllm_version" not in seat for seat in tagged["host_vars"]["llmfleet_seats"]), "the tag says it"
