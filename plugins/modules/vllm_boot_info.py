#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_boot_info
short_description: Read a vLLM seat's boot log for its KV budget, capacity, readiness, OOMs and failures
version_added: 0.1.0
description:
  - Reads the log of a vLLM seat, given as text (O(log)) or read with C(docker logs) from a
    container (O(container)), and returns what vLLM said about itself at boot.
  - The KV budget it reserved (the C(reserved ... GiB memory for KV Cache as specified by
    kv_cache_memory_bytes) line), or on the C(--gpu-memory-utilization) path the KV memory it
    profiled; the C(GPU KV cache size) and C(Maximum concurrency) it computed; the weights it
    loaded; whether it reached C(Application startup complete.) and is still up; OOM events;
    and the numbers of the boot failures a gate acts on (vLLM's startup memory check, the KV
    admission check, the Mamba C(max_num_seqs) check).
  - Reads the formats of vLLM 0.10.1.1 through 0.33.0 (prefix styles, C(%.2f) against
    C(round(x, 2)) GiB, the two capacity lines of 0.10.x).
  - A container log can hold several boots (a seat with C(restart=always) that crashed); every
    figure describes the last boot, and RV(boots) says how many there were.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
requirements:
  - The C(docker) CLI on the target for O(container).
notes:
  - vLLM prints the reserved KV budget in GiB to two decimals, so that line alone gives the bytes
    only to about 5 MiB. vLLM also echoes the C(--kv-cache-memory-bytes) value exactly in its
    C(non-default args) line; when that value is consistent with the reserved line, RV(kv_cache_memory_bytes)
    is exact and RV(kv_cache_memory_bytes_exact) is true. Otherwise the planned bytes can only be
    compared the way vLLM printed them; O(expected_kv_cache_memory_bytes) does that comparison.
options:
  log:
    description:
      - The log text, for example a file read with M(ansible.builtin.slurp) or the output of
        C(docker logs).
      - Exactly one of O(log) and O(container) is required.
    type: str
  container:
    description:
      - The name or id of the seat's container; the module runs C(docker logs) on it and reads
        its stdout and stderr in the order they were written.
    type: str
  docker_host:
    description:
      - The Docker Engine for O(container), for example V(unix:///run/docker.sock). Only with
        O(container).
      - Defaults to the target's E(DOCKER_HOST), then the Docker CLI's default.
    type: str
  docker_cli:
    description:
      - The Docker CLI to run. Defaults to C(docker) on the target's E(PATH). Only with
        O(container).
    type: path
  since:
    description:
      - Only read the container's log since this time (C(docker logs --since)), for example
        V(10m) or V(2026-10-05T22:26:00). Useful to count OOM events over a window. Only with
        O(container).
    type: str
  timeout:
    description:
      - Seconds to wait for C(docker logs).
    type: int
    default: 60
  expected_kv_cache_memory_bytes:
    description:
      - The KV budget the seat was planned with, as bytes or a size such as V(5.5GiB).
      - Sets RV(kv_cache_memory_bytes_match), compared exactly when the log gives exact bytes, else
        as vLLM renders GiB (two decimals) in the version that wrote the log.
    type: raw
"""

EXAMPLES = r"""
- name: Read the boot of the gen-small seat
  llmfleet.seats.vllm_boot_info:
    container: fv-ml1-gen-small-1
  register: boot
  become: true

- name: Read the boot against the planned budget
  llmfleet.seats.vllm_boot_info:
    container: fv-ml1-gen-small-1
    expected_kv_cache_memory_bytes: 5.5GiB
  register: boot
  become: true

- name: Gate on the planned KV budget and capacity
  ansible.builtin.assert:
    that:
      - boot.ready
      - boot.kv_cache_memory_bytes_match
      - boot.kv_cache_tokens == 461215
      - boot.oom_events == 0
    fail_msg: "gen-small booted with {{ boot.kv_cache_memory_bytes }} B / {{ boot.kv_cache_tokens }} tokens; errors: {{ boot.errors }}"

- name: Count FlashInfer autotuner OOM fall-backs over the last three minutes
  llmfleet.seats.vllm_boot_info:
    container: fv-ml1-gen-1
    since: 3m
  register: window

- name: Read a log saved earlier
  llmfleet.seats.vllm_boot_info:
    log: "{{ lookup('ansible.builtin.file', 'logs/meromero-rp.log') }}"
"""

RETURN = r"""
kv_cache_tokens:
  description: The C(GPU KV cache size) in tokens; null when the boot did not get that far.
  returned: always
  type: int
  sample: 461215
max_concurrency:
  description: The C(Maximum concurrency for <max_model_len> tokens per request) figure.
  returned: always
  type: float
  sample: 1.76
max_model_len:
  description:
    - The context the seat serves (from the capacity line, else C(Using max model len)).
    - "Without either, the length a refusal names (RV(admission_check)), else the C(max_model_len=N) of the
      arguments the V0 engine's API server prints (C(args: Namespace...))."
  returned: always
  type: int
  sample: 262144
kv_cache_memory_bytes:
  description:
    - The KV budget per GPU from the C(reserved ... as specified by kv_cache_memory_bytes) line;
      exact when RV(kv_cache_memory_bytes_exact), else the printed GiB times 2**30.
    - Null on the C(--gpu-memory-utilization) path (see RV(available_kv_cache_gib)).
  returned: always
  type: int
  sample: 5905580032
kv_cache_memory_bytes_exact:
  description: Whether RV(kv_cache_memory_bytes) is the exact byte count (null when there is none).
  returned: always
  type: bool
kv_cache_memory_bytes_match:
  description:
    - Whether the boot reserved O(expected_kv_cache_memory_bytes); false when the log shows no
      reserved budget.
  returned: when O(expected_kv_cache_memory_bytes) is set
  type: bool
reserved_kv_gib:
  description: The reserved KV budget as vLLM printed it (C(5.5) in 0.33, C(5.50) in 0.10.2).
  returned: always
  type: str
  sample: "5.5"
initial_free_gib:
  description: The free memory vLLM saw on its GPU before loading, from the reserved line.
  returned: always
  type: float
available_kv_cache_gib:
  description: C(Available KV cache memory) on the C(--gpu-memory-utilization) path; may be negative.
  returned: always
  type: float
  sample: 20.37
model_weights_gib:
  description: C(Model loading took <x> GiB), per GPU.
  returned: always
  type: float
  sample: 15.27
ready:
  description:
    - The last boot reached C(Application startup complete.) and the log shows neither an engine
      death nor a shutdown after it.
  returned: always
  type: bool
startup_complete:
  description: The last boot reached C(Application startup complete.), whatever happened after.
  returned: always
  type: bool
engine_dead:
  description: The engine (or a worker) died in the last boot; vLLM's API server then exits 0.
  returned: always
  type: bool
shutdown:
  description: The API server shut down after it was ready.
  returned: always
  type: bool
oom_events:
  description:
    - OOM events in the last boot, RV(torch_oom_events) plus RV(autotuner_oom_fallbacks).
  returned: always
  type: int
torch_oom_events:
  description:
    - Distinct C(torch.OutOfMemoryError) exceptions (a traceback printed twice counts once), and the ones
      vLLM 0.11.0 reports creating a weight, counted once with their traceback.
    - "vLLM 0.11.0's report: C(Failed to create unquantized linear weights: CUDA out of memory...)."
  returned: always
  type: int
autotuner_oom_fallbacks:
  description: FlashInfer C([Autotuner]... OOM detected, falling back to default tactic) lines.
  returned: always
  type: int
errors:
  description:
    - The failures in the last boot, in order and without repeats. An exception reads as its type,
      a colon and its message, as Python prints it; vLLM's ERROR lines and argument errors read as
      printed.
  returned: always
  type: list
  elements: str
version:
  description: The vLLM version the log names.
  returned: always
  type: str
  sample: 0.33.0
model:
  description: The model the seat serves, as named in the version line or logo.
  returned: always
  type: str
boots:
  description: How many boots the log holds (0 when it names no version line).
  returned: always
  type: int
kv_cache_pool:
  description: The pool the capacity line names (C(GPU), C(GPU + host), or C(CPU) for vLLM's CPU build).
  returned: always
  type: str
cause:
  description:
    - Of RV(errors), the one that says why the boot failed - the first exception with a message of its
      own that is not the engine reporting another process's death, or vLLM 0.11.0's report of an OOM creating
      a weight; else the first error; null without errors.
  returned: always
  type: str
  sample: "ValueError: To serve at least one request with the model's max seq len (4096), ..."
startup_check:
  description: vLLM's startup memory check failed (C(free < ceil(total * util))) with these numbers.
  returned: always
  type: dict
  contains:
    device:
      description: The torch device (null before 0.33).
      type: str
    free_gib:
      description: Free memory at the snapshot.
      type: float
    total_gib:
      description: The GPU's total memory.
      type: float
    gpu_memory_utilization:
      description: The utilization asked for.
      type: float
    requested_gib:
      description: ceil(total * util).
      type: float
admission_check:
  description:
    - The KV admission check failed (one max_model_len request does not fit), in the V1 engine's words
      or the V0 engine's (C(The model's max seq len ... is larger than the maximum number of tokens that can be
      stored in KV cache ...)); figures the refusal does not give are null.
  returned: always
  type: dict
  contains:
    max_model_len:
      description: The context asked for.
      type: int
    needed_gib:
      description: KV one such request needs (V1).
      type: float
    available_gib:
      description: KV available, less the null block (V1).
      type: float
    estimated_max_model_len:
      description: The longest context that would fit (V1).
      type: int
    kv_cache_tokens:
      description: The tokens the KV cache holds (V0).
      type: int
no_kv_cache_memory:
  description: vLLM found no memory at all for KV blocks.
  returned: always
  type: bool
mamba_max_num_seqs:
  description: A hybrid model's C(max_num_seqs) exceeded its Mamba cache blocks.
  returned: always
  type: dict
  contains:
    max_num_seqs:
      description: The configured max_num_seqs.
      type: int
    available_blocks:
      description: Mamba cache blocks available.
      type: int
graph_capture_gib:
  description: The last C(Graph capturing finished ..., took <x> GiB).
  returned: always
  type: float
suggested_kv_cache_memory_bytes:
  description: On the util path, the C(--kv-cache-memory=) values vLLM suggests.
  returned: always
  type: dict
  contains:
    fit_requested:
      description: Bytes that fit the requested utilization.
      type: int
    fit_gpu:
      description: Bytes that fill the GPU.
      type: int
server_address:
  description: Where the API server listens.
  returned: always
  type: str
  sample: http://0.0.0.0:8011
init_engine_seconds:
  description: C(init engine (profile, create kv cache, warmup model) took <x> s).
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_log import boot_info


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log=dict(type="str"),
            container=dict(type="str"),
            docker_host=dict(type="str"),
            docker_cli=dict(type="path"),
            since=dict(type="str"),
            timeout=dict(type="int", default=60),
            expected_kv_cache_memory_bytes=dict(type="raw"),
        ),
        mutually_exclusive=[("log", "container")],
        required_one_of=[("log", "container")],
        required_by=dict(since="container", docker_host="container", docker_cli="container"),
        supports_check_mode=True,
    )
    params = module.params
    with operator_errors(module):
        info = boot_info(params["log"], params["container"],
                         Docker(params["docker_host"], params["docker_cli"]), params["since"],
                         params["timeout"], params["expected_kv_cache_memory_bytes"])
    module.exit_json(changed=False, **info)


if __name__ == "__main__":
    main()
