"""A host name is written into every seat file's header: on the fleet twin, over real SSH, with
twin2's PID 1 a real systemd, an inventory host name carrying a newline and a command (which
once became a line of serve.sh run as root, and a top-level key of compose.yaml) is refused in
the plan before the host is touched, and seat_files refuses it on the host itself, writing
nothing. Either way no file, unit or container on the twin changes and the command never runs."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from conftest import run_ansible
from support.rollout import FLEET, PLAYBOOK, fleet_with, state, twin_pair

from twinlib import fleet
from twinlib.host import SYSTEMD_CONTAINER
from twinlib.sysroot import root_tarball

pytestmark = [pytest.mark.twin, pytest.mark.rollout, pytest.mark.systemd, pytest.mark.slow]

PROOF = "/srv/llmfleet-host-name-ran"
INJECTED = {"twin1": "twin1\ninjected: {privileged: true}\nx-%s: " % PROOF,
            "twin2": "twin2\nExecStartPre=/bin/touch %s\ntouch %s" % (PROOF, PROOF)}


def untouched(host: str) -> dict:
    """What a refused run must leave as it was: the host's files and each container's id and
    state (its health may still be settling from the fixture's boots)."""
    seen = state(host)
    return {"files": seen["files"],
            "containers": {name: (cid, running) for name, (cid, running, _healthy) in seen["containers"].items()}}


def proof_exists() -> bool:
    """Whether the injected command left its file on either host (or inside twin2's systemd)."""
    probe = ["exec", SYSTEMD_CONTAINER, "test", "-e", PROOF]
    in_systemd = fleet.find_host("twin2").docker(probe, check=False).returncode == 0
    return in_systemd or any(os.path.exists(fleet.find_host(host).path(PROOF)) for host in INJECTED)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The twin pair with twin2 booted with systemd and its seat delta a systemd seat; after a
    first window, both hosts run their seats (what an injected name must not change)."""
    if not root_tarball().exists():
        pytest.skip("no systemd host root: run scripts/install-system-deps (tests/twin/twin build-root)")
    work = tmp_path_factory.mktemp("host-name")
    spec = json.loads((FLEET / "spec.json").read_text())
    spec["hosts"][1]["kind"] = "systemd"
    (work / "spec.json").write_text(json.dumps(spec))
    with twin_pair(work / "spec.json") as inventory:
        twin_vars = yaml.safe_load(open(inventory, encoding="utf-8"))
        digest = twin_vars["all"]["children"]["gpu_hosts"]["hosts"]["twin2"]["twin_image_ids"][
            "vllm/vllm-openai:v0.33.0"]
        hosts = fleet_with(work, delta={"runtime": "systemd", "image": digest, "vllm_version": "0.33.0"})
        first = run_ansible(["ansible-playbook", "-i", str(hosts), "-i", inventory, str(PLAYBOOK),
                             "-e", "llmfleet_report_dir=%s" % (work / "first")])
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
        yield {"work": work, "hosts": hosts, "inventory": inventory, "twin_vars": twin_vars}


def injected_inventory(twin, path):
    """One inventory file whose hosts are the twin's, each under its injected name: the twin's
    address, key and known_hosts, and the fleet's host and group variables."""
    fleet_dir = twin["hosts"].parent
    group_vars = yaml.safe_load((fleet_dir / "group_vars" / "gpu_hosts.yml").read_text())
    hosts = {}
    for name, injected in INJECTED.items():
        host_vars = dict(twin["twin_vars"]["all"]["children"]["gpu_hosts"]["hosts"][name])
        host_vars.update(yaml.safe_load((fleet_dir / "host_vars" / ("%s.yml" % name)).read_text()))
        hosts[injected] = host_vars
    path.write_text(yaml.safe_dump({"all": {"vars": twin["twin_vars"]["all"]["vars"]},
                                    "gpu_hosts": {"vars": group_vars, "hosts": hosts}}))
    return path


def test_a_host_name_with_a_newline_is_refused_in_the_plan_touching_nothing(twin, tmp_path):
    before = {host: untouched(host) for host in INJECTED}
    inventory = injected_inventory(twin, tmp_path / "hosts.yml")
    proc = run_ansible(["ansible-playbook", "-i", str(inventory), str(PLAYBOOK),
                        "-e", "llmfleet_report_dir=%s" % (tmp_path / "report")])
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    for injected in INJECTED.values():
        assert "host %r: inventory host name: expected a host name of letters, digits" % injected in output, \
            output[-3000:]
    assert "Traceback" not in output and "UNREACHABLE" not in output
    assert {host: untouched(host) for host in INJECTED} == before, "a host was touched"
    assert not proof_exists(), "the injected command ran"


def test_seat_files_on_the_host_refuses_a_host_name_outside_the_grammar(twin, tmp_path):
    """The renderer's own refusal, on the host: the plan's seats, rendered by seat_files over
    SSH on twin2 (its systemd seat) and twin1 (compose), with the injected name as ``host``."""
    before = {host: untouched(host) for host in INJECTED}
    playbook = tmp_path / "render.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Render the planned seats under an injected host name",
        "hosts": "gpu_hosts", "gather_facts": False,
        "roles": ["llmfleet.seats.seat_plan"],
        "post_tasks": [{
            "name": "Render",
            "llmfleet.seats.seat_files": {
                "root": "{{ seat_rebalance_root }}", "seats": "{{ seat_plan_result.seats }}",
                "host": "{{ injected[inventory_hostname] }}", "backup_tag": "inj", "backup_date": "20260101"},
        }],
    }]))
    extra = tmp_path / "injected.json"
    extra.write_text(json.dumps({"injected": INJECTED}))
    proc = run_ansible(["ansible-playbook", "-i", str(twin["hosts"]), "-i", twin["inventory"], str(playbook),
                        "-e", "@%s" % extra])
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert output.count("host: expected a host name of letters, digits") >= 2, output[-4000:]
    assert "Traceback" not in output and "UNREACHABLE" not in output, output[-3000:]
    assert {host: untouched(host) for host in INJECTED} == before, "a file or a container changed"
    assert not proof_exists(), "the injected command ran"
    unit = fleet.find_host("twin2").path("/srv/compose/delta/llmfleet-seat-delta.service")
    assert PROOF not in open(unit, encoding="utf-8").read(), "the injected line reached the unit"
