# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import SeatSpecError, normalize_host
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import runtime_of, systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError

DIGEST = "sha256:" + "d" * 64
TP = {"name": "qwen", "engine": "vllm", "runtime": "systemd", "port": 7773, "container": "vllm-qwen",
      "gpus": ["GPU-a", "GPU-b"], "health_path": "/health", "max_model_len": 241664,
      "kv_cache_memory_bytes": 10388766720, "gpu_memory_utilization": 0.98,
      "launch": {"image": DIGEST, "model": "/models/qwen", "tensor_parallel_size": 2, "kv_cache_dtype": "fp8",
                 "environment": {"NOTE": "it's $(touch /tmp/pwned) `x`"}, "secret_environment": ["HF_TOKEN"],
                 "volumes": ["/srv/models:/models:ro"], "served_model_names": ["qwen"]}}
SECRET = "hf_s3cr3t"


def rendered(tmp_path):
    project = tmp_path / "qwen"
    project.mkdir()
    for name, text in systemd.render(TP, "box2", {"HF_TOKEN": SECRET}, str(project)).items():
        (project / name).write_text(text)
        os.chmod(project / name, systemd.files("qwen")[name])
    return project


def test_the_unit_carries_the_policy_a_vllm_seat_needs(tmp_path):
    project = rendered(tmp_path)
    assert runtime_of(TP).NAME == systemd.NAME
    unit = (project / "llmfleet-seat-qwen.service").read_text()
    for line in ("Restart=always", "StartLimitIntervalSec=0", "OOMScoreAdjust=-500", "Type=exec",
                 "EnvironmentFile=%s/seat.env" % project, "ExecStart=%s/serve.sh" % project):
        assert re.search("^%s$" % re.escape(line), unit, re.M), line
    assert systemd.render(TP, "box2", {"HF_TOKEN": SECRET}, str(project)) == systemd.render(
        TP, "box2", {"HF_TOKEN": SECRET}, str(project)), "deterministic"
    for name in ("serve.sh", "llmfleet-seat-qwen.service"):
        assert SECRET not in (project / name).read_text(), "only seat.env holds a secret"
    assert "SEAT_SECRET_HF_TOKEN='<secret>'" in systemd.redact("seat.env", (project / "seat.env").read_text())


def test_serve_sh_runs_docker_with_every_value_as_it_was_written(tmp_path):
    """serve.sh under sh, with seat.env's variables and a docker that records its argv and
    environment: no value is split, expanded or run, and the secret is in the environment only."""
    project = rendered(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    (bin_dir / "docker").write_text("#!%s\nimport json, os, sys\njson.dump({'argv': sys.argv[1:], 'token': "
                                    "os.environ.get('HF_TOKEN')}, open(%r, 'w'))\n" % (sys.executable, str(record)))
    os.chmod(bin_dir / "docker", 0o755)
    env = {"PATH": "%s:/usr/bin:/bin" % bin_dir}
    env.update(re.findall(r"^([A-Z_0-9]+)='([^']*)'$", (project / "seat.env").read_text(), re.M))
    subprocess.run(["sh", str(project / "serve.sh")], env=env, check=True, cwd=str(tmp_path))
    got = json.loads(record.read_text())
    argv = got["argv"]
    assert got["token"] == SECRET and SECRET not in argv
    assert not os.path.exists("/tmp/pwned"), "a value ran as a command"
    assert argv[:3] == ["run", "--name", "vllm-qwen"]
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-a,GPU-b"'
    assert argv[argv.index("--publish") + 1] == "127.0.0.1:7773:7773", "the default bind address"
    assert "NOTE=it's $(touch /tmp/pwned) `x`" in argv and "HF_TOKEN" in argv
    health = argv[argv.index("--health-cmd") + 1]
    assert health.startswith("python3 -c '") and "7773" in health
    image = argv.index(DIGEST)
    assert argv[image + 1:image + 3] == ["/models/qwen", "--port"]
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == "10388766720"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_a_project_directory_the_unit_cannot_name_safely_is_refused():
    for bad in ("relative/qwen", "/srv/my seats/qwen", "/srv/seats/other", None):
        with pytest.raises(RenderError, match="project directory"):
            systemd.render(TP, "box2", {"HF_TOKEN": SECRET}, bad)


GPUS = [{"index": 0, "uuid": "GPU-a", "memory_total_mib": 81559}]


def seat(**fields):
    return dict({"name": "s1", "engine": "vllm", "model": "/m", "model_config": "models/m/config.json",
                 "max_model_len": 4096, "image": "vllm/vllm-openai:v0.33.0", "port": 8001}, **fields)


@pytest.mark.parametrize("fields, expected", [
    ({"image": "vllm/vllm-openai:latest"}, "image: expected a pinned image"),
    ({"image": "vllm/vllm-openai"}, "image: expected a pinned image"),
    ({"restart": "on-failure"}, "restart: expected always or unless-stopped: a worker fault makes vllm's API server exit 0"),
    ({"runtime": "systemd", "restart": "unless-stopped"}, "restart: expected one of always, on-failure, no"),
    ({"runtime": "podman"}, "runtime: expected compose or systemd"),
    ({"runtime": ["systemd"]}, "runtime: expected compose or systemd, got ['systemd']"),
    ({"runtime": {"kind": "systemd"}}, "runtime: expected compose or systemd"),
    ({"restart": ["always"]}, "restart: expected one of always, unless-stopped, on-failure, no"),
    ({"restart": "always\n; rm -rf /"}, "restart: expected one of always"),
    ({"image": "vllm/vllm-openai:latest", "allow_floating_image": float("nan")},
     "allow_floating_image: expected true or false, got nan"),
    ({"allow_floating_image": "yes"}, "allow_floating_image: expected true or false"),
])
def test_a_seat_whose_runtime_restart_or_image_would_not_hold_is_refused(fields, expected):
    with pytest.raises(SeatSpecError, match=re.escape(expected)):
        normalize_host("box", GPUS, [seat(**fields)])


def test_a_pinned_or_opted_in_image_passes():
    for fields in ({"image": DIGEST, "runtime": "systemd", "vllm_version": "0.33.0"},
                   {"image": "vllm/vllm-openai@" + DIGEST, "vllm_version": "0.33.0"},
                   {"image": "vllm/vllm-openai:latest", "allow_floating_image": True, "vllm_version": "0.33.0"},
                   {"image": "registry:5000/vllm", "allow_floating_image": True, "allow_nearest_vllm_release": True}):
        spec = normalize_host("box", GPUS, [seat(**fields)])
        assert spec["seats"][0]["runtime"] == fields.get("runtime", "compose")


def test_a_tp4_seat_gets_one_device_per_rank_and_is_gated_on_four_workers(tmp_path):
    from ansible_collections.llmfleet.seats.plugins.module_utils._engines import vllm
    from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log
    seat = dict(TP, gpus=["GPU-a", "GPU-b", "GPU-c", "GPU-d"], launch=dict(TP["launch"], tensor_parallel_size=4))
    project = tmp_path / "qwen"
    files = systemd.render(seat, "box2", {"HF_TOKEN": SECRET}, str(project))
    assert all("SEAT_GPU_%d='GPU-%s'" % (rank, letter) in files["seat.env"] for rank, letter in enumerate("abcd"))
    assert '--gpus \'"device=\'"${SEAT_GPU_0:?}","${SEAT_GPU_1:?}","${SEAT_GPU_2:?}","${SEAT_GPU_3:?}"\'"\'' \
        in files["serve.sh"]
    assert "--tensor-parallel-size 4" in files["serve.sh"]
    line = ("(EngineCore pid=20) (Worker_TP%d pid=3%d) INFO 12-02 05:47:55 [gpu_worker.py:1] Initial free memory "
            "78.1 GiB, reserved 9.68 GiB memory for KV Cache as specified by kv_cache_memory_bytes config.")
    gated = dict(seat, kv_cache_tokens=1, max_concurrency=1.0)
    four = parse_boot_log("\n".join(line % (rank, rank) for rank in range(4)))
    three = parse_boot_log("\n".join(line % (rank, rank) for rank in range(3)))
    ok = [g for g in vllm.boot_log_gates(gated, four) if g["gate"] == "kv_reserved_per_rank"][0]
    short = [g for g in vllm.boot_log_gates(gated, three) if g["gate"] == "kv_reserved_per_rank"][0]
    assert ok["ok"] and not short["ok"] and "Worker_TP3 (no line)" in short["detail"]
