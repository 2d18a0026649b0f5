#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_gates
short_description: The rebalance's gates for seats before and after they boot
version_added: 0.1.0
description:
  - Evaluates the gates of a rebalance and returns every one with its measured and expected
    value; fails, naming each failed gate with its numbers, when any does not pass.
  - O(phase=before_start) needs O(cards), a M(llmfleet.seats.gpu_info) result read just before.
    Free memory on each of the seat's GPUs, counting what the seat itself holds now, must cover
    its footprint plus O(margin_mib); for vLLM it must also pass vLLM's own startup check
    C(free >= ceil(total x gpu_memory_utilization)).
  - O(phase=after_boot) waits for each seat's C(/health) to answer 200 (up to
    O(health_timeout) seconds; it stops early when the container exits), then checks the
    container runs without restarts, C(/v1/models) lists the served names with the planned
    C(max_model_len), the boot log's reserved KV bytes, C(GPU KV cache size) and concurrency equal
    the plan, and the log has no OOM or FlashInfer fall-back line; with O(runtime_probe), one
    request near C(max_model_len) must succeed (boot is not runtime, seed 003).
  - O(phase=after_boot_memory) and O(phase=plateau) need O(cards) and O(plan_gpus). Free memory
    on the GPUs in O(gpus) must be at least the margin and at least the plan's spare at boot (or
    at plateau) less O(tolerance_mib).
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
options:
  phase:
    description: Which gates to evaluate.
    type: str
    required: true
    choices: [before_start, after_boot, after_boot_memory, plateau]
  seats:
    description:
      - The seats, as entries of a M(llmfleet.seats.seat_plan) plan's C(seats).
    type: list
    elements: dict
    default: []
  cards:
    description: A M(llmfleet.seats.gpu_info) result read now.
    type: dict
  plan_gpus:
    description: The plan's C(gpus) entries.
    type: list
    elements: dict
    default: []
  gpus:
    description: The GPU UUIDs whose memory to check in the memory phases.
    type: list
    elements: str
    default: []
  margin_mib:
    description: Memory to keep free on a GPU beyond the footprints.
    type: int
    default: 512
  tolerance_mib:
    description: How far below the plan's predicted spare the measured free memory may be.
    type: int
    default: 512
  health_timeout:
    description: Seconds to wait for a seat's C(/health) to answer 200.
    type: int
    default: 1200
  health_interval:
    description: Seconds between C(/health) polls.
    type: int
    default: 5
  runtime_probe:
    description: Send one long request (about O(runtime_probe_fraction) of C(max_model_len)).
    type: bool
    default: false
  runtime_probe_fraction:
    description: The probe's prompt length as a fraction of C(max_model_len).
    type: float
    default: 0.9
  address:
    description: Where the seats' ports answer, seen from the host the module runs on.
    type: str
    default: 127.0.0.1
  api_key:
    description: The seats' C(--api-key), if they use one.
    type: str
  docker_host:
    description: The Docker Engine to ask; defaults to C(DOCKER_HOST), then the CLI's default.
    type: str
requirements:
  - The C(docker) CLI on the target for O(phase=after_boot).
"""

EXAMPLES = r"""
- name: Gate the wave before it starts
  llmfleet.seats.seat_gates:
    phase: before_start
    seats: "{{ plan.seats | selectattr('name', 'in', wave) }}"
    cards: "{{ cards }}"

- name: Gate the wave after it boots
  llmfleet.seats.seat_gates:
    phase: after_boot
    seats: "{{ plan.seats | selectattr('name', 'in', wave) }}"
    health_timeout: 1800
    runtime_probe: true
"""

RETURN = r"""
gates:
  description: Every gate evaluated, passed or not.
  returned: always
  type: list
  elements: dict
  contains:
    seat:
      description: The seat (or C(GPU n) for memory gates).
      type: str
    gate:
      description: The gate's name, e.g. C(free_mib_before_start), C(health), C(kv_cache_tokens).
      type: str
    ok:
      description: Whether it passed.
      type: bool
    measured:
      description: What was measured.
      type: raw
    expected:
      description: What the plan expects.
      type: raw
    detail:
      description: The gate as a sentence with its numbers.
      type: str
"""

import json
import os
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import gates as _gates
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import (
    VllmLogError,
    parse_boot_log,
    read_container_log,
)


def _http(method, url, api_key=None, body=None, timeout=10):
    """``(status, parsed JSON or text)``; status None when nothing answered."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    data = json.dumps(body).encode() if body is not None else None
    try:
        response = open_url(url, data=data, headers=headers, method=method, timeout=timeout)
        status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return None, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


class Host:
    """The target's docker CLI and the seats' ports."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.env = dict(os.environ)
        if self.params["docker_host"]:
            self.env["DOCKER_HOST"] = self.params["docker_host"]
        self.docker = module.get_bin_path("docker", required=True)

    def inspect(self, container):
        docker_host = {k: v for k, v in self.env.items() if k == "DOCKER_HOST"}
        rc, out, dummy = self.module.run_command([self.docker, "inspect", container],
                                                 environ_update=docker_host)
        if rc != 0:
            return None
        return json.loads(out)[0]

    def url(self, seat, path):
        return "http://%s:%d%s" % (self.params["address"], seat["port"], path)

    def wait_healthy(self, seat):
        """Poll /health until 200, the timeout, or the container stops or restarts: with
        ``restart: always`` a seat that dies at boot comes back, and would die again."""
        timeout, interval = self.params["health_timeout"], self.params["health_interval"]
        started = time.time()
        status = None
        while True:
            status = _http("GET", self.url(seat, seat.get("health_path", "/health")))[0]
            waited = time.time() - started
            if status == 200 or waited >= timeout:
                return status, waited
            inspect = self.inspect(seat["container"]) or {}
            state = inspect.get("State", {})
            if not state.get("Running") or state.get("Restarting") or inspect.get("RestartCount"):
                return status, waited
            time.sleep(min(interval, max(timeout - waited, 0.1)))

    def boot_log(self, container):
        return parse_boot_log(read_container_log(container, docker=self.docker, env=self.env))

    def probe(self, seat):
        """One request with a prompt near max_model_len: what boot never exercises."""
        tokens = int(seat["max_model_len"] * self.params["runtime_probe_fraction"])
        body = {"model": seat["served_model_names"][0], "max_tokens": 16,
                "messages": [{"role": "user", "content": "hello " * tokens}]}
        status, reply = _http("POST", self.url(seat, "/v1/chat/completions"),
                              self.params["api_key"], body, timeout=self.params["health_timeout"])
        detail = "" if status == 200 else str(reply)[:300]
        return tokens, status, detail


def after_boot(host, seat):
    gates = []
    status, waited = host.wait_healthy(seat)
    gates.append(_gates.container_gate(seat, host.inspect(seat["container"])))
    gates.append(_gates.health_gate(seat, status, waited, host.params["health_timeout"]))
    if seat["engine"] != "vllm":
        return gates
    if status == 200:
        models_status, models = _http("GET", host.url(seat, "/v1/models"), host.params["api_key"])
        gates.append(_gates.models_gate(seat, models if models_status == 200 else None))
    try:
        gates.extend(_gates.boot_log_gates(seat, host.boot_log(seat["container"])))
    except VllmLogError as exc:
        gates.append(_gates.gate(seat["name"], "boot_log", False, None, "readable", str(exc)))
    if status == 200 and host.params["runtime_probe"]:
        gates.append(_gates.runtime_probe_gate(seat, *host.probe(seat)))
        gates.append(_gates.container_gate(seat, host.inspect(seat["container"])))
    return gates


def main():
    module = AnsibleModule(
        argument_spec={
            "phase": {"type": "str", "required": True,
                      "choices": ["before_start", "after_boot", "after_boot_memory", "plateau"]},
            "seats": {"type": "list", "elements": "dict", "default": []},
            "cards": {"type": "dict"},
            "plan_gpus": {"type": "list", "elements": "dict", "default": []},
            "gpus": {"type": "list", "elements": "str", "default": []},
            "margin_mib": {"type": "int", "default": 512},
            "tolerance_mib": {"type": "int", "default": 512},
            "health_timeout": {"type": "int", "default": 1200},
            "health_interval": {"type": "int", "default": 5},
            "runtime_probe": {"type": "bool", "default": False},
            "runtime_probe_fraction": {"type": "float", "default": 0.9},
            "address": {"type": "str", "default": "127.0.0.1"},
            "api_key": {"type": "str", "no_log": True},
            "docker_host": {"type": "str"},
        },
        required_if=[("phase", "before_start", ["cards"]), ("phase", "after_boot_memory", ["cards"]),
                     ("phase", "plateau", ["cards"])],
        supports_check_mode=True,
    )
    params = module.params
    phase = params["phase"]
    try:
        if phase == "before_start":
            gates = [g for seat in params["seats"]
                     for g in _gates.before_start(seat, params["cards"], params["margin_mib"])]
        elif phase == "after_boot":
            host = Host(module)
            gates = [g for seat in params["seats"] for g in after_boot(host, seat)]
        else:
            gates = _gates.memory_gates(params["plan_gpus"], params["cards"], set(params["gpus"]),
                                        params["margin_mib"], params["tolerance_mib"],
                                        "plateau" if phase == "plateau" else "boot")
    except (KeyError, TypeError) as exc:
        module.fail_json(msg="seats/cards/plan_gpus: expected seat_plan and gpu_info results, "
                             "missing or malformed %s" % exc)
    if _gates.failed(gates):
        module.fail_json(msg="gate failed: %s" % _gates.summary(gates), gates=gates)
    module.exit_json(changed=False, gates=gates)


if __name__ == "__main__":
    main()
