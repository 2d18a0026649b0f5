"""Adopt keeps a container's exposure: the address each port is published on and the networks
it joins become the seat's bind_address and networks, so the collection's files publish it no
wider than it was."""

from __future__ import annotations

import datetime

from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.inventory import adopted_inventory
from ansible_collections.llmfleet.seats.plugins.module_utils._adopt.read import container_record
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose

NOW = datetime.datetime(2026, 12, 1, 8, tzinfo=datetime.timezone.utc)
GPU0 = "GPU-0a000000-0000-4000-8000-000000000000"
CARDS = {"source": "nvml", "gpus": [{"index": 0, "uuid": GPU0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                                     "processes": [{"pid": 7, "used_mib": 3700, "container": "chat-chat-1"}]}]}


def _attrs(name, args, project, bindings, networks):
    return {
        "Id": name * 4, "Name": "/" + name, "Image": "sha256:img", "Path": args[0], "Args": args[1:],
        "State": {"Running": True, "StartedAt": "2026-11-29T08:00:00Z"},
        "Config": {"Image": "asr:1.2", "Env": ["PATH=/usr/bin"],
                   "Labels": {"com.docker.compose.project": project, "com.docker.compose.service": project}},
        "HostConfig": {"PortBindings": bindings, "NetworkMode": "%s_default" % project,
                       "RestartPolicy": {"Name": "always"},
                       "DeviceRequests": [{"Driver": "nvidia", "DeviceIDs": [GPU0], "Capabilities": [["gpu"]]}]},
        "NetworkSettings": {"Networks": {network: {} for network in networks}},
        "Mounts": [],
    }


def _adopted(bindings, networks, args=("vllm", "serve", "/srv/models/qwen3-8b", "--port", "8000")):
    record = container_record(_attrs("chat-chat-1", list(args), "chat", bindings, networks),
                              {"sha256:img": ["PATH=/usr/bin"]}, NOW)
    return record, adopted_inventory("gpu7", [record], CARDS, now=NOW)


def test_a_loopback_port_on_an_external_network_is_kept():
    record, adopted = _adopted({"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "9100"}]},
                               ["gateway", "chat_default"])
    assert record["ports"] == [{"container_port": 8000, "host_port": 9100, "host_ip": "127.0.0.1", "protocol": "tcp"}]
    assert record["networks"] == ["chat_default", "gateway"]
    seat = adopted["host_vars"]["llmfleet_seats"][0]
    assert (seat["port"], seat["bind_address"]) == (9100, "127.0.0.1")
    assert seat["networks"] == [{"name": "gateway", "external": True}], "compose's own default network is not named"
    assert not any("all interfaces" in note for note in adopted["notes"])


def test_a_port_on_every_interface_stays_so_and_says_it():
    _record, adopted = _adopted({"8000/tcp": [{"HostIp": "", "HostPort": "9100"}]}, ["chat_default"])
    seat = adopted["host_vars"]["llmfleet_seats"][0]
    assert seat["bind_address"] == "0.0.0.0" and "networks" not in seat
    assert "seat chat: published on all interfaces (port 9100): bind_address 0.0.0.0 keeps it so; set the " \
           "address the gateway comes in on" in adopted["notes"]


def test_a_project_network_and_a_second_binding_are_named_not_widened():
    _record, adopted = _adopted({"8000/tcp": [{"HostIp": "10.0.0.5", "HostPort": "9100"},
                                              {"HostIp": "127.0.0.1", "HostPort": "9101"}]},
                                ["chat_backend", "gateway", "bridge", "{{ lookup('pipe', 'id') }}"])
    seat = adopted["host_vars"]["llmfleet_seats"][0]
    assert (seat["port"], seat["bind_address"]) == (9100, "10.0.0.5")
    assert seat["networks"] == [{"name": "gateway", "external": True}]
    notes = adopted["notes"]
    assert "seat chat: port 8000 is published 2 times; only the first, port 9100 on 10.0.0.5, is kept" in notes
    assert any(note.startswith("seat chat: joins chat_backend, a network of its compose project; left out") for note in notes)
    assert "seat chat: joins a network whose name adopt does not write; left out: set networks" in notes
    assert "lookup" not in str(adopted), "a network's name from the host is never written as it is"


def test_an_adopted_tenant_renders_on_its_own_address_and_network():
    """A fixed tenant published on [::1] alone, on the external gateway network: the plan's
    compose file publishes it there and joins that network, nothing wider."""
    _record, adopted = _adopted({"8000/tcp": [{"HostIp": "::1", "HostPort": "8190"}]}, ["gateway", "chat_default"],
                                args=("python3", "-m", "asr", "--serve"))
    seat = dict(adopted["host_vars"]["llmfleet_seats"][0], image="asr:1.2")
    assert (seat["engine"], seat["bind_address"], seat["container_port"]) == ("fixed", "::1", 8000)
    plan = build_plan("gpu7", adopted["host_vars"]["llmfleet_gpus"], [seat])
    files = compose.render(plan["seats"][0], "gpu7")
    assert "SEAT_BIND='::1'" in files[".env"] and "SEAT_PORT='8190'" in files[".env"]
    assert '"[${SEAT_BIND:?}]:${SEAT_PORT:?}:8000"' in files["compose.yaml"]
    assert '\nnetworks:\n  gateway:\n    external: true' in files["compose.yaml"]
