#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: seat_files
short_description: Write or restore one seat's C(.env) and C(compose.yaml) with dated backups
version_added: 0.1.0
description:
  - With O(state=present), renders a seat's docker compose project (a C(.env) holding the numbers
    a maintenance window changes, and a C(compose.yaml) that refers to them), validates the pair
    with C(docker compose config), backs up each file that changes as
    C(<file>.bak-YYYYMMDD-<tag>) (bytes, mode and owner kept), and replaces it atomically.
  - With O(state=restored), puts the files back byte for byte from the backups a previous
    O(state=present) run returned, and removes files that did not exist before it. A
    check-mode result works too (a journal written before the files were). A file whose backup
    was never made is left alone if it did not change since, and is an error if it did.
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
    description: The seat's compose project directory; created when missing.
    type: path
    required: true
  state:
    description:
      - V(present) renders and writes the files; V(restored) restores them from O(restore).
    type: str
    choices: [present, restored]
    default: present
  seat:
    description:
      - The seat as the plan places it. Required with O(state=present).
      - "Keys: C(name), C(engine) (V(vllm) or V(fixed)), C(image), C(port), C(gpu_uuids) (list,
        one per tensor-parallel rank); for vLLM also C(model), C(max_model_len),
        C(kv_cache_memory_bytes), C(gpu_memory_utilization), and optionally
        C(served_model_names), C(tensor_parallel_size), C(kv_cache_dtype),
        C(tool_call_parser), C(reasoning_parser), C(default_chat_template_kwargs),
        C(max_new_tokens), C(max_num_seqs), C(block_size), C(extra_args); for both optionally
        C(container_name), C(command), C(environment), C(volumes), C(health_path),
        C(health_interval), C(health_start_period) (docker durations)."
    type: dict
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
    description: Check the new pair with C(docker compose config --quiet) before writing.
    type: bool
    default: true
  env_mode:
    description: Mode of a newly created C(.env) (an existing file keeps its own).
    type: raw
    default: "0600"
  compose_mode:
    description: Mode of a newly created C(compose.yaml) (an existing file keeps its own).
    type: raw
    default: "0644"
  restore:
    description:
      - With O(state=restored), the RV(files) a previous O(state=present) run returned; each
        entry's C(backup) is copied back, and a file that run C(created) is removed.
    type: dict
notes:
  - Run it with C(become) where the C(.env) is root-owned (seed 001); owner and mode of existing
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
      image: vllm/vllm-openai:v0.33.0
      port: 8011
      gpu_uuids: [GPU-6c1f2f2e-0d0b-4c59-9d3e-1a2b3c4d5e01]
      model: /models/Qwen3.5-35B-A3B
      max_model_len: 262144
      kv_cache_memory_bytes: 5905580032
      gpu_memory_utilization: 0.12
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
"""

RETURN = r"""
files:
  description: Per file name, what happened to it; pass it as O(restore) to undo.
  returned: always
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
backups:
  description: The backup files this run wrote or reused.
  returned: always
  type: list
  elements: str
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.compose import (
    COMPOSE_FILE,
    ENV_FILE,
    RenderError,
    render_seat_files,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.files import (
    SeatFilesError,
    backup_path_for,
    check_backup_name_parts,
    make_backup,
    read_bytes,
)


def sha256(data):
    return None if data is None else hashlib.sha256(data).hexdigest()


def _mode(module, value, name):
    if isinstance(value, int):
        return value
    try:
        return int(str(value), 8)
    except ValueError:
        module.fail_json(msg="%s: expected an octal mode such as '0600', got %r" % (name, value))


def _write(module, path, content, new_mode):
    """Atomically replace ``path``; a new file gets ``new_mode``, an existing one keeps its own."""
    directory = os.path.dirname(path)
    handle, temp = tempfile.mkstemp(prefix=".llmfleet-", dir=directory)
    with os.fdopen(handle, "wb") as out:
        out.write(content)
    created = not os.path.exists(path)
    module.atomic_move(temp, path)
    if created:
        # atomic_move gives a new file the umask's mode; a .env may hold tokens.
        os.chmod(path, new_mode)


def _remove_leftovers(project_dir):
    """Temp files and staging directories of a run that was killed half way (the rebalance
    lock means no other run is using them)."""
    if not os.path.isdir(project_dir):
        return
    for name in os.listdir(project_dir):
        if name.startswith(".llmfleet-"):
            path = os.path.join(project_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _validate(module, project_dir, contents):
    """``docker compose config`` on the new pair, staged beside the real files."""
    docker = module.get_bin_path("docker", required=True)
    staging = tempfile.mkdtemp(prefix=".llmfleet-validate-", dir=project_dir)
    try:
        for name, content in contents.items():
            with open(os.path.join(staging, name), "wb") as out:
                out.write(content)
        cmd = [docker, "compose", "--project-directory", project_dir,
               "-f", os.path.join(staging, COMPOSE_FILE),
               "--env-file", os.path.join(staging, ENV_FILE), "config", "--quiet"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            module.fail_json(msg="docker compose rejected the rendered files for %s: %s"
                             % (project_dir, (proc.stderr or proc.stdout).strip()))
    finally:
        for name in os.listdir(staging):
            os.unlink(os.path.join(staging, name))
        os.rmdir(staging)


def present(module):
    params = module.params
    project_dir = params["project_dir"]
    date = params["backup_date"] or time.strftime("%Y%m%d")
    try:
        check_backup_name_parts(date, params["backup_tag"])
        rendered = render_seat_files(params["seat"], params["host"])
    except (RenderError, SeatFilesError) as exc:
        module.fail_json(msg=str(exc))
    contents = {name: text.encode("utf-8") for name, text in rendered.items()}
    modes = {ENV_FILE: _mode(module, params["env_mode"], "env_mode"),
             COMPOSE_FILE: _mode(module, params["compose_mode"], "compose_mode")}

    files, diffs, backups = {}, [], []
    for name, content in contents.items():
        path = os.path.join(project_dir, name)
        before = read_bytes(path)
        entry = {"path": path, "changed": before != content, "created": before is None,
                 "backup": None, "before_sha256": sha256(before)}
        if entry["changed"] and before is not None:
            entry["backup"] = backup_path_for(path, date, params["backup_tag"])
            backups.append(entry["backup"])
        files[name] = entry
        if entry["changed"]:
            diffs.append({"before_header": path if before is not None else "(absent)",
                          "after_header": path,
                          "before": to_text(before or b""), "after": to_text(content)})

    changed = any(entry["changed"] for entry in files.values())
    if not module.check_mode:
        _remove_leftovers(project_dir)
    if changed and not module.check_mode:
        if not os.path.isdir(project_dir):
            os.makedirs(project_dir, 0o755)
        if params["validate"]:
            _validate(module, project_dir, contents)
        for name, entry in files.items():
            if entry["backup"]:
                make_backup(entry["path"], entry["backup"])
        for name, entry in files.items():
            if entry["changed"]:
                _write(module, entry["path"], contents[name], modes[name])
    result = {"changed": changed, "files": files, "backups": backups}
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


def restored(module):
    restore = module.params["restore"]
    if not isinstance(restore, dict):
        module.fail_json(msg="restore: expected the 'files' result of a state=present run")
    files, diffs = {}, []
    for name, entry in sorted(restore.items()):
        path = entry.get("path") if isinstance(entry, dict) else None
        if not path or os.path.dirname(path) != module.params["project_dir"].rstrip("/"):
            module.fail_json(msg="restore.%s: expected a file in %s, got %r"
                             % (name, module.params["project_dir"], path))
        current = read_bytes(path)
        if entry.get("created"):
            wanted = None
        elif entry.get("backup") and os.path.exists(entry["backup"]):
            wanted = read_bytes(entry["backup"])
        elif entry.get("backup") and sha256(current) != entry.get("before_sha256"):
            module.fail_json(msg="restore.%s: %s changed but its backup %s is gone; nothing was "
                                 "changed" % (name, path, entry["backup"]))
        else:
            # Unchanged, or journaled before a run that never got to write it.
            wanted = current
        files[name] = {"path": path, "changed": current != wanted}
        if current != wanted:
            diffs.append({"before_header": path, "after_header": entry.get("backup") or "(absent)",
                          "before": to_text(current or b""), "after": to_text(wanted or b"")})
    changed = any(entry["changed"] for entry in files.values())
    if changed and not module.check_mode:
        for name, entry in restore.items():
            if not files[name]["changed"]:
                continue
            if entry.get("created"):
                os.unlink(entry["path"])
            else:
                _restore_copy(module, entry["backup"], entry["path"])
    result = {"changed": changed, "files": files, "backups": []}
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


def _restore_copy(module, backup, path):
    """Copy the backup over ``path`` atomically, with the backup's bytes, mode and owner."""
    directory = os.path.dirname(path)
    handle, temp = tempfile.mkstemp(prefix=".llmfleet-", dir=directory)
    os.close(handle)
    with open(backup, "rb") as src, open(temp, "wb") as dst:
        dst.write(src.read())
    info = os.stat(backup)
    os.chmod(temp, info.st_mode & 0o7777)
    os.chown(temp, info.st_uid, info.st_gid)
    os.rename(temp, path)


def main():
    module = AnsibleModule(
        argument_spec={
            "project_dir": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["present", "restored"], "default": "present"},
            "seat": {"type": "dict"},
            "host": {"type": "str"},
            "backup_tag": {"type": "str", "default": "rebal"},
            "backup_date": {"type": "str"},
            "validate": {"type": "bool", "default": True},
            "env_mode": {"type": "raw", "default": "0600"},
            "compose_mode": {"type": "raw", "default": "0644"},
            "restore": {"type": "dict"},
        },
        required_if=[("state", "present", ["seat"]), ("state", "restored", ["restore"])],
        supports_check_mode=True,
    )
    if module.params["state"] == "present":
        present(module)
    else:
        restored(module)


if __name__ == "__main__":
    main()
