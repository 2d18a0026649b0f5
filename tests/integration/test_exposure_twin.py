"""A seat's exposure on the fleet twin, in both runtimes: one window rebalances each host with
one tenant published on the host alone (127.0.0.1) and joined to the gateway's external network,
and another published on the host's own address; docker, the host's listening sockets and a
client on each side say each seat is reachable where the inventory said and nowhere else, and the
gates asked each one there. The seats are the fleet's ASR tenant (fixed seats: what is under test
is the runtime's files and docker, not an engine); compose runs them on twin1, systemd on twin2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

import pytest
import yaml

from support.rollout import FLEET, rebalance, report_of, twin_pair

from twinlib import fleet
from twinlib.sysroot import root_tarball

pytestmark = [pytest.mark.twin, pytest.mark.slow]

LOCAL_PORT, HOST_PORT = 8191, 8192


def _fleet(root, seats):
    """The twin-pair fleet with each host of ``seats`` (host: (address, runtime)) running two
    tenants of its runtime: ``local`` on 127.0.0.1 and the gateway's network, ``lan`` on the
    host's own address."""
    copy = root / "fleet"
    shutil.copytree(FLEET, copy)
    asr = next(seat for seat in yaml.safe_load((copy / "host_vars" / "twin1.yml").read_text())["llmfleet_seats"]
               if seat["name"] == "asr")
    for host, (address, runtime) in seats.items():
        path = copy / "host_vars" / ("%s.yml" % host)
        data = yaml.safe_load(path.read_text())
        data["llmfleet_seats"] = [
            dict(asr, name="local", port=LOCAL_PORT, bind_address="127.0.0.1", networks=["gateway"], runtime=runtime,
                 gpu=0),
            dict(asr, name="lan", port=HOST_PORT, bind_address=address, runtime=runtime, gpu=1),
        ]
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy / "hosts.yml"


def _in_host(host, argv):
    done = subprocess.run(host.enter() + argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _listening(host, port):
    """The local addresses the host listens on at ``port`` (ss, in the host's own namespace)."""
    lines = _in_host(host, ["ss", "-ltnH", "sport = :%d" % port]).splitlines()
    return sorted({line.split()[3].rsplit(":", 1)[0] for line in lines})


def _inspect(host, seat):
    names = host.docker(["ps", "--filter", "label=io.llmfleet.seat=%s" % seat, "--format", "{{.Names}}"]).stdout.split()
    assert len(names) == 1, names
    return json.loads(host.docker(["inspect", names[0]]).stdout)[0]


def _answers(address, port):
    try:
        with urllib.request.urlopen("http://%s:%d/health" % (address, port), timeout=5) as reply:
            return reply.status
    except OSError as exc:
        return exc


# compose on twin1; systemd on twin2, booted with systemd (its units run docker run)
RUNS = {"compose": "twin1", "systemd": "twin2"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The pair up once, each host rebalanced to its runtime's two tenants in one window."""
    if not root_tarball().exists():
        pytest.fail("no systemd host root: run scripts/install-system-deps (tests/twin/twin build-root)")
    root = tmp_path_factory.mktemp("exposure")
    spec = json.loads((FLEET / "spec.json").read_text())
    for host in spec["hosts"]:
        if host["name"] == RUNS["systemd"]:
            host["kind"] = "systemd"
    (root / "spec.json").write_text(json.dumps(spec))
    with twin_pair(root / "spec.json") as twin_inventory:
        hosts = {runtime: fleet.find_host(name) for runtime, name in RUNS.items()}
        for host in hosts.values():
            made = host.docker(["network", "create", "gateway"])
            assert made.returncode == 0, made.stderr
        fleet_hosts = _fleet(root, {host.name: (host.address, runtime) for runtime, host in hosts.items()})
        dry = rebalance(fleet_hosts, twin_inventory, root / "dry", "--check", "--diff")
        rebalance(fleet_hosts, twin_inventory, root / "applied")
        yield {"hosts": hosts, "dry": dry, "report": report_of(root / "applied"),
               "plan": (root / "dry" / "report.md").read_text()}


@pytest.fixture(scope="module", params=sorted(RUNS))
def window(request, pair):
    """What one host of the window shows: its runtime's seats as docker, its sockets and a client
    on either side see them."""
    runtime = request.param
    host = pair["hosts"][runtime]
    return {
        "runtime": runtime, "host": host.name, "dry": pair["dry"], "report": pair["report"],
        "local": _inspect(host, "local"), "lan": _inspect(host, "lan"), "plan": pair["plan"],
        "listening": {port: _listening(host, port) for port in (LOCAL_PORT, HOST_PORT)},
        "inside": _in_host(host, ["python3", "-c", "import urllib.request; print(urllib.request.urlopen("
                                  "'http://127.0.0.1:%d/health', timeout=5).status)" % LOCAL_PORT]).strip(),
        "outside": {"local": _answers(host.address, LOCAL_PORT), "lan": _answers(host.address, HOST_PORT)},
        "networks": host.docker(["network", "ls", "--format", "{{.Name}}"]).stdout.split(),
        "address": host.address,
    }


def test_the_dry_run_shows_each_seats_exposure(window):
    assert "SEAT_BIND='127.0.0.1'" in window["dry"].stdout, "the variables file's diff names the address"
    assert "`127.0.0.1:%d`; networks: gateway (external)" % LOCAL_PORT in window["plan"]
    assert "`%s:%d` |" % (window["address"], HOST_PORT) in window["plan"]
    assert "all interfaces" not in window["plan"], "neither is on every interface"


def test_a_seat_on_the_host_alone_is_published_there_and_joins_the_gateways_network(window):
    local = window["local"]
    assert local["HostConfig"]["PortBindings"] == {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(LOCAL_PORT)}]}
    assert sorted(local["NetworkSettings"]["Networks"]) == ["gateway"], "the external network alone"
    assert window["listening"][LOCAL_PORT] == ["127.0.0.1"], "nothing listens on another address"
    assert window["inside"] == "200", "it answers on the host"
    refused = window["outside"]["local"]
    assert isinstance(refused, OSError) and isinstance(getattr(refused, "reason", refused), ConnectionRefusedError), \
        "from another host it is not there: %r" % refused
    assert "gateway" in window["networks"] and "local_gateway" not in window["networks"] \
        and "local_default" not in window["networks"], "an external network is joined, never made"


def test_a_seat_on_the_hosts_own_address_is_reached_and_gated_there(window):
    lan = window["lan"]
    assert lan["HostConfig"]["PortBindings"] == {"8000/tcp": [{"HostIp": window["address"], "HostPort": str(HOST_PORT)}]}
    assert window["listening"][HOST_PORT] == [window["address"]]
    assert window["outside"]["lan"] == 200
    own = {"compose": ["lan_default"], "systemd": ["bridge"]}[window["runtime"]]
    assert sorted(lan["NetworkSettings"]["Networks"]) == own, "no networks listed: the runtime's own"
    section = window["report"]["hosts"][window["host"]]
    assert section["status"] == "applied", section.get("status")
    gates = [gate for gate in section["gates"] if gate.get("seat") in ("local", "lan")]
    assert gates and all(gate["ok"] for gate in gates), gates
