"""The twin's radiance 1.8.1 stand-in (tests/twin/seat/radiance) as plain processes over the
simulated GPU driver, with the host's RAM simulated: its refusals, its boot ledger (its own
derivation of the funding formula, compared with the collection's), what it holds on the cards
and pins of the host, its mover, its refusal past the cache, and the host it kills when a pin
outgrows the RAM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.radiance import funding, pin_ledger
from support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
RADIANCE = REPO / "tests" / "twin" / "seat" / "radiance"
DRIVER = REPO / "tests" / "twin" / "fakegpu" / "fakegpud.py"
PROFILE = REPO / "tests" / "integration" / "fleets" / "twin-radiance" / "models" / "radiance-moe" / "radiance.json"
CARDS = (("GPU-7a1c0009-0000-4000-8000-000000000001", 26624), ("GPU-7a1c0009-0000-4000-8000-000000000002", 27320))
HOST_MIB = 98304


@pytest.fixture
def driver(tmp_path):
    initial = tmp_path / "initial.json"
    initial.write_text(json.dumps({
        "schema": 1, "faults": {}, "host": {"memory_mib": HOST_MIB, "pinned_mib": 0},
        "gpus": [{"index": i, "uuid": uuid, "name": "NVIDIA RTX A5000", "memory_total_mib": total,
                  "memory_reserved_mib": 0, "background_used_mib": 0, "processes": []}
                 for i, (uuid, total) in enumerate(CARDS)]}))
    sock, state, meminfo = tmp_path / "gpu.sock", tmp_path / "state.json", tmp_path / "meminfo"
    proc = subprocess.Popen([sys.executable, str(DRIVER), "--initial", str(initial), "--state", str(state),
                             "--socket", str(sock), "--meminfo", str(meminfo)],
                            stdout=open(tmp_path / "driver.log", "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "driver.log").read_text()
        time.sleep(0.05)
    yield {"socket": str(sock), "state": state, "meminfo": meminfo, "log": tmp_path / "driver.log"}
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def model(tmp_path):
    directory = tmp_path / "radiance-moe"
    directory.mkdir()
    (directory / "radiance.json").write_text(PROFILE.read_text())
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(driver, model, tmp_path, *flags, name="archon", ttm=(68000, 70000), pool=30720, tp=2):
    port = free_port()
    env = dict(os.environ, FAKEGPU_SOCKET=driver["socket"], TTM_MIN_MIB=str(ttm[0]), TTM_TARGET_MIB=str(ttm[1]),
               NVIDIA_VISIBLE_DEVICES=",".join(uuid for uuid, _total in CARDS))
    log = tmp_path / ("%s.log" % name)
    args = [sys.executable, str(RADIANCE), "serve", str(model), "--port", str(port), "--tensor-parallel-size", str(tp),
            "--served-model-name", name, "--max-num-seqs", "4", "--max-model-len", "65536",
            "--host-pool-mib", str(pool), "--prefix-cache-mib", "2048"] + list(flags)
    proc = subprocess.Popen(args, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    return proc, port, log


def ready(proc, port, log):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError("the stand-in did not become ready:\n" + log.read_text())


def ask(port, words):
    body = json.dumps({"model": "archon", "max_tokens": 16,
                       "messages": [{"role": "user", "content": "hello " * words}]}).encode()
    request = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, data=body,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def state(driver):
    return json.loads(driver["state"].read_text())


@pytest.mark.parametrize("flag", ["--vram-kv-mib", "--vram-weights-mib=4096"])
def test_the_removed_flags_are_refused(driver, model, tmp_path, flag):
    proc, _port, log = start(driver, model, tmp_path, *([flag, "4096"] if "=" not in flag else [flag]))
    assert proc.wait(timeout=30) == 2
    assert "no longer exists in radiance 1.8.1" in log.read_text()


def test_a_ttm_limit_below_ttm_min_refuses_the_start(driver, model, tmp_path):
    proc, _port, log = start(driver, model, tmp_path, ttm=(72000, 70000))
    assert proc.wait(timeout=30) == 1
    assert "the TTM limit is 70000 MiB (TTM_TARGET_MIB 70000, host RAM 98304 MiB), below TTM_MIN_MIB 72000 MiB: " \
           "refusing to start" in log.read_text()
    assert state(driver)["host"]["pinned_mib"] == 0


def test_its_ledger_is_the_collections_formula_and_it_holds_what_it_prints(driver, model, tmp_path):
    proc, port, log = start(driver, model, tmp_path)
    ready(proc, port, log)
    profile = json.loads(PROFILE.read_text())
    terms = dict(profile, card_total_mib=[total for _uuid, total in CARDS], gpu_headroom_mib=96, host_pool_mib=30720,
                 max_num_seqs=4, max_model_len=65536, prefix_cache_mib=2048, tp=2, retained=profile["checkpoint_retained"],
                 ttm_min_mib=68000, ttm_target_mib=70000,
                 plane_mib=profile["printed_experts_mib"] + profile["printed_host_pool_mib"] - 2 * profile["unit_max_mib"])
    budget, ledger = funding(terms), pin_ledger(terms)
    text = log.read_text()
    assert "claimable: %d MiB a card" % budget["capacity_mib"] in text
    assert "kv: the cache can grow to %.2f GiB a card -- %d tokens of context, %d sessions at 65536" % (
        budget["vram_kv_bytes"] / 2 ** 30, budget["kv_tokens"], budget["sessions"]) in text
    assert text.count("pools: vram_kv %d bytes" % budget["vram_kv_bytes"]) == 2
    assert "pinned host memory: %.2f MiB" % ledger["pin_ledger_mib"] in text
    held = {gpu["uuid"]: sum(p["used_mib"] for p in gpu["processes"]) for gpu in state(driver)["gpus"]}
    assert set(held.values()) == {min(total for _uuid, total in CARDS) - 96}, "the smallest card's budget, drift in"
    assert state(driver)["host"]["pinned_mib"] == 67456
    meminfo = driver["meminfo"].read_text()
    assert "MemTotal:       %8d kB" % (HOST_MIB * 1024) in meminfo
    assert "MemAvailable:   %8d kB" % ((HOST_MIB - 2048 - 67456) * 1024) in meminfo
    assert ask(port, 100) == 200 and ask(port, 100) == 200
    assert log.read_text().count("mover: lent 1 slots (329.00 MiB) to the expert slab") == 2
    assert ask(port, 65536) == 400, "past max_model_len"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    wait_for(lambda: state(driver)["host"]["pinned_mib"] == 0, 30, "its pin to be the host's again")


def test_a_pin_past_the_hosts_ram_kills_every_gpu_process_of_the_host(driver, model, tmp_path):
    first, port, log = start(driver, model, tmp_path)
    ready(first, port, log)
    second, _port, _log = start(driver, model, tmp_path, name="second", ttm=(1, HOST_MIB), pool=30000, tp=1)
    assert second.wait(timeout=30) != 0
    assert first.wait(timeout=30) == -signal.SIGKILL, "the first endpoint dies with the host"
    assert "host out of memory: pinned memory exhausted the host's RAM" in driver["log"].read_text()
