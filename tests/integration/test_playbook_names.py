"""Every playbook the collection ships can be called by its FQCN (``ansible-playbook
llmfleet.seats.<name>``): its file name is one Ansible takes as a collection resource (no dash),
and ansible-playbook finds and parses one through the collection path, as an installed copy's
user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.utils.collection_loader import AnsibleCollectionRef

from conftest import REPO_ROOT, run_ansible

PLAYBOOKS = sorted(path.name for path in (REPO_ROOT / "playbooks").iterdir() if path.suffix in (".yml", ".yaml"))


def test_the_collection_ships_playbooks():
    assert "rebalance.yml" in PLAYBOOKS and "kv_sizing.yml" in PLAYBOOKS, PLAYBOOKS


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_playbook_has_a_name_its_fqcn_can_call(playbook):
    fqcn = "llmfleet.seats." + Path(playbook).stem
    assert AnsibleCollectionRef.is_valid_fqcr(fqcn, "playbook"), (
        "playbooks/%s cannot be called as %s: name it with letters, digits and underscores" % (playbook, fqcn))


def test_ansible_playbook_syntax_checks_a_playbook_by_its_fqcn():
    proc = run_ansible(["ansible-playbook", "--syntax-check", "-i", "inventories/fv-ml1/hosts.yml",
                        "llmfleet.seats.kv_sizing"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = proc.stdout.strip().splitlines()[-1]
    assert found.startswith("playbook: ") and found.endswith("/ansible_collections/llmfleet/seats/playbooks/kv_sizing.yml"), \
        proc.stdout
