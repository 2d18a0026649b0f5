"""A seat kept dormant after a model swap, on a real dockerd with compose v2: the compose runtime
puts the old seat's container to sleep (created, labelled with the seat that replaced it, no
restart policy) without touching its own files, says so when asked, leaves it alone when asked
again, wakes it from its own files alone, and removes it with the file it laid over them."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import DORMANT_LABEL, MANAGED_LABEL
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes import compose, dormant_seats, run_seat
from support.adhoc import run_module
from support.dockerd import SLEEP_IMAGE, private_dockerd, tiny_image
from support.need import need_root_and

pytestmark = [pytest.mark.docker, pytest.mark.slow]

OLD_SEAT = """\
name: charrp-dense
services:
  charrp-dense:
    image: %s
    container_name: charrp-dense
    command: ["/bin/sleep", "3600"]
    network_mode: none
    restart: always
    labels: {%s: charrp-dense, dashboard.group: AI}
""" % (SLEEP_IMAGE, MANAGED_LABEL)


def _container(engine):
    found = json.loads(engine.docker("inspect", "--type", "container", "charrp-dense").stdout)[0]
    return found["State"]["Status"], found["HostConfig"]["RestartPolicy"]["Name"], found["Config"]["Labels"]


def test_the_replaced_seat_sleeps_is_left_asleep_wakes_from_its_own_files_and_is_retired(tmp_path):
    need_root_and("dockerd", "docker")
    with private_dockerd() as engine:
        tiny_image(engine, SLEEP_IMAGE, ["/bin/sleep"])
        project = tmp_path / "charrp-dense"
        project.mkdir()
        (project / "compose.yaml").write_text(OLD_SEAT)
        docker = Docker(engine.host)
        assert run_seat("compose", "started", str(project), docker) == (True, None)
        assert _container(engine)[:2] == ("running", "always")

        # check mode says it would, and does nothing
        assert run_seat("compose", "dormant", str(project), docker, check_mode=True,
                        replaced_by="charrp-moe") == (True, None)
        assert _container(engine)[0] == "running" and dormant_seats(docker) == {}

        assert run_seat("compose", "dormant", str(project), docker, replaced_by="charrp-moe") == (True, None)
        state, restart, labels = _container(engine)
        assert (state, restart) == ("created", "no"), "stopped, and never started again by the engine"
        assert labels[DORMANT_LABEL] == "charrp-moe" and labels[MANAGED_LABEL] == "charrp-dense"
        assert labels["dashboard.group"] == "AI", "its own labels are kept"
        assert dormant_seats(docker) == {"charrp-dense": "charrp-moe"}
        assert (project / "compose.yaml").read_text() == OLD_SEAT, "its own files are not touched"
        assert oct((project / compose.DORMANT_FILE).stat().st_mode & 0o777) == "0o644"

        # a second window finds it asleep and changes nothing
        assert run_seat("compose", "dormant", str(project), docker, replaced_by="charrp-moe") == (False, None)

        # a rollback wakes it as it ran: its own restart policy, no dormant label
        assert run_seat("compose", "started", str(project), docker) == (True, None)
        state, restart, labels = _container(engine)
        assert (state, restart) == ("running", "always") and DORMANT_LABEL not in labels
        assert not (project / compose.DORMANT_FILE).exists() and dormant_seats(docker) == {}

        # retired: the container goes, with the file laid over its own
        assert run_seat("compose", "dormant", str(project), docker, replaced_by="charrp-moe") == (True, None)
        assert run_seat("compose", "absent", str(project), docker) == (True, None)
        assert engine.docker("ps", "--all", "--quiet", "--filter", "name=charrp-dense").stdout.strip() == ""
        assert not (project / compose.DORMANT_FILE).exists() and (project / "compose.yaml").exists()


def test_a_seat_without_compose_files_is_not_put_to_sleep(tmp_path):
    changed, problem = compose.sleep(str(tmp_path / "tp-seat"), Docker("unix:///nonexistent.sock"), "tp-seat-2")
    assert not changed
    assert problem == "no compose.yaml in %s: only a compose seat's container is kept dormant" % (tmp_path / "tp-seat")


def test_seat_runtime_refuses_a_dormant_seat_without_a_seat_name_to_fall_back_for(tmp_path):
    project = tmp_path / "charrp-dense"
    project.mkdir()
    (project / "compose.yaml").write_text(OLD_SEAT)
    rc, result = run_module("llmfleet.seats.seat_runtime", {"project_dir": str(project), "state": "dormant"})
    assert rc != 0 and result["msg"] == "state is dormant but all of the following are missing: replaced_by"
    asked = {"project_dir": str(project), "state": "dormant", "replaced_by": "moe; reboot"}
    rc, result = run_module("llmfleet.seats.seat_runtime", asked, check_mode=True)
    assert rc != 0 and "replaced_by: expected a seat name, got 'moe; reboot'" in result["msg"], result
    assert "Traceback" not in json.dumps(result) and not (project / compose.DORMANT_FILE).exists()
