#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: adopt_info
short_description: What every running container of a GPU host launches, to adopt the host
version_added: 0.1.0
description:
  - Asks the host's Docker engine for every running container and returns what a starting
    inventory needs of it - image, command line, its own environment (not its image's),
    published ports, GPUs, mounts, restart policy and how long it has run.
  - The value of a variable whose name has a secret's word in it (C(TOKEN), C(KEY), C(SECRET),
    C(PASSWORD), C(CREDENTIAL), C(AUTH), ... as whole words, so C(HF_TOKEN) is one and
    C(TOKENIZERS_PARALLELISM) is not) is never returned, only its name; nor is the value of a
    command-line flag named so (C(--api-key)), which reads as C(<secret>).
  - For a container running vLLM's server, finds the model it serves through its mounts (a
    model directory, or the Hugging Face cache it mounts) and returns its C(config.json) and
    the size of its checkpoint files. Only that directory's own C(config.json) is read, and
    only when it is provably a model config - a path that climbs (C(..)) or whose links lead
    out of the mount, anything but a regular file, over 1 MiB or nested deeper than 32 levels,
    and JSON without C(model_type) or C(architectures) are skipped, and C(problem) says why.
  - On a host whose PID 1 is systemd, names the service whose process runs C(docker run --name)
    of a container (a unit's serve script), with its C(Restart=) policy.
  - M(llmfleet.seats.adopted_inventory) (a filter) turns the result into host_vars;
    C(playbooks/adopt.yml) writes them.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.info_module
options:
  docker_host:
    description: The Docker engine to ask; defaults to E(DOCKER_HOST), then the local socket.
    type: str
"""

EXAMPLES = r"""
- name: Read what runs on the host
  llmfleet.seats.adopt_info:
  register: running
"""

RETURN = r"""
containers:
  description:
    - Per running container, by name - C(name), C(compose_project), C(compose_service),
      C(managed_seat) (the seat, when this collection runs it), C(image), C(image_id),
      C(args) (the process's command line), C(environment) (its own variables, secrets left
      out), C(secret_environment) (the names of its secret variables), C(ports)
      (C(container_port), C(host_port), C(protocol)), C(network_mode), C(ipc_mode),
      C(gpu_device_ids), C(gpu_all), C(visible_devices), C(mounts) (C(source),
      C(destination), C(read_only)), C(restart_policy), C(running_s), C(systemd_unit), and
      C(model) for a vLLM server (C(name), C(model_dir), C(model_config), C(weights_bytes),
      C(problem)), with C(vllm_version), the version its boot log printed when its image tag
      names none (else null).
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.read import running_containers
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors


def main():
    module = AnsibleModule(argument_spec={"docker_host": {"type": "str"}}, supports_check_mode=True)
    with operator_errors(module):
        containers = running_containers(Docker(module.params["docker_host"]))
    module.exit_json(changed=False, containers=containers)


if __name__ == "__main__":
    main()
