"""A seat's exposure on the fleet twin: a window rebalances twin1 with one tenant published on
the host alone (127.0.0.1) and joined to the gateway's external network, and another published on
the host's own address; docker, the host's listening sockets and a client on each side say each
seat is reachable where the inventory said and nowhere else, and the gates asked each one there.
The seats are the fleet's ASR tenant (fixed seats: what is under test is the runtime's files and
docker, not an engine)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

import pytest
import yaml

from support.rollout import FLEET, rebalance, report_of, twin_pair

from twinlib import fleet

pytestmark = [pytest.mark.twin, pytest.mark.slow]

LOCAL_PORT, HOST_PORT = 8191, 8192


def _fleet(root, address):
    """The twin-pair fleet with twin1 running two tenants: ``local`` on 127.0.0.1 and the
    gateway's network, ``lan`` on the host's own ``address``."""
    copy = root / "fleet"
    shutil.copytree(FLEET, copy)
    path = copy / "host_vars" / "twin1.yml"
    data = yaml.safe_load(path.read_text())
    asr = next(seat for seat in data["llmfleet_seats"] if seat["name"] == "asr")
    data["llmfleet_seats"] = [
        dict(asr, name="local", port=LOCAL_PORT, bind_address="127.0.0.1", networks=["gateway"]),
        dict(asr, name="lan", port=HOST_PORT, bind_address=address, gpu=1),
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


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    root = tmp_path_factory.mktemp("exposure")
    with twin_pair() as twin_inventory:
        twin1 = fleet.find_host("twin1")
        made = twin1.docker(["network", "create", "gateway"])
        assert made.returncode == 0, made.stderr
        hosts = _fleet(root, twin1.address)
        dry = rebalance(hosts, twin_inventory, root / "dry", "--check", "--diff", "-e", "target=twin1")
        rebalance(hosts, twin_inventory, root / "applied", "-e", "target=twin1")
        local, lan = _inspect(twin1, "local"), _inspect(twin1, "lan")
        yield {
            "dry": dry, "report": report_of(root / "applied"), "local": local, "lan": lan,
            "plan": (root / "dry" / "report.md").read_text(),
            "listening": {port: _listening(twin1, port) for port in (LOCAL_PORT, HOST_PORT)},
            "inside": _in_host(twin1, ["python3", "-c", "import urllib.request; print(urllib.request.urlopen("
                                       "'http://127.0.0.1:%d/health', timeout=5).status)" % LOCAL_PORT]).strip(),
            "outside": {"local": _answers(twin1.address, LOCAL_PORT), "lan": _answers(twin1.address, HOST_PORT)},
            "networks": twin1.docker(["network", "ls", "--format", "{{.Name}}"]).stdout.split(),
            "address": twin1.address,
        }



def test_the_dry_run_shows_each_seats_exposure(window):
    assert "SEAT_BIND='127.0.0.1'" in window["dry"].stdout, "the .env diff names the address"
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
    assert sorted(lan["NetworkSettings"]["Networks"]) == ["lan_default"], "no networks listed: the project's own"
    section = window["report"]["hosts"]["twin1"]
    assert section["status"] == "applied", section.get("status")
    gates = [gate for gate in section["gates"] if gate.get("seat") in ("local", "lan")]
    assert gates and all(gate["ok"] for gate in gates), gates
