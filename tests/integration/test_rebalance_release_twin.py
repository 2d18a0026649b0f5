"""A seat on an older vLLM image is planned and gated with that release's KV arithmetic, on the
twin-pair fleet over real SSH: the stand-in image tagged v0.19.1 plays 0.19 (its capacity line
counts blocks per group, and it prints its own version), so the plan's tokens must be 0.19's for
the boot-log gates to pass. A build whose tag says 0.33 but which runs 0.19 is caught by the
version gate at boot and rolled back."""

from __future__ import annotations

import json
import re

import pytest

from support.rollout import (FLEET, assert_rolled_back, fleet_with, gates_failed, rebalance, report_of, state,
                             twin_pair, wait_healthy)

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import evaluate_kv_budget

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.slow]

OLDER = "vllm/vllm-openai:v0.19.1"
MISTAGGED = "llmfleet/vllm-openai:v0.33.0"  # a local build: says 0.33, runs 0.19
# Not a multiple of the block size: 0.19's tokens (blocks x 16) and 0.33's (concurrency x length)
# then differ.
LENGTH = 30001


@pytest.fixture(scope="module")
def release_fleet(tmp_path_factory):
    work = tmp_path_factory.mktemp("release-fleet")
    spec = json.loads((FLEET / "spec.json").read_text())
    spec["images"].update({OLDER: "vllm", MISTAGGED: "vllm"})
    spec["image_env"] = {MISTAGGED: {"FAKE_VLLM_VERSION": "0.19.1"}}
    (work / "spec.json").write_text(json.dumps(spec))
    with twin_pair(work / "spec.json") as inventory:
        yield {"inventory": inventory, "work": work}


def test_a_seat_on_an_older_image_is_planned_and_gated_with_its_releases_numbers(release_fleet):
    hosts = fleet_with(release_fleet["work"] / "older", alpha={"image": OLDER, "max_model_len": LENGTH})
    proc = rebalance(hosts, release_fleet["inventory"], release_fleet["work"] / "first")
    assert re.search(r"\| alpha \| compose \| `%s` \| `[^|]+:8101`[^|]* \| vLLM 0\.19\.1 \(image tag\) \|"
                     % re.escape(OLDER), " ".join(proc.stdout.split())), "the plan says whose arithmetic"
    section = report_of(release_fleet["work"] / "first")["hosts"]["twin1"]
    assert section["status"] == "applied" and all(g["ok"] for g in section["gates"]), section["gates"]
    alpha = {seat["name"]: seat for seat in section["plan"]["seats"]}["alpha"]
    assert alpha["vllm_release"] == {"version": "0.19.1", "release": "0.19.1", "nearest": False, "from": "image tag"}
    assert alpha["kv_cache_tokens"] == alpha["num_blocks"] * alpha["block_size"], "0.19 counts blocks per group"
    config = json.loads((FLEET / "models" / "qwen3-8b" / "config.json").read_text())
    latest = evaluate_kv_budget(config, LENGTH, alpha["kv_cache_memory_bytes"])
    assert latest["kv_cache_tokens"] != alpha["kv_cache_tokens"], "0.33's arithmetic would have gated it wrong"
    gates = {g["gate"]: g for g in section["gates"] if g["seat"] == "alpha"}
    assert gates["vllm_version"]["measured"] == "0.19.1"
    assert gates["kv_cache_tokens"]["measured"] == alpha["kv_cache_tokens"], "the log printed 0.19's count"


def test_a_build_running_another_release_than_its_tag_fails_the_version_gate_and_rolls_back(release_fleet,
                                                                                            tmp_path):
    wait_healthy("twin1")
    before = state("twin1")
    hosts = fleet_with(tmp_path, alpha={"image": OLDER, "max_model_len": LENGTH},
                       beta={"image": MISTAGGED, "max_model_len": LENGTH})
    proc = rebalance(hosts, release_fleet["inventory"], tmp_path / "report", check=False)
    assert proc.returncode != 0
    report = report_of(tmp_path / "report")
    assert report["hosts"]["twin1"]["status"] == "rolled_back", report["hosts"]["twin1"].get("error")
    assert {("beta", "vllm_version"), ("beta", "kv_cache_tokens")} <= set(gates_failed(report)), gates_failed(report)
    version = next(g for g in report["hosts"]["twin1"]["gates"] if (g["seat"], g["gate"]) == ("beta", "vllm_version"))
    assert version["detail"].startswith("the boot log says vLLM 0.19.1; the plan used 0.33.0's KV arithmetic "
                                        "(its image tag says 0.33.0)"), version["detail"]
    assert_rolled_back(before)
