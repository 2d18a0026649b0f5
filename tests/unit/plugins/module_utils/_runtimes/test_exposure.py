"""A seat's exposure: the address its port is published on and the networks it joins, from the
inventory (checked, defaulting to the host alone) through both runtimes' files (read back by
docker compose itself and by a shell running serve.sh) to the plan, which shows every seat's
exposure and flags one published on all interfaces, and to the gates, which ask a seat there."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import BIND_ADDRESS
from ansible_collections.llmfleet.seats.plugins.module_utils._common.http import Unreachable
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.plan import build_plan
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.seat_spec import SeatSpecError, normalize_host
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.gates import SeatHost
from ansible_collections.llmfleet.seats.plugins.module_utils._plan.output import plan_markdown
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.seam import RenderError

CONFIGS = Path(__file__).resolve().parents[4] / "unit" / "fixtures" / "model_configs"
GPUS = [{"index": 0, "uuid": "GPU-a", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}]
SEAT = {"name": "chat", "engine": "vllm", "model": "/models/qwen3-8b", "port": 9100,
        "model_config": "models/qwen3-8b/config.json", "max_model_len": 8192,
        "image": "vllm/vllm-openai:v0.33.0", "weights_bytes": "16GiB"}
ASR = {"name": "asr", "engine": "fixed", "memory_cap_bytes": "3840MiB", "image": "asr:1", "port": 8190,
       "container_port": 8000}


def spec(seat, runtime="compose", seat_defaults=None):
    return normalize_host("gpu7", GPUS, [dict(seat, runtime=runtime)], seat_defaults=seat_defaults)["seats"][0]


def refusal(seat, runtime="compose", seat_defaults=None):
    with pytest.raises(SeatSpecError) as refused:
        spec(seat, runtime, seat_defaults)
    return str(refused.value)


@pytest.fixture
def inventory(tmp_path):
    (tmp_path / "models" / "qwen3-8b").mkdir(parents=True)
    shutil.copy(CONFIGS / "qwen3-8b.json", tmp_path / "models" / "qwen3-8b" / "config.json")
    return tmp_path


def plan_seat(inventory, **fields):
    plan = build_plan("gpu7", GPUS, [dict(SEAT, **fields), ASR], str(inventory))
    return plan, {seat["name"]: seat for seat in plan["seats"]}


def test_a_seat_is_published_on_the_host_alone_unless_the_inventory_says_otherwise():
    seat = spec(SEAT)
    assert BIND_ADDRESS == "127.0.0.1"
    assert seat["bind_address"] == "127.0.0.1" and seat["networks"] == []
    written = spec(dict(SEAT, bind_address="0:0:0:0:0:0:0:1", networks=["gateway", {"name": "own", "external": False}]))
    assert written["bind_address"] == "::1", "an address in one form: docker's and the plan's"
    assert written["networks"] == [{"name": "gateway", "external": True}, {"name": "own", "external": False}]
    defaults = spec(SEAT, seat_defaults={"vllm": {"bind_address": "10.0.0.5"}})
    assert defaults["bind_address"] == "10.0.0.5", "a host's llmfleet_seat_defaults set it for its seats"


@pytest.mark.parametrize("field, value, runtime, words", [
    ("bind_address", "localhost", "compose", "bind_address: expected an IPv4 or IPv6 address"),
    ("bind_address", "[::1]", "compose", "(no brackets, no host name"),
    ("bind_address", "10.0.0.256", "compose", "bind_address: expected"),
    ("bind_address", "fe80::1%eth0", "compose", "bind_address: expected"),
    ("bind_address", 2130706433, "compose", "bind_address: expected"),
    ("bind_address", "224.0.0.1", "compose", "bind_address: expected"),
    ("bind_address", "127.0.0.1:9100", "compose", "bind_address: expected"),
    ("networks", "gateway", "compose", "networks: expected a list of network names or {name, external}"),
    ("networks", [{"name": "gateway", "external": "yes"}], "compose", "networks[0].external: expected true or false"),
    ("networks", [{"name": "a b"}], "compose", "networks[0].name: expected a docker network name"),
    ("networks", ["gw;rm -rf /"], "compose", "networks[0].name: expected a docker network name"),
    ("networks", [{"name": "gateway", "alias": "x"}], "compose", "networks[0]: expected a network name or {name"),
    ("networks", ["host"], "compose", "networks[0].name: expected a network to join (not host, none, default)"),
    ("networks", ["gateway", {"name": "gateway"}], "compose", "networks[1].name: expected each network once"),
    ("networks", [{"name": "own", "external": False}], "systemd",
     "networks[0].external: expected true: a systemd seat joins networks that exist on the host"),
])
def test_exposure_that_cannot_be_rendered_as_meant_is_refused_naming_host_seat_and_field(field, value, runtime, words):
    message = refusal(dict(SEAT, **{field: value}), runtime)
    assert "host gpu7: seat chat: llmfleet_seats[0].%s" % field in message and words in message, message
    assert message.count("\n- ") == 1, "one line"


def test_a_bad_default_names_the_operators_variable():
    message = refusal(SEAT, seat_defaults={"vllm": {"bind_address": "gateway.lan"}})
    assert "(from llmfleet_seat_defaults.vllm.bind_address)" in message


def _compose_config(tmp_path, seat):
    project = tmp_path / seat["name"]
    project.mkdir()
    for name, text in compose.render(seat, "gpu7").items():
        (project / name).write_text(text)
    docker = shutil.which("docker")
    assert docker, "docker compose reads the rendered files in this test: install docker.io and compose v2"
    done = subprocess.run([docker, "compose", "--project-directory", str(project), "-f", str(project / "compose.yaml"),
                           "--env-file", str(project / ".env"), "config", "--format", "json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "0.0.0.0"])
def test_compose_publishes_on_the_bind_address_and_joins_the_networks(inventory, tmp_path, address):
    networks = [{"name": "gateway", "external": True}, {"name": "own", "external": False}]
    _plan, seats = plan_seat(inventory, bind_address=address, networks=networks)
    config = _compose_config(tmp_path, seats["chat"])
    service = config["services"]["chat"]
    assert [(p["host_ip"], p["published"], p["target"]) for p in service["ports"]] == [(address, "9100", 9100)]
    assert sorted(service["networks"]) == ["gateway", "own"], "these networks alone, not the project's default"
    assert config["networks"]["gateway"]["name"] == "gateway" and config["networks"]["gateway"]["external"] is True
    assert config["networks"]["own"]["name"] == "chat_own" and not config["networks"]["own"].get("external")
    env = (tmp_path / "chat" / ".env").read_text()
    assert "SEAT_BIND='%s'" % address in env, "the address is in the .env beside the port"


def test_compose_without_networks_keeps_the_projects_own(inventory, tmp_path):
    _plan, seats = plan_seat(inventory)
    config = _compose_config(tmp_path, seats["asr"])
    service = config["services"]["asr"]
    assert [(p["host_ip"], p["published"], p["target"]) for p in service["ports"]] == [("127.0.0.1", "8190", 8000)]
    assert list(service["networks"]) == ["default"]


def test_serve_sh_publishes_on_the_bind_address_and_joins_the_networks(inventory, tmp_path):
    """serve.sh under sh with seat.env's variables and a docker that records its argv."""
    _plan, seats = plan_seat(inventory, runtime="systemd", bind_address="::1", networks=["gateway", "metrics"])
    project = tmp_path / "chat"
    project.mkdir()
    for name, text in systemd.render(seats["chat"], "gpu7", {}, str(project)).items():
        (project / name).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    (bin_dir / "docker").write_text("#!%s\nimport json, sys\njson.dump(sys.argv[1:], open(%r, 'w'))\n"
                                    % (sys.executable, str(record)))
    os.chmod(bin_dir / "docker", 0o755)
    env = {"PATH": "%s:/usr/bin:/bin" % bin_dir}
    for line in (project / "seat.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value.strip("'")
    subprocess.run(["sh", str(project / "serve.sh")], env=env, check=True, cwd=str(tmp_path))
    argv = json.loads(record.read_text())
    assert argv[argv.index("--publish") + 1] == "[::1]:9100:9100", "vLLM listens on the seat's own port"
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg == "--network"] == ["gateway", "metrics"]


@pytest.mark.parametrize("launch, words", [
    ({"bind_address": "localhost"}, "launch.bind_address: expected an IPv4 or IPv6 address"),
    ({"networks": [{"name": "x y", "external": True}]}, "launch.networks: expected a list of {name"),
    ({"networks": ["gateway"]}, "launch.networks: expected"),
])
def test_a_plan_seat_whose_exposure_would_render_wrong_is_refused(inventory, launch, words):
    _plan, seats = plan_seat(inventory)
    seat = dict(seats["chat"], launch=dict(seats["chat"]["launch"], **launch))
    for runtime in (compose, systemd):
        with pytest.raises(RenderError, match="seat chat: " + words.replace("{", "\\{")):
            runtime.render(seat, "gpu7", {}, "/srv/compose/chat")


def test_the_plan_shows_each_seats_exposure_and_flags_all_interfaces(inventory):
    plan, seats = plan_seat(inventory, bind_address="0.0.0.0", networks=["gateway"])
    assert seats["chat"]["launch"]["bind_address"] == "0.0.0.0"
    assert seats["chat"]["launch"]["networks"] == [{"name": "gateway", "external": True}]
    markdown = plan_markdown(plan)
    assert "| exposure |" in markdown
    assert "`0.0.0.0:9100` **all interfaces**; networks: gateway (external)" in markdown
    assert "`127.0.0.1:8190` |" in markdown, "the default, shown as such"
    assert "- **published on all interfaces**: chat (0.0.0.0:9100)" in markdown
    narrow, _seats = plan_seat(inventory, bind_address="fd00::5")
    assert "`[fd00::5]:9100`" in plan_markdown(narrow) and "all interfaces" not in plan_markdown(narrow)


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_the_gates_ask_a_seat_at_the_address_it_is_published_on():
    """A seat on 127.0.0.2 alone answers there; the gates' address (127.0.0.1) has nothing on
    that port, so a gate that asked there would fail."""
    server = http.server.HTTPServer(("127.0.0.2", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        host = SeatHost(docker=None, address="127.0.0.1")
        seat = {"name": "chat", "port": port, "launch": {"bind_address": "127.0.0.2"}}
        assert host.client(seat).call("GET", "/health") == (200, "ok")
        with pytest.raises(Unreachable):
            host.client(dict(seat, launch={"bind_address": "0.0.0.0"})).call("GET", "/health")
        assert host.client(dict(seat, launch={"bind_address": "::"})).root == "http://[::1]:%d" % port
        assert host.client(dict(seat, launch={"bind_address": "fd00::5"})).root == "http://[fd00::5]:%d" % port
    finally:
        server.shutdown()
        server.server_close()
