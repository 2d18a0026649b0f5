#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_info
short_description: Read what the GPUs hold, and who holds it, through NVML, nvidia-smi or a snapshot
version_added: 0.1.0
description:
  - Reads every NVIDIA GPU of the target (index, UUID, name, PCI bus id, total, reserved, used
    and free memory in MiB, MIG mode) and the compute processes with their memory.
  - Attributes each process to its container and docker compose project/service through
    C(/proc/<pid>/cgroup) (cgroup v1 and v2) and the Docker Engine API, and reports per GPU the
    memory no container accounts for (RV(gpus[].unattributed_mib)).
  - With O(source=snapshot) it returns a reading recorded earlier with O(save_snapshot_path)
    instead, for example one taken at the plateau a day or two after the seats booted. Planning
    against that, rather than the free memory right after a restart, is the point of snapshots.
  - Downstream roles key everything by GPU UUID, never by index.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
  - llmfleet.seats._attributes.action
attributes:
  action:
    support: partial
    details:
      - O(source=snapshot) on the controller (a local connection without become, async or a
        task environment beyond a window's run id, as when delegated to localhost) is read in
        Ansible's own process, with the same checks and results; every other read runs the module.
  check_mode:
    details:
      - Reading changes nothing. The one thing the module can write is O(save_snapshot_path); in
        check mode that file is not written and RV(ignore:changed) says whether it would change.
  idempotent:
    support: partial
    details:
      - Reading is idempotent. With O(save_snapshot_path) each run records a new reading with a
        new time, so the file changes, and RV(ignore:changed) is true, every run.
requirements:
  - nvidia-ml-py (C(import pynvml)) on the target for O(source=nvml) (and for O(source=auto) to
    use NVML rather than nvidia-smi).
  - The C(docker) CLI on the target for container attribution.
notes:
  - NVML and nvidia-smi report host PIDs. Run the module on the GPU host itself (with C(become)
    where C(/proc) or the Docker socket needs it), not inside a container; a PID it cannot
    resolve says why in RV(gpus[].processes[].attribution).
  - MiB figures from NVML are rounded for planning (used and reserved up, free down).
  - In MIG mode the figures are those of the whole card; processes carry their GPU and compute
    instance ids.
  - C(docs/plateau-snapshots.md) in this collection explains when to record a snapshot and how
    the placement and rebalance roles use it.
options:
  source:
    description:
      - Where to read from. V(auto) uses NVML and falls back to nvidia-smi when NVML cannot be
        used (no bindings, no library, or an NVML error); the warning says why.
      - V(snapshot) returns the reading saved in O(snapshot_path).
    type: str
    choices: [auto, nvml, nvidia-smi, snapshot]
    default: auto
  snapshot_path:
    description:
      - The snapshot file to read with O(source=snapshot). Required then, refused otherwise.
    type: path
  save_snapshot_path:
    description:
      - Record this reading as a snapshot (versioned JSON with host, time and source) at this
        path on the target. The file is replaced atomically and only when its content differs;
        RV(ignore:changed) is true exactly when it was (or, in check mode, would be) written.
      - Refused with O(source=snapshot); copy the file to keep another one.
    type: path
  snapshot_host:
    description:
      - "The host name recorded in a saved snapshot. Defaults to the target's host name; pass
        C({{ inventory_hostname }}) to record the name the inventory uses."
    type: str
  attribute_processes:
    description:
      - Resolve each process to its container and compose project/service. With V(false) the
        processes are listed with those fields null.
    type: bool
    default: true
  docker_host:
    description:
      - The Docker Engine to ask about containers, for example V(unix:///run/docker.sock).
      - Defaults to the target's E(DOCKER_HOST), then V(unix:///var/run/docker.sock).
    type: str
"""

EXAMPLES = r"""
- name: Read the cards (NVML, else nvidia-smi)
  llmfleet.seats.gpu_info:
  become: true
  register: cards

- name: Show free MiB per GPU UUID
  ansible.builtin.debug:
    msg: "{{ cards.gpus | llmfleet.seats.gpu_free_mib_by_uuid }}"

- name: Read through NVML only (fails with a clear message when it cannot)
  llmfleet.seats.gpu_info:
    source: nvml
  become: true

- name: Read through nvidia-smi, without asking Docker about the processes
  llmfleet.seats.gpu_info:
    source: nvidia-smi
    attribute_processes: false

- name: Record the plateau, a day or two after the seats booted
  llmfleet.seats.gpu_info:
    save_snapshot_path: /var/lib/llmfleet/gpu-plateau.json
    snapshot_host: "{{ inventory_hostname }}"
  become: true

- name: Plan against the recorded plateau instead of the cards right now
  llmfleet.seats.gpu_info:
    source: snapshot
    snapshot_path: /var/lib/llmfleet/gpu-plateau.json
  register: plateau

- name: Ask a Docker engine on a non-default socket
  llmfleet.seats.gpu_info:
    docker_host: unix:///run/user/1000/docker.sock
"""

RETURN = r"""
source:
  description: Where the reading came from (V(nvml), V(nvidia-smi) or V(snapshot)).
  returned: always
  type: str
  sample: nvml
driver_version:
  description: The NVIDIA driver version; null when no GPU was found through nvidia-smi.
  returned: always
  type: str
  sample: "580.95.05"
nvml_version:
  description: The NVML library version (NVML only).
  returned: always
  type: str
  sample: "13.580.95.05"
cuda_version:
  description: The CUDA version the driver supports (NVML only).
  returned: always
  type: str
  sample: "13.0"
host_memory:
  description:
    - The host's RAM from C(/proc/meminfo), in MiB, for seats that pin host memory (a radiance
      seat's host pool); null when it cannot be read.
  returned: when the cards were read live (not from a snapshot)
  type: dict
  contains:
    total_mib:
      description: C(MemTotal).
      type: int
    available_mib:
      description: C(MemAvailable).
      type: int
  sample: {"total_mib": 257589, "available_mib": 180112}
snapshot:
  description: The snapshot read (O(source=snapshot)) or saved (O(save_snapshot_path)).
  returned: when a snapshot was read or saved
  type: dict
  contains:
    path:
      description: The snapshot file.
      type: str
    host:
      description: The host it describes.
      type: str
    taken_at:
      description: When the reading was taken, UTC, ISO 8601.
      type: str
      sample: "2026-10-07T08:00:00Z"
    source:
      description: The source that took the reading (V(nvml) or V(nvidia-smi)).
      type: str
    schema_version:
      description: The snapshot schema version.
      type: int
      sample: 1
watch:
  description:
    - How the cards settled after the window before, from a plateau snapshot that
      C(playbooks/watch_plateau.yml) wrote (M(llmfleet.seats.gpu_plateau)'s verdict) - C(window),
      C(gpus) (each card's plateau, least free memory, creep, the plan's predicted spare and its
      flags), C(seats) (what each seat held against its planned footprint) and C(flagged).
    - The next plan shows it, and so does the next window's report.
  returned: when a snapshot with a watch's verdict was read
  type: dict
gpus:
  description: One entry per GPU, in index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The driver's GPU index (can change across reboots; use RV(gpus[].uuid)).
      type: int
    uuid:
      description: The GPU UUID, the key everywhere downstream.
      type: str
      sample: GPU-5a1c0c6e-3b7e-4f1e-9c55-0f1d2e3c4b5a
    name:
      description: The product name.
      type: str
      sample: NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition
    pci_bus_id:
      description: The PCI bus id.
      type: str
      sample: "00000000:18:00.0"
    memory_total_mib:
      description: Total memory.
      type: int
      sample: 97887
    memory_reserved_mib:
      description: Memory the driver and firmware reserve; null where the driver cannot say.
      type: int
    memory_used_mib:
      description: Memory allocated by processes, contexts and the driver (without reserved).
      type: int
    memory_free_mib:
      description: Free memory (total - reserved - used).
      type: int
    mig_mode:
      description: Whether MIG is enabled; null on cards without MIG.
      type: bool
    attributed_mib:
      description: Memory of the processes resolved to a container.
      type: int
    unattributed_mib:
      description:
        - Used memory no container accounts for (used - attributed), that is driver and CUDA
          contexts, processes outside containers, and tenants nobody could name.
      type: int
    unlisted_mib:
      description: Used memory that no listed process accounts for (used - all processes).
      type: int
    processes:
      description: The compute processes on this GPU.
      type: list
      elements: dict
      contains:
        pid:
          description: The host PID.
          type: int
        used_mib:
          description: Its memory on this GPU; null where the driver cannot say (MIG, permissions).
          type: int
        name:
          description: The process name or executable, when known.
          type: str
        gpu_instance_id:
          description: The MIG GPU instance; null outside MIG.
          type: int
        compute_instance_id:
          description: The MIG compute instance; null outside MIG.
          type: int
        container:
          description: The container's name.
          type: str
          sample: fv-gen-small-1
        container_id:
          description: The full container id from the process's cgroup.
          type: str
        compose_project:
          description: The C(com.docker.compose.project) label.
          type: str
        compose_service:
          description: The C(com.docker.compose.service) label.
          type: str
          sample: gen-small
        running_s:
          description: Seconds since the process started; a seat settles a day or two after boot.
          type: int
        running:
          description:
            - For a vLLM server's container started outside the collection, what it runs now, as
              numbers alone, each within a plausible range; absent for any other process.
            - From its command line C(max_model_len), C(gpu_memory_utilization),
              C(kv_cache_memory_bytes), C(max_num_seqs), C(tensor_parallel_size) and
              C(kv_cache_dtype) (a known dtype); from the first 2 MiB of its current boot's log
              C(kv_cache_tokens), C(max_concurrency), the context it settled on, and its KV bytes
              (the reserved line, else the available KV memory it profiled).
            - Nothing else of the command line or the log is returned (they may hold secrets).
          type: dict
          sample: {max_model_len: 8192, gpu_memory_utilization: 0.35, kv_cache_memory_bytes: 21871296102,
                   kv_cache_tokens: 151872, max_concurrency: 18.54}
        attribution:
          description: Why the process is not (fully) attributed; null when it is.
          type: str
          sample: PID 4242 is not in a container (cgroup 0::/user.slice/user-1000.slice/session-3.scope)
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.nvml import PYNVML_IMPORT_ERROR
from ansible_collections.llmfleet.seats.plugins.module_utils._cards.read import (
    GPU_INFO_REQUIRED_IF,
    GPU_INFO_SPEC,
    CardsError,
    MissingLibrary,
    gpu_info,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._engines.vllm_argv import container_running


def main():
    module = AnsibleModule(argument_spec=GPU_INFO_SPEC, required_if=GPU_INFO_REQUIRED_IF,
                           supports_check_mode=True)
    with operator_errors(module):
        try:
            result = gpu_info(module.params, module.check_mode, running=container_running)
        except MissingLibrary as exc:
            module.fail_json(msg=missing_required_lib(str(exc), reason="to read the GPUs with source=nvml"),
                             exception=PYNVML_IMPORT_ERROR)
        except CardsError as exc:
            module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
