#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_files
short_description: Write or restore seats' files (compose project or systemd unit) with dated backups
version_added: 0.1.0
description:
  - With O(state=present), renders a seat's files with its runtime, validates them, backs up each
    file that changes as C(<file>.bak-YYYYMMDD-<tag>) (bytes, mode and owner kept), and replaces
    it atomically.
  - The V(compose) runtime writes a docker compose project, a C(.env) holding the numbers a
    maintenance window changes and a C(compose.yaml) that refers to them, validated with
    C(docker compose config).
  - The V(systemd) runtime writes a C(seat.env) (the unit's C(EnvironmentFile), the same
    variables), a C(serve.sh) that runs the seat's image in the foreground with C(docker run),
    and a unit C(llmfleet-seat-<name>.service) with C(Restart=always), C(StartLimitIntervalSec=0)
    and C(OOMScoreAdjust=-500); validated with C(sh -n) and C(systemd-analyze verify).
  - With O(state=restored), puts the files back byte for byte from the backups a previous
    O(state=present) run returned, and removes files that did not exist before it. A
    check-mode result works too (a journal written before the files were). A file whose backup
    was never made is left alone if it did not change since, and is an error if it did.
  - With O(seats) and O(root), one run renders several seats, each in C(<root>/<name>); no file is
    written unless every changed seat's files render and validate.
  - Every value in both files is quoted, so no model name or argument can break them.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  project_dir:
    description:
      - The seat's compose project directory; created when missing. Required with O(seat) and with
        O(state=restored).
    type: path
  root:
    description:
      - With O(seats), the directory that holds each seat's project directory C(<root>/<name>).
    type: path
  state:
    description:
      - V(present) renders and writes the files; V(restored) restores them from O(restore).
    type: str
    choices: [present, restored]
    default: present
  seat:
    description:
      - The seat as the plan places it (one of M(llmfleet.seats.seat_plan)'s C(plan.seats)).
        Required with O(state=present).
      - "Read: C(name), C(engine) (V(vllm) or V(fixed)), C(runtime) (V(compose), the default, or
        V(systemd)),
        C(port), C(gpus) (UUIDs, one per tensor-parallel rank), C(container), C(health_path),
        C(launch) (C(image), C(environment), C(volumes), C(command), C(health_interval),
        C(health_start_period), C(bind_address) (the host address the port is published on,
        default V(127.0.0.1)), C(networks) (C(name), C(external)), and the engine's: for vLLM
        C(model), C(served_model_names), C(tensor_parallel_size), C(kv_cache_dtype), the parsers,
        C(extra_args)...; for a fixed
        tenant C(container_port)); for vLLM the planned C(max_model_len),
        C(kv_cache_memory_bytes) and C(gpu_memory_utilization)."
      - With O(state=present), this or O(seats).
    type: dict
  seats:
    description:
      - Several seats, each as O(seat) is, rendered in one run (O(state=present) only); the
        result is in RV(seats), by seat name.
    type: list
    elements: dict
  host:
    description: The host name written in the files' header comment.
    type: str
  backup_tag:
    description: The tag in backup names, for example V(rebal).
    type: str
    default: rebal
  backup_date:
    description:
      - The date in backup names (V(YYYYMMDD)). The playbooks pass the run's date so that every
        host names its backups alike; defaults to today on the target.
    type: str
  validate:
    description:
      - Check the new files with the runtime before writing (C(docker compose config --quiet);
        C(sh -n) and C(systemd-analyze verify)).
    type: bool
    default: true
  env_mode:
    description: Mode of a newly created C(.env) or C(seat.env) (an existing file keeps its own).
    type: raw
    default: "0600"
  compose_mode:
    description: Mode of a newly created C(compose.yaml) (an existing file keeps its own).
    type: raw
    default: "0644"
  secrets:
    description:
      - The values of the seat's secret variables (C(launch.secret_environment) names them),
        written only to the C(.env) (mode 0600) and never shown; a diff says
        C(<secret>) for each, and notes when one changed.
      - With O(seats), keyed by seat name first, each value as above.
      - The rebalance role passes them from the inventory with the
        P(llmfleet.seats.seat_secrets#filter) filter.
    type: dict
  restore:
    description:
      - With O(state=restored), the RV(files) a previous O(state=present) run returned; each
        entry's C(backup) is copied back, and a file that run C(created) is removed.
    type: dict
  runtime:
    description: With O(state=restored), the runtime whose files O(restore) names.
    type: str
    choices: [compose, systemd]
    default: compose
notes:
  - Run it with C(become) where the C(.env) is root-owned; owner and mode of existing
    files are kept.
"""

EXAMPLES = r"""
- name: Render gen-small's files
  llmfleet.seats.seat_files:
    project_dir: /opt/docker/compose/gen-small
    host: fv-ml1
    backup_tag: rebal
    seat:
      name: gen-small
      engine: vllm
      port: 8011
      gpus: [GPU-6c1f2f2e-0d0b-4c59-9d3e-1a2b3c4d5e01]
      container: vllm-gen-small
      max_model_len: 262144
      kv_cache_memory_bytes: 5905580032
      gpu_memory_utilization: 0.12
      launch:
        image: vllm/vllm-openai:v0.33.0
        model: /models/Qwen3.5-35B-A3B
        served_model_names: [gen-small]
        max_new_tokens: 32768
  become: true
  register: gen_small_files

- name: Put them back
  llmfleet.seats.seat_files:
    project_dir: /opt/docker/compose/gen-small
    state: restored
    restore: "{{ gen_small_files.files }}"
  become: true

- name: Render every planned seat of the host in one run
  llmfleet.seats.seat_files:
    root: /opt/docker/compose
    host: "{{ inventory_hostname }}"
    seats: "{{ plan.seats }}"
    secrets: "{{ llmfleet_seats | llmfleet.seats.seat_secrets }}"
  become: true
  register: host_files
"""

RETURN = r"""
files:
  description: Per file name, what happened to it; pass it as O(restore) to undo.
  returned: with O(seat) or O(state=restored)
  type: dict
  sample:
    .env:
      path: /opt/docker/compose/gen-small/.env
      changed: true
      created: false
      backup: /opt/docker/compose/gen-small/.env.bak-20261005-rebal
      before_sha256: 9f2c...
    compose.yaml:
      path: /opt/docker/compose/gen-small/compose.yaml
      changed: false
      created: false
      backup: null
      before_sha256: 41d7...
seats:
  description: With O(seats), per seat name, its C(changed), C(files) (as RV(files)) and C(backups).
  returned: with O(seats)
  type: dict
  sample:
    gen-small:
      changed: true
      files:
        .env: {path: /opt/docker/compose/gen-small/.env, changed: true, created: false,
               backup: /opt/docker/compose/gen-small/.env.bak-20261005-rebal, before_sha256: 9f2c...}
        compose.yaml: {path: /opt/docker/compose/gen-small/compose.yaml, changed: false, created: false,
                       backup: null, before_sha256: 41d7...}
      backups: [/opt/docker/compose/gen-small/.env.bak-20261005-rebal]
backups:
  description: The backup files this run wrote or reused.
  returned: always
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.files import (
    file_mode,
    present,
    present_seats,
    restored,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import RUNTIMES, runtime_of


def main():
    module = AnsibleModule(
        argument_spec={
            "project_dir": {"type": "path"},
            "root": {"type": "path"},
            "state": {"type": "str", "choices": ["present", "restored"], "default": "present"},
            "seat": {"type": "dict"},
            "seats": {"type": "list", "elements": "dict"},
            "host": {"type": "str"},
            "backup_tag": {"type": "str", "default": "rebal"},
            "backup_date": {"type": "str"},
            "validate": {"type": "bool", "default": True},
            "env_mode": {"type": "raw", "default": "0600"},
            "compose_mode": {"type": "raw", "default": "0644"},
            "restore": {"type": "dict"},
            "secrets": {"type": "dict", "no_log": True},
            "runtime": {"type": "str", "choices": sorted(RUNTIMES), "default": "compose"},
        },
        required_if=[("state", "present", ["seat", "seats"], True), ("state", "restored", ["project_dir", "restore"])],
        required_by={"seat": "project_dir", "seats": "root"},
        mutually_exclusive=[("seat", "seats"), ("project_dir", "root")],
        supports_check_mode=True,
    )
    params = module.params
    with operator_errors(module):
        if params["state"] == "restored":
            result = restored(RUNTIMES[params["runtime"]], params["project_dir"], params["restore"],
                              module.check_mode)
        else:
            modes = {name: file_mode(params[option], option)
                     for runtime in RUNTIMES.values() for name, option in runtime.MODE_OPTIONS.items()}
            common = (params["host"], params["backup_tag"], params["backup_date"] or time.strftime("%Y%m%d"),
                      modes, params["validate"], Docker(), module.check_mode, params["secrets"])
            if params["seats"] is not None:
                result = present_seats(runtime_of, params["root"], params["seats"], *common)
            else:
                result = present(runtime_of(params["seat"]), params["project_dir"], params["seat"], *common)
    if not module._diff:
        del result["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
