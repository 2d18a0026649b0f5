"""Seats run by systemd, on a twin host whose PID 1 is a real systemd (tests/twin/twinlib/
sysroot.py), beside a plain host, over real SSH: `playbooks/rebalance.yml` deploys a seat pinned
by its image's digest as a unit, gates it on its journal, changes nothing the second time,
rolls a failed change back to byte-identical files, and systemd itself restarts a seat whose
server exited clean.

A host name is written into every seat file's header: on the same hosts, an inventory host name
carrying a newline and a command (which once became a line of serve.sh run as root, and a
top-level key of compose.yaml) is refused in the plan before the host is touched, and seat_files
refuses it on the host itself, writing nothing. Either way no file, unit or container on the twin
changes and the command never runs."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, run_ansible
from support.rollout import (FLEET, PLAYBOOK, address_of, assert_rolled_back, fleet_with, rebalance, report_of, state,
                             twin_pair)
from support.wait import DOCKER_HEALTH_POLL_S, DOCKER_STATE_POLL_S, wait_for

from twinlib import fleet
from twinlib.host import SYSTEMD_CONTAINER
from twinlib.sysroot import root_tarball

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.systemd, pytest.mark.slow]

UNIT = "llmfleet-seat-delta.service"
# A tensor-parallel seat across both of twin2's GPUs, run by systemd like delta.
# Its first long request allocates LONG_MIB_PER_KTOKEN MiB per 1,024 tokens of max_model_len on
# each rank (the stand-in's runtime activations): what the ladder must find.
LONG_MIB_PER_KTOKEN = 1500
TP_SEAT = {"name": "zeta", "tensor_parallel_size": 2, "port": 8203, "served_model_names": ["zeta"],
           "kv_cache_memory_bytes": "4GiB", "max_model_len": 16384,
           "environment": {"FAKE_VLLM_LONG_REQUEST_MIB_PER_KTOKEN": str(LONG_MIB_PER_KTOKEN)}}
LADDER = REPO_ROOT / "playbooks" / "ladder.yml"

# Host names that carry a newline and a command: each must be refused before it reaches a file
PROOF = "/srv/llmfleet-host-name-ran"
INJECTED = {"twin1": "twin1\ninjected: {privileged: true}\nx-%s: " % PROOF,
            "twin2": "twin2\nExecStartPre=/bin/touch %s\ntouch %s" % (PROOF, PROOF)}


def systemctl_show(*properties: str) -> dict:
    out = fleet.find_host("twin2").docker(["exec", SYSTEMD_CONTAINER, "systemctl", "show", "--property",
                                           ",".join(properties), UNIT]).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def seat_state() -> dict:
    """twin2's seat files and seat containers (not the container its systemd runs in)."""
    found = state("twin2")
    found["containers"].pop(SYSTEMD_CONTAINER)
    return found


def systemd_fleet_files(path, digest, **delta):
    """The twin-pair fleet with delta run by systemd (and ``delta``'s further fields) and zeta,
    a TP=2 seat like it, on twin2."""
    hosts = fleet_with(path, delta=dict({"runtime": "systemd", "image": digest, "vllm_version": "0.33.0"}, **delta))
    twin2 = hosts.parent / "host_vars" / "twin2.yml"
    host_vars = yaml.safe_load(twin2.read_text())
    host_vars["llmfleet_seats"].append(dict(host_vars["llmfleet_seats"][0], **TP_SEAT))
    twin2.write_text(yaml.safe_dump(host_vars, sort_keys=False))
    return hosts


@pytest.fixture(scope="module")
def systemd_fleet(tmp_path_factory):
    """twin2 booted with systemd; its seat delta runs under a unit, its image named by the local
    image ID (a digest), epsilon stays a compose seat beside it."""
    if not root_tarball().exists():
        pytest.skip("no systemd host root: run scripts/install-system-deps (tests/twin/twin build-root)")
    work = tmp_path_factory.mktemp("systemd-fleet")
    spec = json.loads((FLEET / "spec.json").read_text())
    spec["hosts"][1]["kind"] = "systemd"
    (work / "spec.json").write_text(json.dumps(spec))
    with twin_pair(work / "spec.json") as inventory:
        twin_vars = yaml.safe_load(Path(inventory).read_text(encoding="utf-8"))
        digest = twin_vars["all"]["children"]["gpu_hosts"]["hosts"]["twin2"]["twin_image_ids"][
            "vllm/vllm-openai:v0.33.0"]
        hosts = systemd_fleet_files(work, digest)
        yield {"inventory": inventory, "twin_vars": twin_vars, "hosts": hosts, "digest": digest, "work": work}


def test_a_systemd_seat_deploys_as_a_unit_and_is_gated_on_its_journal(systemd_fleet):
    report = systemd_fleet["work"] / "first"
    proc = rebalance(systemd_fleet["hosts"], systemd_fleet["inventory"], report)
    assert "| delta | systemd | `%s` (pinned by digest) |" % systemd_fleet["digest"] in proc.stdout, \
        "the plan shows what each seat runs"
    section = report_of(report)["hosts"]["twin2"]
    assert section["status"] == "applied" and all(g["ok"] for g in section["gates"]), section["gates"]
    plan = {s["name"]: s for s in section["plan"]["seats"]}
    assert (plan["delta"]["runtime"], plan["epsilon"]["runtime"]) == ("systemd", "compose")
    tokens = {g["seat"]: g["measured"] for g in section["gates"] if g["gate"] == "kv_cache_tokens"}
    assert tokens["delta"] == plan["delta"]["kv_cache_tokens"], "read from the unit's journal"
    unit = systemctl_show("ActiveState", "UnitFileState", "NRestarts")
    assert unit == {"ActiveState": "active", "UnitFileState": "enabled", "NRestarts": "0"}
    linked = fleet.find_host("twin2").docker(["exec", SYSTEMD_CONTAINER, "readlink",
                                              "/etc/systemd/system/" + UNIT]).stdout.strip()
    assert linked == "/srv/compose/delta/" + UNIT, "systemctl link: the unit is the seat's own file"
    files = state("twin2")["files"]
    assert set(name for name in files if name.startswith("delta/")) == {
        "delta/seat.env", "delta/serve.sh", "delta/" + UNIT}
    assert "SEAT_IMAGE='%s'" % systemd_fleet["digest"] in files["delta/seat.env"].decode()
    unit_text = files["delta/" + UNIT].decode()
    for policy in ("Restart=always", "StartLimitIntervalSec=0", "OOMScoreAdjust=-500"):
        assert re.search("^%s$" % policy, unit_text, re.M), policy
    journal = fleet.find_host("twin2").docker(["exec", SYSTEMD_CONTAINER, "journalctl", "--unit", UNIT,
                                               "--no-pager", "--output", "cat"]).stdout
    assert "GPU KV cache size: {:,} tokens".format(plan["delta"]["kv_cache_tokens"]) in journal


def test_a_tensor_parallel_seat_is_placed_rendered_and_gated_per_rank(systemd_fleet):
    section = report_of(systemd_fleet["work"] / "first")["hosts"]["twin2"]
    zeta = {s["name"]: s for s in section["plan"]["seats"]}["zeta"]
    assert len(zeta["gpus"]) == 2 and zeta["runtime"] == "systemd"
    gates = {g["gate"]: g for g in section["gates"] if g["seat"] == "zeta"}
    assert gates["kv_reserved_per_rank"]["ok"] and sorted(gates["kv_reserved_per_rank"]["measured"]) == [
        "Worker_TP0", "Worker_TP1"], gates["kv_reserved_per_rank"]
    assert gates["memory_per_rank"]["ok"] and len(gates["memory_per_rank"]["measured"]) == 2
    env = state("twin2")["files"]["zeta/seat.env"].decode()
    assert all("SEAT_GPU_%d='%s'" % (rank, uuid) in env for rank, uuid in enumerate(zeta["gpus"]))
    journal = fleet.find_host("twin2").docker(["exec", SYSTEMD_CONTAINER, "journalctl", "--unit",
                                               "llmfleet-seat-zeta.service", "--no-pager", "--output", "cat"]).stdout
    assert "(Worker_TP0 pid=" in journal and "(Worker_TP1 pid=" in journal


def test_a_second_run_changes_nothing(systemd_fleet, tmp_path):
    before = seat_state()
    proc = rebalance(systemd_fleet["hosts"], systemd_fleet["inventory"], tmp_path)
    assert re.findall(r"^(twin\d)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M) == [
        ("twin1", "0"), ("twin2", "0")], proc.stdout[-3000:]
    after = seat_state()
    assert after["files"] == before["files"]
    assert {name: cid for name, (cid, _running, _healthy) in after["containers"].items()} == \
        {name: cid for name, (cid, _running, _healthy) in before["containers"].items()}, "nothing restarted"


def untouched(host: str) -> dict:
    """What a refused run must leave as it was: the host's files and each container's id and
    state (its health may still be settling from the windows before)."""
    seen = state(host)
    return {"files": seen["files"],
            "containers": {name: (cid, running) for name, (cid, running, _healthy) in seen["containers"].items()}}


def proof_exists() -> bool:
    """Whether the injected command left its file on either host (or inside twin2's systemd)."""
    probe = ["exec", SYSTEMD_CONTAINER, "test", "-e", PROOF]
    in_systemd = fleet.find_host("twin2").docker(probe, check=False).returncode == 0
    return in_systemd or any(os.path.exists(fleet.find_host(host).path(PROOF)) for host in INJECTED)


def injected_inventory(fleet_files, path):
    """One inventory file whose hosts are the twin's, each under its injected name: the twin's
    address, key and known_hosts, and the fleet's host and group variables."""
    fleet_dir, twin = fleet_files["hosts"].parent, fleet_files["twin_vars"]
    group_vars = yaml.safe_load((fleet_dir / "group_vars" / "gpu_hosts.yml").read_text())
    hosts = {}
    for name, injected in INJECTED.items():
        host_vars = dict(twin["all"]["children"]["gpu_hosts"]["hosts"][name])
        host_vars.update(yaml.safe_load((fleet_dir / "host_vars" / ("%s.yml" % name)).read_text()))
        hosts[injected] = host_vars
    path.write_text(yaml.safe_dump({"all": {"vars": twin["all"]["vars"]},
                                    "gpu_hosts": {"vars": group_vars, "hosts": hosts}}))
    return path


def test_a_host_name_with_a_newline_is_refused_in_the_plan_touching_nothing(systemd_fleet, tmp_path):
    before = {host: untouched(host) for host in INJECTED}
    inventory = injected_inventory(systemd_fleet, tmp_path / "hosts.yml")
    proc = run_ansible(["ansible-playbook", "-i", str(inventory), str(PLAYBOOK),
                        "-e", "llmfleet_report_dir=%s" % (tmp_path / "report")])
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    for injected in INJECTED.values():
        assert "host %r: inventory host name: expected a host name of letters, digits" % injected in output, \
            output[-3000:]
    assert "Traceback" not in output and "UNREACHABLE" not in output
    assert {host: untouched(host) for host in INJECTED} == before, "a host was touched"
    assert not proof_exists(), "the injected command ran"


def test_seat_files_on_the_host_refuses_a_host_name_outside_the_grammar(systemd_fleet, tmp_path):
    """The renderer's own refusal, on the host: the plan's seats, rendered by seat_files over
    SSH on twin2 (its systemd seat) and twin1 (compose), with the injected name as ``host``."""
    before = {host: untouched(host) for host in INJECTED}
    playbook = tmp_path / "render.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Render the planned seats under an injected host name",
        "hosts": "gpu_hosts", "gather_facts": False,
        "roles": ["llmfleet.seats.seat_plan"],
        "post_tasks": [{
            "name": "Render",
            "llmfleet.seats.seat_files": {
                "root": "{{ seat_rebalance_root }}", "seats": "{{ seat_plan_result.seats }}",
                "host": "{{ injected[inventory_hostname] }}", "backup_tag": "inj", "backup_date": "20260101"},
        }],
    }]))
    extra = tmp_path / "injected.json"
    extra.write_text(json.dumps({"injected": INJECTED}))
    proc = run_ansible(["ansible-playbook", "-i", str(systemd_fleet["hosts"]), "-i", systemd_fleet["inventory"],
                        str(playbook), "-e", "@%s" % extra])
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert output.count("host: expected a host name of letters, digits") >= 2, output[-4000:]
    assert "Traceback" not in output and "UNREACHABLE" not in output, output[-3000:]
    assert {host: untouched(host) for host in INJECTED} == before, "a file or a container changed"
    assert not proof_exists(), "the injected command ran"
    unit = fleet.find_host("twin2").path("/srv/compose/delta/llmfleet-seat-delta.service")
    assert PROOF not in open(unit, encoding="utf-8").read(), "the injected line reached the unit"


def test_systemd_restarts_a_seat_whose_server_exited_clean(systemd_fleet):
    """A worker fault makes vLLM's API server exit 0; Restart=always is what brings it back."""
    host = fleet.find_host("twin2")
    first = host.docker(["inspect", "--format", "{{.Id}}", "vllm-delta"]).stdout.strip()
    host.docker(["stop", "--time", "5", "vllm-delta"])  # SIGTERM: the server shuts down and exits 0
    assert host.docker(["inspect", "--format", "{{.State.ExitCode}}", "vllm-delta"],
                       check=False).stdout.strip() in ("0", "")
    wait_for(lambda: systemctl_show("NRestarts")["NRestarts"] == "1", what="systemd to restart delta",
             interval=DOCKER_STATE_POLL_S)
    wait_for(lambda: seat_state()["containers"].get("vllm-delta", ("", "", False))[1:] == ("running", True),
             what="delta's new container to be healthy", interval=DOCKER_HEALTH_POLL_S)
    assert host.docker(["inspect", "--format", "{{.Id}}", "vllm-delta"]).stdout.strip() != first


def test_a_failed_change_rolls_the_systemd_seat_back(systemd_fleet, tmp_path):
    wait_for(lambda: all(healthy for _cid, running, healthy in seat_state()["containers"].values()
                         if running == "running"), what="twin2's seats healthy", interval=DOCKER_HEALTH_POLL_S)
    before = seat_state()
    hosts = systemd_fleet_files(tmp_path, systemd_fleet["digest"], max_model_len=8192,
                                environment={"FAKE_VLLM_FAULT": "oom_at_boot"})
    proc = rebalance(hosts, systemd_fleet["inventory"], tmp_path / "report", check=False)
    assert proc.returncode != 0
    section = report_of(tmp_path / "report")["hosts"]["twin2"]
    assert section["status"] == "rolled_back", section
    assert [g["gate"] for g in section["gates"] if g["seat"] == "delta" and not g["ok"]], \
        section.get("error")
    assert_rolled_back(before, "twin2")
    assert systemctl_show("ActiveState")["ActiveState"] == "active"
    backups = [name for name in seat_state()["files"] if name.startswith("delta/seat.env.bak-")]
    assert backups, "the rollback keeps the dated backup it restored from"


OPERATOR_UNIT = """[Unit]
Description=qwen, as an operator runs it by hand
[Service]
ExecStart=/opt/qwen-op/serve.sh
Restart=on-failure
[Install]
WantedBy=multi-user.target
"""
OPERATOR_SERVE = """#!/bin/sh
exec docker run --name qwen-op --gpus '"device=%s"' -p 8300:8300 -v /srv/models:/srv/models:ro \\
  %s /srv/models/qwen3-8b --port 8300 --served-model-name qwen-op --max-model-len 8192 \\
  --kv-cache-memory-bytes 2147483648 --gpu-memory-utilization 0.2
"""


def on_twin2(*command: str, check: bool = True):
    return fleet.find_host("twin2").docker(["exec", SYSTEMD_CONTAINER] + list(command), check=check)


def test_a_seat_an_operator_runs_with_systemd_is_adopted_as_a_systemd_seat(systemd_fleet, tmp_path):
    """Seed 003's box: a unit of the operator's own runs a serve script that runs the image by
    digest. adopt.yml finds the unit behind the container and writes a systemd seat."""
    gpu = fleet.find_host("twin2").gpu_state()["gpus"][1]["uuid"]
    on_twin2("mkdir", "-p", "/opt/qwen-op")
    host = fleet.find_host("twin2")
    for path, text, mode in (("/opt/qwen-op/serve.sh", OPERATOR_SERVE % (gpu, systemd_fleet["digest"]), "755"),
                             ("/etc/systemd/system/qwen-op.service", OPERATOR_UNIT, "644")):
        host.docker(["exec", "-i", SYSTEMD_CONTAINER, "sh", "-c", "cat > %s && chmod %s %s" % (path, mode, path)],
                    input=text)
    try:
        on_twin2("systemctl", "daemon-reload")
        on_twin2("systemctl", "start", "qwen-op.service")
        wait_for(lambda: seat_state()["containers"].get("qwen-op", ("", "", False))[1] == "running",
                 what="the operator's qwen-op to run", interval=DOCKER_STATE_POLL_S)
        out = tmp_path / "adopted"
        proc = run_ansible(["ansible-playbook", "-i", systemd_fleet["inventory"], "-l", "twin2",
                            str(REPO_ROOT / "playbooks" / "adopt.yml"), "-e", "adopt_output=%s" % out])
        assert proc.returncode == 0, proc.stdout[-4000:]
        text = (out / "host_vars" / "twin2.yml").read_text()
        seat = {s["name"]: s for s in yaml.safe_load(text)["llmfleet_seats"]}["qwen-op"]
        assert (seat["runtime"], seat["image"], seat["current_gpu"]) == ("systemd", systemd_fleet["digest"], gpu)
        assert seat["vllm_version"] == "0.33.0", "a digest names no version: the boot log's"
        assert (seat["max_model_len"], seat["kv_cache_memory_bytes"], seat["port"]) == (8192, "2GiB", 8300)
        assert "run by the systemd unit qwen-op.service now: disable it" in text
        assert "ran with Restart=on-failure, which never restarts vLLM after a worker fault" in text
        assert seat_state()["containers"]["qwen-op"][1] == "running", "adopting touches nothing"
    finally:
        on_twin2("systemctl", "disable", "--now", "qwen-op.service", check=False)
        fleet.find_host("twin2").docker(["rm", "--force", "qwen-op"], check=False)


def free_mib(uuid: str) -> int:
    """A simulated GPU's free MiB, from its driver's state."""
    gpu = next(g for g in fleet.find_host("twin2").gpu_state()["gpus"] if g["uuid"] == uuid)
    held = sum(p["used_mib"] for p in gpu["processes"])
    return gpu["memory_total_mib"] - gpu["memory_reserved_mib"] - gpu["background_used_mib"] - held


ZETA_ROUTE = """\
# the gateway's route to zeta, kept by hand
model_list:
  - model_name: zeta
    litellm_params:
      model: hosted_vllm/zeta
      api_base: http://%(address)s:8203/v1
    model_info:
      max_input_tokens: 16384   # what zeta serves
general_settings: {master_key: %(key)s}
"""


@pytest.mark.litellm
def test_the_ladder_finds_the_largest_context_that_survives_a_long_request(systemd_fleet, tmp_path):
    """The stand-in's ground truth: a rung boots with zeta's footprint unchanged (its KV is
    pinned), then its first long request needs LONG_MIB_PER_KTOKEN MiB per 1,024 tokens on each
    rank, out of what the boot left free, with the rebalance's margin (512 MiB) to spare. Each
    rung that passes writes the gateway's limit for zeta in its own window; one that fails writes
    nothing and puts nothing back, so the gateway ends at the best rung with the seat."""
    from support.litellm import RestartableLiteLLM, litellm_bin  # the litellm venv is only built for this

    zeta = {s["name"]: s for s in report_of(systemd_fleet["work"] / "first")["hosts"]["twin2"]["plan"]["seats"]}["zeta"]
    wait_for(lambda: all(healthy for _cid, running, healthy in seat_state()["containers"].values()
                         if running == "running"), what="twin2's seats healthy", interval=DOCKER_HEALTH_POLL_S)
    free = min(free_mib(uuid) for uuid in zeta["gpus"])
    values = list(range(16384, 32768 + 1, 4096))
    survives = [v for v in values if math.ceil(LONG_MIB_PER_KTOKEN * v / 1024) <= free - 512]
    assert values[0] in survives and values[-1] not in survives, "the ground truth lies inside the ladder"
    key = "sk-" + os.urandom(16).hex()
    config = tmp_path / "litellm.yaml"
    config.write_text(ZETA_ROUTE % {"address": address_of(systemd_fleet["inventory"], "twin2"), "key": key})
    proxy = RestartableLiteLLM(litellm_bin(), config, key)
    try:
        gateway = {"seat_rebalance_gateway_url": proxy.url, "seat_rebalance_gateway_api_key": key,
                   "seat_rebalance_gateway_config": str(config), "seat_rebalance_gateway_config_write": True,
                   "seat_rebalance_gateway_restart": proxy.restart_argv}
        proc = run_ansible(["ansible-playbook", "-i", str(systemd_fleet["hosts"]), "-i", systemd_fleet["inventory"],
                            str(LADDER), "-e", "seat=zeta", "-e", "ladder_high=32768",
                            "-e", "llmfleet_report_dir=%s" % tmp_path, "-e", json.dumps(gateway)], timeout=900)
        assert proc.returncode == 0, proc.stdout[-5000:]
        assert key not in proc.stdout + proc.stderr
        status, _reply = proxy.post("/v1/chat/completions", {"model": "zeta", "max_tokens": 8,
                                                             "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200, "the gateway restarted on each rung's config reaches zeta"
    finally:
        proxy.close()
    result = json.loads((tmp_path / "ladder.json").read_text())
    assert result["best"] == max(survives) and result["suggested"] == {"seat": "zeta", "max_model_len": max(survives)}
    assert [r["value"] for r in result["rungs"]][0] == 32768, "the upper end first"
    for rung in result["rungs"]:
        assert rung["passed"] == (rung["value"] in survives), rung
        assert rung["kv_cache_memory_bytes"] == 4 << 30 and rung["max_model_len"] == rung["value"]
        if rung["passed"]:
            assert rung["free_mib_after_probe"] and rung["failure_kind"] is None
        else:
            assert rung["failure_kind"] == "oom at runtime" and rung["status"] == "rolled_back"
        assert set(rung["free_mib_after_boot"]) == {"GPU 0", "GPU 1"}, "each rank's card, before the probe"
    env = seat_state()["files"]["zeta/seat.env"].decode()
    assert "SEAT_MAX_MODEL_LEN='%d'" % max(survives) in env, "the seat ends on the best rung"
    assert "best %d (it ran 16384)" % max(survives) in proc.stdout
    assert "      max_input_tokens: %d   # what zeta serves\n" % max(survives) in config.read_text(), \
        "the gateway's limit follows the seat to its best rung"
    wrote = {rung["value"] for rung in result["rungs"] if rung["passed"] and rung["value"] != 16384}
    kept = list(tmp_path.glob("litellm.yaml.bak-*"))
    assert wrote and len(kept) == len(wrote), "one dated backup per rung that changed the limit, none for a failed one"
