"""seat_demand against a real Prometheus scraping three of the vLLM stand-in's seats every second:
one driven with known traffic (short answers, and four runaway replies at once), one idle, and one
serving the busy seat's name elsewhere. The module's figures are the traffic's, computed here from
the replies' own token counts the way Prometheus computes them, read at the busy seat's own scrape
target, never summed with the other seat of the same name."""

from __future__ import annotations

import json
import math
import re
import shutil
import threading

import pytest
import yaml
from conftest import REPO_ROOT, run_ansible
from support.adhoc import run_module
from support.prometheus import PrometheusServer, one_two_five, prometheus_quantile
from support.wait import wait_for
import test_fake_vllm as fake

GPU0, GPU1, QWEN3_8B = fake.GPU0, fake.GPU1, fake.QWEN3_8B
gpus, models, seats = fake.gpus, fake.models, fake.seats   # the seat fixtures, shared

pytestmark = pytest.mark.slow

PINNED = ["--max-model-len", "32768", "--kv-cache-memory-bytes", "8589934592", "--gpu-memory-utilization", "0.1"]
RUNAWAYS, RUNAWAY_TOKENS = 4, 3000
FV_ML1 = REPO_ROOT / "inventories" / "fv-ml1"


def test_a_seats_demand_is_what_its_traffic_was(gpus, models, seats, tmp_path):
    config = models("qwen3-8b", QWEN3_8B)
    busy = seats(config, "--served-model-name", "gen-small", *PINNED, env={"FAKE_VLLM_STEP_DELAY_MS": "1"})
    # fv-ml1's own names: gen-small, and meromero-rp (served as char-rp), idle
    idle = seats(config, "--served-model-name", "char-rp", *PINNED, device=GPU1)
    # the same name on a second target, as on a second host: it must not be summed with the first
    elsewhere = seats(config, "--served-model-name", "gen-small", *PINNED, device=GPU1)
    server = PrometheusServer(tmp_path, ["127.0.0.1:%d" % seat.port for seat in (busy, idle, elsewhere)])
    try:
        # the counters' first samples are before any traffic
        wait_for(lambda: len(server.query('vllm:request_prompt_tokens_count{model_name="gen-small"}')) == 2,
                 60, "Prometheus's first scrape of both gen-small seats")
        usage = []
        for words in (3, 10, 40, 120, 400, 900, 1500) * 3:
            status, reply = busy.chat([{"role": "user", "content": " ".join(["word"] * words)}], max_tokens=64)
            assert status == 200, reply
            usage.append(reply["usage"])
        runaways = []

        def runaway(words):
            status, reply = busy.chat([{"role": "user", "content": "[runaway] " + " ".join(["tell"] * words)}],
                                      max_tokens=RUNAWAY_TOKENS)
            assert status == 200, reply
            runaways.append(reply["usage"])
        threads = [threading.Thread(target=runaway, args=(200 * (n + 1),)) for n in range(RUNAWAYS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        usage += runaways
        total = len(usage)
        counted = 'vllm:request_prompt_tokens_count{instance="127.0.0.1:%d"}' % busy.port
        wait_for(lambda: [float(s["value"][1]) for s in server.query(counted)] == [float(total)], 60,
                 "Prometheus's scrape after the last request")
        # the window ends at that scrape: the counters' increase is exact, not extrapolated
        at = float(server.query("timestamp(%s)" % counted)[0]["value"][1])

        # the plan's KV figure is not what the seat ran with: the engine's own is used
        # fv-ml1's own seat names: the snapshot this call returns is that host's
        seat_list = [{"name": "gen-small", "served_model_names": ["gen-small", "gen-small-alias"],
                      "kv_cache_tokens": 999, "port": busy.port},
                     {"name": "meromero-rp", "model_name": "char-rp", "port": idle.port},
                     {"name": "ghost", "model_name": "nobody", "port": 9}]
        asked = {"prometheus_url": server.url, "seats": seat_list, "window": "1h", "step": "1s", "at": at,
                 "runaway_tokens": 2500}
        rc, result = run_module("llmfleet.seats.seat_demand", dict(asked, instance_host="127.0.0.1", host="fv-ml1"))
        rc_unsure, unsure = run_module("llmfleet.seats.seat_demand", asked)
        status, metrics = busy.http("/metrics")
        ran_with = dict(re.findall(r'(num_gpu_blocks|block_size)="(\d+)"', metrics))
        (tmp_path / "kept").mkdir()
        # the operator's path: their inventory, planned from its recorded cards, and their Prometheus;
        # nothing reaches the host (it runs here, and only the controller asks Prometheus)
        playbook = run_ansible([
            "ansible-playbook", "-i", str(FV_ML1 / "hosts.yml"), "playbooks/calibrate.yml",
            "-e", "ansible_connection=local", "-e", "ansible_host=127.0.0.1",
            "-e", "seat_plan_cards_source=snapshot",
            "-e", "seat_plan_cards_snapshot=%s" % (FV_ML1 / "snapshots" / "plateau-20261007.json"),
            "-e", json.dumps({"calibrate_prometheus_url": server.url, "calibrate_window": "1h", "calibrate_step": "1s",
                              "calibrate_at": at, "calibrate_runaway_tokens": 2500,
                              "calibrate_snapshot_path": str(tmp_path / "kept" / "demand-fv-ml1.json")})],
            extra_env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    finally:
        server.stop()
    assert rc == 0, result
    chat, quiet, ghost = result["seats"]
    bounds = one_two_five(32768)
    prompts = [u["prompt_tokens"] for u in usage]
    replies = [u["completion_tokens"] for u in usage]
    assert [u["completion_tokens"] for u in runaways] == [RUNAWAY_TOKENS] * RUNAWAYS
    assert chat["metrics"] and chat["requests"] == total and chat["detail"] == ""
    assert chat["instance"] == "127.0.0.1:%d" % busy.port and status == 200
    assert any(line.startswith("gen-small ") and " %d over 2000 tokens" % RUNAWAYS in line for line in result["table"])
    assert (chat["kv_cache_tokens"], chat["kv_cache_tokens_from"]) == (
        int(ran_with["num_gpu_blocks"]) * int(ran_with["block_size"]), "engine")
    assert chat["prompt_tokens"] == {"p50": round(prometheus_quantile(0.5, bounds, prompts), 1),
                                     "p99": round(prometheus_quantile(0.99, bounds, prompts), 1)}
    assert chat["generation_tokens"] == {"p50": round(prometheus_quantile(0.5, bounds, replies), 1),
                                         "p99": round(prometheus_quantile(0.99, bounds, replies), 1)}
    assert chat["runaways"] == {"longer_than": 2000, "replies": RUNAWAYS}
    assert chat["preemptions"] == 0 and chat["peak_waiting"] == 0
    # the four runaways ran side by side for seconds: a one-second scrape saw them together, and
    # the stand-in's KV usage is the prompts in flight over its KV tokens
    assert chat["peak_running"] == RUNAWAYS
    assert chat["peak_kv_tokens"] == sum(u["prompt_tokens"] for u in runaways)
    # the plot: the busy seat's KV in use over the window, its peak the one measured, under its budget
    assert "KV in use (each step's most): most {:,} tokens".format(chat["peak_kv_tokens"]) in result["svg"]
    assert "KV budget {:,} tokens".format(chat["kv_cache_tokens"]) in result["svg"]
    assert quiet["metrics"] and quiet["requests"] == 0
    assert quiet["detail"] == "no traffic in the 1h before the window's end" and quiet["prompt_tokens"] is None
    assert not ghost["metrics"] and ghost["detail"] == \
        "no vLLM metrics with model_name nobody at 127.0.0.1:9 in the 1h before the window's end"
    # without the host of its targets, a name served twice gets no figures, and the operator is told why
    assert rc_unsure == 0, unsure
    both = sorted("127.0.0.1:%d" % seat.port for seat in (busy, elsewhere))
    assert unsure["seats"][0]["requests"] is None and unsure["seats"][0]["detail"] == (
        "2 scrape targets serve model_name gen-small (%s): set instance_host to read this host's seat alone"
        % ", ".join(both))
    assert unsure["seats"][1]["requests"] == 0, "a name served once needs no instance_host"

    assert playbook.returncode == 0, playbook.stdout[-3000:] + playbook.stderr[-2000:]
    tasks = json.loads(playbook.stdout)["plays"][0]["tasks"]
    asked = next(t for t in tasks if t["task"]["name"] == "Ask Prometheus what each vLLM seat was asked for")
    planned = {seat["seat"]: seat for seat in asked["hosts"]["fv-ml1"]["seats"]}
    assert sorted(planned) == ["coder", "cyberprev", "erp-seat", "gen-small", "intern-decision", "meromero-rp",
                               "voices"], "every vLLM seat of the plan, the fixed tenants left out"
    # fv-ml1's ports are not the stand-ins': its gen-small is the ambiguous name, and says so
    assert planned["gen-small"]["detail"] == unsure["seats"][0]["detail"]
    assert planned["meromero-rp"]["model_name"] == "char-rp" and planned["meromero-rp"]["requests"] == 0
    assert planned["meromero-rp"]["kv_cache_tokens_from"] == "engine"
    assert not planned["coder"]["metrics"]
    table = next(t for t in tasks if t["task"]["name"] == "Show each seat's demand beside its KV")
    lines = table["hosts"]["fv-ml1"]["msg"]
    assert lines[0].split()[:2] == ["seat", "requests"]
    assert any(line.startswith("gen-small ") and "set instance_host" in line for line in lines), lines
    kept = json.loads((tmp_path / "kept" / "demand-fv-ml1.json").read_text())
    assert (kept["format"], kept["host"]) == ("llmfleet.seats/demand/1", "fv-ml1")
    assert [seat["seat"] for seat in kept["seats"]] == [seat["seat"] for seat in asked["hosts"]["fv-ml1"]["seats"]]
    assert server.url not in json.dumps(kept), "the snapshot names no server"
    plot = (tmp_path / "kept" / "demand-fv-ml1.svg").read_text()
    assert plot.startswith("<svg") and "meromero-rp (char-rp)" in plot and server.url not in plot

    # the operator's next step: gen-small sized from what it was asked for, its pin dropped
    assert rc == 0 and result["snapshot"]["host"] == "fv-ml1"
    snapshot = tmp_path / "demand-measured.json"
    snapshot.write_text(json.dumps(result["snapshot"]))
    inventory = tmp_path / "inventory"
    shutil.copytree(FV_ML1, inventory)
    host_vars = inventory / "host_vars" / "fv-ml1.yml"
    fleet = yaml.safe_load(host_vars.read_text())
    gen_small = next(seat for seat in fleet["llmfleet_seats"] if seat["name"] == "gen-small")
    del gen_small["kv_cache_memory_bytes"]
    gen_small["kv_sizing"] = "demand"
    host_vars.write_text(yaml.safe_dump(fleet))
    sized, table = _sized(inventory, snapshot)
    demand = math.ceil(chat["peak_kv_tokens"] * 1.25)
    ours = sized["gen-small"]
    assert ours["kv_rule"] == "demand: peak {:,} tokens x 1.25".format(chat["peak_kv_tokens"])
    assert ours["calibration"]["demand_tokens"] == demand and ours["kv_cache_tokens"] >= demand
    assert ours["calibration"]["by_demand_bytes"] == ours["kv_cache_memory_bytes"]
    assert ours["calibration"]["by_rule_bytes"] != ours["kv_cache_memory_bytes"], "both are shown, and differ"
    assert sized["meromero-rp"]["calibration"]["sized_by"] == "rule", "the inventory says which, per seat"
    row = next(line for line in table if line.startswith("| gen-small | %s |" % "{:,}".format(total)))
    assert "| **demand** |" in row and "%d replies longer than 2,000 tokens" % RUNAWAYS in row


def test_a_prometheus_that_cannot_answer_is_one_line(tmp_path):
    rc, result = run_module("llmfleet.seats.seat_demand", {
        "prometheus_url": "http://127.0.0.1:9", "seats": [{"name": "chat"}], "window": "7d"})
    assert rc != 0 and result["msg"].startswith("cannot reach http://127.0.0.1:9"), result["msg"]
    rc, result = run_module("llmfleet.seats.seat_demand", {
        "prometheus_url": "http://127.0.0.1:9", "seats": [{"name": "chat"}], "window": "7 days"})
    assert result["msg"] == "window: expected a duration such as 90s, 30m, 12h, 7d or 2w, got '7 days'"
    assert "Traceback" not in json.dumps(result)


def _sized(inventory, snapshot):
    """kv_sizing.yml on ``inventory`` with the demand snapshot: every seat as the plan sizes it."""
    proc = run_ansible(["ansible-playbook", "-i", str(inventory / "hosts.yml"), "playbooks/kv_sizing.yml",
                        "-e", json.dumps({"llmfleet_demand_snapshot": str(snapshot)})],
                       extra_env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    sized = next(t for t in tasks if t["task"]["name"] == "Size each seat by its engine, as the plan does")
    table = next(t for t in tasks if t["task"]["name"] == "Print the sizing table")
    return {seat["name"]: seat for seat in sized["hosts"]["fv-ml1"]["seats"]}, table["hosts"]["fv-ml1"]["msg"]
