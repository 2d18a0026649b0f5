"""gpu_plateau against a real Prometheus scraping the simulated driver's cards in DCGM exporter's
names every second, while two of the vLLM stand-in's seats creep: one settles after four steps,
the other keeps growing. The module's plateau, least free memory and creep are the driver's own
figures, and its flags say which card settled below the plan and which still creeps."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import REPO_ROOT, run_ansible
from support.adhoc import run_module
from support.litellm import free_port, stop
from support.prometheus import PrometheusServer
from support.wait import wait_for
import test_fake_vllm as fake

GPU0, GPU1, QWEN3_8B, TOTAL_MIB = fake.GPU0, fake.GPU1, fake.QWEN3_8B, fake.TOTAL_MIB
gpus, models, seats = fake.gpus, fake.models, fake.seats   # the seat fixtures, shared

pytestmark = pytest.mark.slow

EXPORTER = REPO_ROOT / "tests" / "twin" / "fakegpu" / "dcgm_exporter.py"
PINNED = ["--max-model-len", "32768", "--kv-cache-memory-bytes", "8589934592", "--gpu-memory-utilization", "0.1"]


@pytest.fixture
def dcgm(gpus, tmp_path):
    """The simulated cards as a DCGM exporter serves them, on a free port."""
    port = free_port()
    log = open(tmp_path / "dcgm.log", "w")
    proc = subprocess.Popen([sys.executable, str(EXPORTER), "--state", str(gpus.state), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _answers("http://127.0.0.1:%d/metrics" % port), 30, "the DCGM exporter")
        yield "127.0.0.1:%d" % port
    finally:
        stop(proc)
        log.close()


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def _used(gpus, uuid):
    state = json.loads(gpus.state.read_text())
    gpu = next(gpu for gpu in state["gpus"] if gpu["uuid"] == uuid)
    return gpu["background_used_mib"] + sum(process["used_mib"] for process in gpu["processes"])


def test_a_cards_plateau_and_creep_are_what_its_seats_did(gpus, models, seats, dcgm, tmp_path):
    server = PrometheusServer(tmp_path, [dcgm])
    try:
        wait_for(lambda: len(server.query("DCGM_FI_DEV_FB_USED")) == 2, 60, "Prometheus's first scrape of both cards")
        config = models("qwen3-8b", QWEN3_8B)
        # GPU 0 settles after four 200 MiB steps; GPU 1 grows 50 MiB a second for minutes
        seats(config, "--served-model-name", "settles", *PINNED,
              env={"FAKE_VLLM_CREEP_MIB": "800", "FAKE_VLLM_CREEP_SECONDS": "4", "FAKE_VLLM_CREEP_STEPS": "4"})
        seats(config, "--served-model-name", "creeps", *PINNED, device=GPU1,
              env={"FAKE_VLLM_CREEP_MIB": "30000", "FAKE_VLLM_CREEP_SECONDS": "600", "FAKE_VLLM_CREEP_STEPS": "600"})
        since = float(server.query("timestamp(DCGM_FI_DEV_FB_USED{UUID=%s})" % json.dumps(GPU0))[0]["value"][1])
        # flat for the last 8 s of scrapes: its creep is over
        flat = "changes(DCGM_FI_DEV_FB_USED{UUID=%s}[8s])" % json.dumps(GPU0)
        wait_for(lambda: (server.query(flat) or [{"value": [0, "1"]}])[0]["value"][1] == "0"
                 and time.time() - since > 12, 90, "GPU 0 settled")
        at = float(server.query("timestamp(DCGM_FI_DEV_FB_USED{UUID=%s})" % json.dumps(GPU0))[0]["value"][1])
        settled_used = _used(gpus, GPU0)
        plan_gpus = [{"index": 0, "uuid": GPU0, "spare_mib": TOTAL_MIB - settled_used + 1000},
                     {"index": 1, "uuid": GPU1}]
        rc, result = run_module("llmfleet.seats.gpu_plateau", {
            "prometheus_url": server.url, "gpus": plan_gpus, "since": since, "settle": "1s", "at": at,
            "creep_over": "5s"})
        rc_early, early = run_module("llmfleet.seats.gpu_plateau", {
            "prometheus_url": server.url, "gpus": plan_gpus, "since": since, "settle": "1h", "at": at})
        # the scheduled watch, from a window's report on the fv-ml1 inventory, kept off the host
        reports = tmp_path / "reports"
        reports.mkdir()
        (reports / "report.json").write_text(json.dumps({"run_id": "r1", "check_mode": False, "hosts": {"fv-ml1": {
            "status": "applied", "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
            "plan": {"gpus": plan_gpus}}}}))
        watch = run_ansible([
            "ansible-playbook", "-i", str(REPO_ROOT / "inventories" / "fv-ml1" / "hosts.yml"),
            "playbooks/watch_plateau.yml", "-e", "ansible_connection=local", "-e", "ansible_host=127.0.0.1",
            "-e", json.dumps({"watch_prometheus_url": server.url, "watch_report": str(reports / "report.json"),
                              "watch_settle": "1s", "watch_creep_over": "5s", "watch_at": at,
                              "watch_read_cards": False})])
    finally:
        server.stop()
    assert rc == 0, result
    settled, creeping = result["gpus"]
    # the driver's own figures: what the engine holds once its four steps are in
    assert settled["plateau_used_mib"] == settled_used and settled["least_free_mib"] == TOTAL_MIB - settled_used
    assert settled["creep_mib_per_hour"] == 0.0 and settled["settled"] is True
    assert settled["transient_peak_used_mib"] <= settled["plateau_used_mib"]
    assert settled["flags"] == ["%d MiB free at the plateau, 1000 MiB below the plan's predicted spare of %d MiB "
                                "(tolerance 512 MiB)" % (TOTAL_MIB - settled_used, TOTAL_MIB - settled_used + 1000)]
    # 50 MiB a second is 180,000 MiB an hour; a 5 s slope over 1 s scrapes of 1 s steps is close to it
    assert creeping["settled"] is False and 100_000 < creeping["creep_mib_per_hour"] < 300_000, creeping
    assert creeping["flags"][0].startswith("still creeping: +") and creeping["predicted_spare_mib"] is None
    assert result["flagged"] == [0, 1]
    assert result["table"][0].split()[:3] == ["GPU", "transient", "peak"]
    assert rc_early != 0 and early["msg"].startswith("at: the plateau is read after since + settle (1h after ")
    assert watch.returncode != 0, "flagged cards fail the scheduled run"
    assert "holds no window of it" not in watch.stdout
    said = " ".join(watch.stdout.split())
    assert "host fv-ml1: GPU 0: %s; GPU 1: still creeping: +" % settled["flags"][0] in said, watch.stdout[-3000:]
    kept = json.loads((reports / "plateau-fv-ml1.json").read_text())
    assert kept["flagged"] == [0, 1] and kept["gpus"][0]["plateau_used_mib"] == settled_used
    assert "schema" not in kept, "without the host's reading it is the verdict alone, not a snapshot a plan reads"
