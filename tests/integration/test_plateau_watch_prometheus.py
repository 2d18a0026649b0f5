"""The watch after a window, as an operator schedules it, end to end: compose seats in a private
dockerd, the simulated driver's cards naming their processes (read by gpu_info through the fake
NVML) and served in DCGM exporter's names to a real Prometheus. One seat peaks 700 MiB above what
it holds when the watch runs. ``playbooks/watch_plateau.yml`` must flag the seat that settled
above its planned footprint, and write a plateau snapshot that ``playbooks/plan.yml`` plans
against: each card at the plateau Prometheus saw, each seat's share as the host read it, and the
watch's verdict shown beside the next plan."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time

import pytest
import yaml

from conftest import REPO_ROOT, run_ansible
from support.dockerd import SLEEP_IMAGE, private_dockerd, sleeping_seats
from support.litellm import free_port, stop
from support.need import need_root_and
from support.prometheus import PrometheusServer
from support.wait import wait_for
from fakegpu.simulated import RTX_PRO_6000_MIB, build_fake_nvml, fake_gpu_env, gpu, proc, state, write_state

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EXPORTER = REPO_ROOT / "tests" / "twin" / "fakegpu" / "dcgm_exporter.py"
QWEN3_8B = REPO_ROOT / "tests" / "unit" / "fixtures" / "model_configs" / "qwen3-8b.json"
BACKGROUND_MIB, GEN_SMALL_MIB, CODER_MIB, PEAK_ABOVE_MIB = 300, 20480, 30000, 700
# the plan the window ran: gen-small was to hold 19,000 MiB, coder 30,000 (within the tolerance)
GEN_SMALL_PLANNED_MIB, CODER_PLANNED_MIB = 19000, 29800


def _cards(pids, gen_small_mib):
    return state([
        gpu(0, name="NVIDIA RTX PRO 6000", total_mib=RTX_PRO_6000_MIB, background_mib=BACKGROUND_MIB, processes=[
            proc(pids["fv-gen-small-1"], gen_small_mib, "vllm"), proc(pids["fv-coder-1"], CODER_MIB, "vllm")]),
        gpu(1, name="NVIDIA RTX PRO 6000", total_mib=RTX_PRO_6000_MIB, background_mib=200)])


def _inventory(tmp_path, uuids):
    models = tmp_path / "inventory" / "models" / "qwen3-8b"
    models.mkdir(parents=True)
    (models / "config.json").write_text(QWEN3_8B.read_text())
    host = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "llmfleet_gpus": [{"index": index, "uuid": uuid, "memory_total_mib": RTX_PRO_6000_MIB}
                          for index, uuid in enumerate(uuids)],
        "llmfleet_seats": [
            {"name": "gen-small", "engine": "vllm", "model": "/models/qwen3-8b", "port": 8101,
             "model_config": "models/qwen3-8b/config.json", "max_model_len": 32768,
             "image": "vllm/vllm-openai:v0.33.0", "weights_bytes": "16GiB", "current_gpu": 0},
            {"name": "coder", "engine": "fixed", "memory_cap_bytes": "32000MiB", "image": SLEEP_IMAGE, "port": 8102,
             "gpu": 0}]}
    path = tmp_path / "inventory" / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_hosts": {"hosts": {"twin1": host}}}}}))
    return path


def _latest(server, uuid):
    found = server.query('DCGM_FI_DEV_FB_USED{UUID="%s"}' % uuid)
    return (float(found[0]["value"][0]), int(float(found[0]["value"][1]))) if found else (0.0, None)


def test_the_watch_flags_a_seat_above_its_plan_and_the_next_plan_stands_on_its_snapshot(tmp_path):
    need_root_and("dockerd", "docker")
    with private_dockerd() as engine:
        project = tmp_path / "fv"
        project.mkdir()
        pids = sleeping_seats(engine, project)
        cards = _cards(pids, GEN_SMALL_MIB)
        uuids = [card["uuid"] for card in cards["gpus"]]
        state_path = write_state(tmp_path / "gpu" / "state.json", cards)
        port = free_port()
        exporter = subprocess.Popen([sys.executable, str(EXPORTER), "--state", str(state_path), "--port", str(port)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        server = None
        try:
            server = PrometheusServer(tmp_path, ["127.0.0.1:%d" % port])
            wait_for(lambda: _latest(server, uuids[0])[1] is not None, 60, "Prometheus's first scrape of the cards")
            since = _latest(server, uuids[0])[0]
            # past the 1 s transient, gen-small peaks; then it holds less again
            wait_for(lambda: _latest(server, uuids[0])[0] > since + 2, 30, "a scrape after the transient")
            peak = copy.deepcopy(cards)
            peak["gpus"][0]["processes"][0]["used_mib"] += PEAK_ABOVE_MIB
            write_state(state_path, peak)
            used_now = BACKGROUND_MIB + GEN_SMALL_MIB + CODER_MIB
            wait_for(lambda: _latest(server, uuids[0])[1] == used_now + PEAK_ABOVE_MIB, 30, "the peak scraped")
            write_state(state_path, cards)
            wait_for(lambda: _latest(server, uuids[0])[1] == used_now, 30, "the settled figure scraped")
            settled_at = _latest(server, uuids[0])[0]
            # flat for the 3 s the creep is measured over
            wait_for(lambda: _latest(server, uuids[0])[0] >= settled_at + 3, 30, "three settled scrapes")
            at = _latest(server, uuids[0])[0]

            reports = tmp_path / "reports"
            reports.mkdir()
            # the card settled as the plan predicted; one of its seats did not
            spare0 = RTX_PRO_6000_MIB - used_now - PEAK_ABOVE_MIB
            (reports / "report.json").write_text(json.dumps({"run_id": "r1", "check_mode": False, "hosts": {"twin1": {
                "status": "applied", "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
                "plan": {"gpus": [{"index": 0, "uuid": uuids[0], "spare_mib": spare0},
                                  {"index": 1, "uuid": uuids[1], "spare_mib": RTX_PRO_6000_MIB - 200}],
                         "seats": [{"name": "gen-small", "gpus": [uuids[0]], "footprint_mib": GEN_SMALL_PLANNED_MIB},
                                   {"name": "coder", "gpus": [uuids[0]], "footprint_mib": CODER_PLANNED_MIB}]}}}}))
            inventory = _inventory(tmp_path, uuids)
            host_env = fake_gpu_env(state_path, build_fake_nvml())
            watch = run_ansible([
                "ansible-playbook", "-i", str(inventory), "playbooks/watch_plateau.yml",
                "-e", json.dumps({"watch_prometheus_url": server.url, "watch_report": str(reports / "report.json"),
                                  "watch_settle": "1s", "watch_creep_over": "3s", "watch_at": at,
                                  "watch_docker_host": engine.host})], extra_env=host_env)
        finally:
            if server is not None:
                server.stop()
            stop(exporter)
    said = " ".join(watch.stdout.split())
    assert watch.returncode != 0, "a seat above its plan fails the scheduled run"
    over = GEN_SMALL_MIB - GEN_SMALL_PLANNED_MIB
    assert ("host twin1: GPU 0: seat gen-small holds 20,480 MiB, %s MiB above its planned footprint of 19,000 MiB"
            % "{:,}".format(over)) in said, watch.stdout[-3000:]
    assert "seat coder holds" not in said and "GPU 1" not in said.rsplit("[ERROR]", maxsplit=1)[-1], \
        "200 MiB over is within the tolerance, and GPU 1 settled as planned"

    # the plateau snapshot: the host's reading, GPU 0 raised to the peak Prometheus saw
    snapshot_path = reports / "plateau-twin1.json"
    kept = json.loads(snapshot_path.read_text())
    gpu0 = kept["gpus"][0]
    assert (kept["schema"], kept["host"]) == ("llmfleet.seats/gpu_snapshot", "twin1")
    assert gpu0["memory_used_mib"] == used_now + PEAK_ABOVE_MIB and gpu0["plateau_above_reading_mib"] == PEAK_ABOVE_MIB
    held = {p.get("seat") or p.get("compose_service"): p["used_mib"] for p in gpu0["processes"]}
    assert held == {"gen-small": GEN_SMALL_MIB, "coder": CODER_MIB}, "each seat's share is as the host read it"
    assert [(s["seat"], s["over_plan_mib"]) for s in kept["watch"]["seats"]] == [("coder", 200), ("gen-small", over)]

    # the plot beside it: the card's most is the peak, the plan's line where its spare left it
    plot = (reports / "plateau-twin1.svg").read_text()
    assert "used MiB (each step's most): most {:,} MiB".format(used_now + PEAK_ABOVE_MIB) in plot
    assert "plan {:,} MiB".format(used_now + PEAK_ABOVE_MIB) in plot and "boot transient" in plot

    # the next plan, against the watch's snapshot, with no reading of the host
    plan_dir = tmp_path / "plan"
    planned = run_ansible(["ansible-playbook", "-i", str(inventory), "playbooks/plan.yml",
                           "-e", json.dumps({"seat_plan_cards_source": "inventory", "seat_plan_report_dir": str(plan_dir),
                                             "llmfleet_plateau_snapshot": str(snapshot_path)})])
    assert planned.returncode == 0, planned.stdout[-3000:]
    plan = json.loads((plan_dir / "twin1-plan.json").read_text())
    # the 700 MiB the plateau held above the reading is memory none of the seats is known to hold
    assert plan["gpus"][0]["background_mib"] == BACKGROUND_MIB + PEAK_ABOVE_MIB
    assert plan["last_watch"]["flagged"] == [0] and plan["last_watch"]["snapshot"] == str(snapshot_path)
    text = (plan_dir / "twin1-plan.md").read_text()
    assert "### How the cards settled after the last window" in text
    assert "gen-small on GPU 0 20,480 MiB (+%s)" % "{:,}".format(over) in text
