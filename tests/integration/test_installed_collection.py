"""The collection as a user installs it: `ansible-galaxy collection build`, the tarball installed
into an empty collections path (no link to this checkout), then `ansible-doc` for every plugin
and the plan playbook run from the installed copy, planning what the checkout plans. The
installed copy runs without this checkout's ansible.cfg (a user has none of it): the inventory
is read as the docs say (-i names the hosts file), and the plan prints one line per line."""

from __future__ import annotations

import configparser
import json
import re
import tarfile

import pytest
import yaml

from conftest import REPO_ROOT, run_ansible

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("installed")
    proc = run_ansible(["ansible-galaxy", "collection", "build", str(REPO_ROOT), "--output-path", str(root)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    version = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())["version"]
    tarball = root / ("llmfleet-seats-%s.tar.gz" % version)
    collections = root / "collections"
    # only the empty path is configured: the checkout's link is not "already installed"; and an
    # empty ansible.cfg stands in for the checkout's, which a user does not have
    empty_config = root / "ansible.cfg"
    empty_config.write_text("")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_CONFIG": str(empty_config)}
    proc = run_ansible(["ansible-galaxy", "collection", "install", str(tarball), "-p", str(collections), "--offline"],
                       extra_env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"root": root, "tarball": tarball, "collection": collections / "ansible_collections" / "llmfleet" / "seats",
            "env": env}


def test_the_tarball_carries_what_a_user_needs_and_nothing_of_the_checkout(installed):
    with tarfile.open(installed["tarball"]) as archive:
        names = set(archive.getnames())
    for needed in ("README.md", "MANIFEST.json", "meta/runtime.yml",
                   "meta/execution-environment.yml", "meta/ee-requirements.txt", "meta/ee-bindep.txt",
                   "playbooks/plan.yml", "playbooks/rebalance.yml", "roles/seat_plan/tasks/main.yml",
                   "plugins/modules/seat_plan.py", "plugins/filter/seat_secrets.yml", "docs/inventory.md"):
        assert needed in names, "the tarball lacks %s" % needed
    for private in ("tests", ".build", ".venv", "scripts", "inventories", "ansible.cfg", "bench"):
        assert not [name for name in names if name == private or name.startswith(private + "/")], private
    collection = installed["collection"]
    assert collection.is_dir() and not collection.is_symlink()
    assert not any(path.is_symlink() for path in collection.rglob("*"))


def test_ansible_doc_documents_every_plugin_from_the_installed_copy(installed):
    collection = installed["collection"]
    kinds = {"module": sorted(p.stem for p in (collection / "plugins" / "modules").glob("*.py")),
             "filter": sorted(p.stem for p in (collection / "plugins" / "filter").glob("*.yml")),
             "lookup": sorted(p.stem for p in (collection / "plugins" / "lookup").glob("*.py"))}
    assert len(kinds["module"]) >= 14 and len(kinds["filter"]) >= 20
    for kind, names in kinds.items():
        proc = run_ansible(["ansible-doc", "-t", kind, "--json"] + ["llmfleet.seats.%s" % n for n in names],
                           extra_env=installed["env"])
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        docs = json.loads(proc.stdout)
        assert sorted(docs) == ["llmfleet.seats.%s" % n for n in names]
        for name, doc in docs.items():
            assert doc["doc"]["filename"].startswith(str(collection)), "%s came from %s" % (name, doc["doc"]["filename"])
    proc = run_ansible(["ansible-doc", "-t", "role", "llmfleet.seats.seat_plan"], extra_env=installed["env"])
    assert proc.returncode == 0 and "seat_plan_retire" in proc.stdout, proc.stderr


LOCAL = ["-e", "ansible_connection=local", "-e", "ansible_host=127.0.0.1", "-e", "seat_plan_cards_source=inventory"]


def test_the_installed_plan_playbook_plans_what_the_checkout_plans(installed, tmp_path):
    plans = {}
    for name, playbook, env in (("installed", "llmfleet.seats.plan", installed["env"]),
                                ("checkout", "playbooks/plan.yml", None)):
        out = tmp_path / name
        proc = run_ansible(["ansible-playbook", "-i", "inventories/fv-ml1/hosts.yml", playbook, *LOCAL,
                            "-e", "seat_plan_report_dir=%s" % out], extra_env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert "WARNING" not in proc.stdout + proc.stderr, name + ": " + proc.stderr[-2000:]
        plans[name] = {path.name: path.read_bytes() for path in sorted(out.iterdir())}
    assert plans["installed"] == plans["checkout"] and "fv-ml1-plan.json" in plans["installed"]


def _inventory(path, env):
    proc = run_ansible(["ansible-inventory", "-i", str(path), "--list"], extra_env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("inventory", ["inventories/fv-ml1/hosts.yml", "SKELETON"])
def test_an_inventory_named_by_its_hosts_file_is_its_hosts_alone_with_keepalives(installed, inventory):
    path = installed["collection"] / "docs" / "inventory-skeleton" / "hosts.yml" if inventory == "SKELETON" \
        else REPO_ROOT / inventory
    assert (path.parent / "models").is_dir(), "the model configs sit beside the hosts file"
    data, stderr = _inventory(path, installed["env"])
    # the model configs beside it would add groups (rope_scaling, text_config, ...) and warnings
    assert sorted(data["all"]["children"]) == ["gpu_hosts", "ungrouped"], stderr
    assert "WARNING" not in stderr and "Unable to parse" not in stderr, stderr
    for host, hostvars in data["_meta"]["hostvars"].items():
        assert re.search(r"-o ServerAliveInterval=5 -o ServerAliveCountMax=3",
                         hostvars.get("ansible_ssh_extra_args", "")), host
        assert "StrictHostKeyChecking=no" not in json.dumps(hostvars), host


def test_the_checkouts_ansible_cfg_turns_off_nothing_a_fleet_command_needs():
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "ansible.cfg")
    assert config.getboolean("defaults", "host_key_checking", fallback=True) is True
    assert "StrictHostKeyChecking=no" not in config.get("ssh_connection", "ssh_args", fallback="")


def test_the_skeleton_plans_from_the_installed_copy_one_line_per_line(installed, tmp_path):
    skeleton = installed["collection"] / "docs" / "inventory-skeleton"
    out = tmp_path / "plan"
    proc = run_ansible(["ansible-playbook", "-i", str(skeleton / "hosts.yml"), "llmfleet.seats.plan", *LOCAL,
                        "-e", "seat_plan_report_dir=%s" % out], extra_env=installed["env"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "WARNING" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    plan = json.loads((out / "gpu-a-plan.json").read_text())
    assert sorted(seat["name"] for seat in plan["seats"]) == ["asr", "chat"]
    # Ansible's default result format prints a string as one escaped line: the plan is a list
    # of lines, each on its own line of output, its table rows as written
    assert '"## gpu-a",' in proc.stdout and "\\n" not in proc.stdout
    assert re.search(r'^\s+"\| 0 `GPU-5a1c0c6e` \| chat \|', proc.stdout, re.MULTILINE), proc.stdout[-3000:]
