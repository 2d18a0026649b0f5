"""vllm_boot_info on real boots of the twin's vLLM seat: the log reader on the seat's own output
for each way a boot ends, the module through a real `ansible` command, and `container` through
`docker logs` of a seat container on a private dockerd."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.adhoc import run_module
from support.dockerd import private_dockerd
from support.need import need_root_and
from support.wait import wait_for
import test_fake_vllm as fake

from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import parse_boot_log, reserved_matches

REPO = Path(__file__).resolve().parents[2]
GPU0, QWEN3_8B, TOTAL_MIB = fake.GPU0, fake.QWEN3_8B, fake.TOTAL_MIB
gpus, models, seats = fake.gpus, fake.models, fake.seats   # the seat fixtures, shared
PINNED = ["--served-model-name", "gen-small", "--max-model-len", "32768",
          "--kv-cache-memory-bytes", "8589934592", "--gpu-memory-utilization", "0.1"]


def test_a_ready_pinned_boot_reads_as_planned(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED, env={"FAKE_VLLM_WEIGHTS_BYTES": "16GiB"})
    info = parse_boot_log(seat.output)
    assert {key: info[key] for key in ("version", "boots", "ready", "kv_cache_memory_bytes",
                                       "kv_cache_memory_bytes_exact", "reserved_kv_gib",
                                       "kv_cache_tokens", "max_concurrency", "max_model_len",
                                       "model_weights_gib", "available_kv_cache_gib", "oom_events",
                                       "errors", "server_address")} == {
        "version": "0.33.0", "boots": 1, "ready": True, "kv_cache_memory_bytes": 8589934592,
        "kv_cache_memory_bytes_exact": True, "reserved_kv_gib": "8.0", "kv_cache_tokens": 58240,
        "max_concurrency": 1.78, "max_model_len": 32768, "model_weights_gib": 16.0,
        "available_kv_cache_gib": None, "oom_events": 0, "errors": [],
        "server_address": "http://0.0.0.0:%d" % seat.port}
    assert reserved_matches(8 * 2 ** 30, info)
    assert info["initial_free_gib"] == pytest.approx((TOTAL_MIB - 512) / 1024, abs=0.005)


def test_a_util_boot_reads_its_profiled_kv_and_the_suggestion(seats, models):
    seat = seats(models("qwen3-8b", QWEN3_8B), "--max-model-len", "32768", "--gpu-memory-utilization", "0.5")
    info = parse_boot_log(seat.output)
    assert info["ready"] and info["kv_cache_memory_bytes"] is None
    assert info["available_kv_cache_gib"] > 0 and info["kv_cache_tokens"] > 0
    suggested = info["suggested_kv_cache_memory_bytes"]
    assert 0 < suggested["fit_requested"] < suggested["fit_gpu"]


def test_failed_boots_read_as_the_numbers_a_gate_reports(gpus, seats, models):
    config = models("qwen3-8b", QWEN3_8B)
    gpus.call({"op": "set_background", "uuid": GPU0, "mib": 10 * 1024})
    short = seats(config, "--kv-cache-memory-bytes", "8G", wait=False)
    assert short.wait_exit() == 1
    info = parse_boot_log(short.output)
    assert info["ready"] is False and info["kv_cache_tokens"] is None
    assert info["startup_check"] == {"device": "cuda:0", "free_gib": 85.09, "total_gib": 95.59,
                                     "gpu_memory_utilization": 0.92, "requested_gib": 87.95}
    gpus.call({"op": "set_background", "uuid": GPU0, "mib": 0})

    too_long = seats(config, "--max-model-len", "131072", "--kv-cache-memory-bytes", "8G",
                     "--gpu-memory-utilization", "0.1", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
                     wait=False)
    assert too_long.wait_exit() == 1
    info = parse_boot_log(too_long.output)
    assert info["admission_check"] == {"max_model_len": 131072, "needed_gib": 18.0,
                                       "available_gib": 8.0, "estimated_max_model_len": 58224,
                                       "kv_cache_tokens": None}
    assert info["kv_cache_memory_bytes"] == 8 * 2 ** 30 and not info["ready"]

    oom = seats(config, *PINNED, env={"FAKE_VLLM_FAULT": "oom_at_boot"}, wait=False)
    assert oom.wait_exit() == 1
    info = parse_boot_log(oom.output)
    assert info["torch_oom_events"] == 1 and info["oom_events"] == 1
    assert any(e.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB")
               for e in info["errors"])


def test_a_seat_that_passed_every_boot_gate_and_died_on_its_first_request(seats, models):
    """Seed 003 as the log shows it: ready by every boot figure, then dead; exit status 0."""
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED,
                 env={"FAKE_VLLM_FAULT": "oom_on_long_request", "FAKE_VLLM_WATCHDOG_S": "0.3"})
    assert parse_boot_log(seat.output)["ready"] is True
    seat.chat([{"role": "user", "content": "long [runaway]"}], max_tokens=30000)
    assert seat.wait_exit() == 0
    info = parse_boot_log(seat.output)
    assert info["startup_complete"] and info["engine_dead"] and info["shutdown"]
    assert info["ready"] is False and info["torch_oom_events"] == 1
    assert info["kv_cache_tokens"] == 58240, "the boot figures are still there"


def test_autotuner_fallbacks_are_counted_while_the_seat_stays_up(gpus, seats, models):
    gpus.call({"op": "set_background", "uuid": GPU0, "mib": TOTAL_MIB - 26900})
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED,
                 env={"FAKE_VLLM_CREEP_MIB": "2000", "FAKE_VLLM_CREEP_SECONDS": "0.6",
                      "FAKE_VLLM_CREEP_STEPS": "3"})
    wait_for(lambda: parse_boot_log(seat.output)["autotuner_oom_fallbacks"] >= 2, 60, "two autotuner fall-backs")
    info = parse_boot_log(seat.output)
    assert info["ready"] and info["autotuner_oom_fallbacks"] >= 2
    assert info["oom_events"] == info["autotuner_oom_fallbacks"] and info["torch_oom_events"] == 0


def test_the_module_reads_the_seats_log_through_ansible(seats, models, tmp_path):
    seat = seats(models("qwen3-8b", QWEN3_8B), *PINNED)
    rc, result = run_module("llmfleet.seats.vllm_boot_info", {"log": seat.output})
    assert rc == 0, result
    assert result["changed"] is False
    assert (result["kv_cache_memory_bytes"], result["kv_cache_tokens"], result["max_concurrency"],
            result["ready"], result["oom_events"]) == (8589934592, 58240, 1.78, True, 0)


# -- container: docker logs of a seat container on a private dockerd ---------------------------

@pytest.fixture(scope="module")
def engine_and_image(tmp_path_factory):
    need_root_and("dockerd", "docker")
    from twinlib.rootfs import build_rootfs
    tarball = build_rootfs(REPO / "tests" / "twin" / "seat", tmp_path_factory.mktemp("image"),
                           ["vllm", "asr-seat"])
    with private_dockerd() as engine:
        engine.docker("import", "--change", 'ENTRYPOINT ["vllm", "serve"]',
                      "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", str(tarball), "llmfleet-test/seat:1")
        yield engine, "llmfleet-test/seat:1"


def wait_for_line(engine, container, line, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = engine.docker("logs", container, check=False)
        if line in proc.stdout + proc.stderr:
            return
        time.sleep(0.1)
    raise AssertionError("%s never logged %r:\n%s" % (container, line, proc.stdout + proc.stderr))


@pytest.mark.docker
@pytest.mark.slow
def test_the_module_reads_a_seat_container_and_its_restarts(engine_and_image, gpus, models):
    engine, image = engine_and_image
    model_dir = models("qwen3-8b", QWEN3_8B)
    name = "vllm-gen-small"
    engine.docker("run", "-d", "--name", name, "--network", "none", "--init",
                  "-v", "%s:/run/fakegpu" % Path(gpus.socket).parent,
                  "-v", "%s:/models/qwen3-8b:ro" % model_dir,
                  "-e", "NVIDIA_VISIBLE_DEVICES=%s" % GPU0, "-e", "FAKE_VLLM_WEIGHTS_BYTES=16GiB",
                  image, "/models/qwen3-8b", "--port", "8011", *PINNED)
    wait_for_line(engine, name, "Application startup complete.")
    # the seat runs in the container; the driver saw its engine by host PID
    assert [p["used_mib"] for p in gpus.processes(GPU0)] == [512 + 16384 + 8190 + 512 + 576 + 394]

    rc, result = run_module("llmfleet.seats.vllm_boot_info",
                            {"container": name, "docker_host": engine.host})
    assert rc == 0, result
    assert (result["ready"], result["boots"], result["kv_cache_memory_bytes"],
            result["kv_cache_memory_bytes_exact"], result["kv_cache_tokens"], result["max_concurrency"],
            result["max_model_len"], result["model_weights_gib"], result["model"]) == \
        (True, 1, 8589934592, True, 58240, 1.78, 32768, 16.0, "/models/qwen3-8b")

    engine.docker("restart", "--time", "10", name)
    deadline = time.monotonic() + 30
    while engine.docker("logs", name, check=False).stdout.count("Application startup complete.") < 2:
        assert time.monotonic() < deadline, engine.docker("logs", name, check=False).stdout
        time.sleep(0.1)
    # DOCKER_HOST from the environment, as the docker CLI reads it
    rc, result = run_module("llmfleet.seats.vllm_boot_info", {"container": name},
                            extra_env={"DOCKER_HOST": engine.host})
    assert rc == 0, result
    assert result["boots"] == 2 and result["ready"] and result["kv_cache_tokens"] == 58240

    rc, result = run_module("llmfleet.seats.vllm_boot_info",
                            {"container": "no-such-seat", "docker_host": engine.host})
    assert rc != 0 and result["failed"]
    assert result["msg"].startswith("container no-such-seat: docker logs failed (rc=1): ")
    assert "No such container: no-such-seat" in result["msg"]
