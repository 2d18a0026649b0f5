"""What the rebalance role refuses before it touches a host, through a real ansible-playbook run
of the role on this machine: a refusal names the operator's own variables and what they lacked."""

from __future__ import annotations

import json

import yaml

from conftest import run_ansible


def _refused(tmp_path, **asked):
    """(the one task that failed, its message) of a window on this machine with ``asked``; the
    lock must not have been taken."""
    lock = tmp_path / "rebalance.lock"
    playbook = tmp_path / "window.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "A window asked for what it cannot do",
        "ansible.builtin.include_role": {"name": "llmfleet.seats.seat_rebalance"},
        "vars": dict({"seat_rebalance_plan": {"host": "localhost", "seats": []}, "seat_rebalance_seats": [],
                      "seat_rebalance_run_id": "r1", "seat_rebalance_backup_date": "20261204",
                      "seat_rebalance_lock_path": str(lock)}, **asked)}]}]))
    proc = run_ansible(["ansible-playbook", "-i", "localhost,", "-c", "local", str(playbook)],
                       extra_env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    assert proc.returncode != 0
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    failed = [task for task in tasks if task["hosts"]["localhost"].get("failed")]
    assert len(failed) == 1 and not lock.exists(), "refused before the lock"
    return failed[0]["task"]["name"].rpartition(" : ")[2], failed[0]["hosts"]["localhost"]["msg"]


def test_a_load_asked_for_without_a_gateway_is_refused_before_anything_is_touched(tmp_path):
    task, message = _refused(tmp_path, seat_rebalance_gateway_load=True, seat_rebalance_gateway_load_routes=["gen-small"])
    assert task == "Check that the load through the gateway has a gateway and routes"
    assert message == ("host localhost: seat_rebalance_gateway_load is true, so expected seat_rebalance_gateway_url "
                       "(the gateway, e.g. http://fv-gw:4000) and seat_rebalance_gateway_load_routes (its model "
                       "names to send requests to), got no URL and 1 route(s)")


def test_writing_the_gateways_config_without_a_restart_is_refused_before_anything_is_touched(tmp_path):
    task, message = _refused(tmp_path, seat_rebalance_gateway_config_write=True,
                             seat_rebalance_gateway_config="/srv/litellm/config.yaml",
                             seat_rebalance_gateway_url="http://fv-gw:4000")
    assert task == "Check that writing the gateway's config has a config, a restart and a gateway to wait for"
    assert message.endswith("got a config, a URL, no restart and 300 s"), message
    assert message.startswith("host localhost: seat_rebalance_gateway_config_write is true, so expected")


def test_a_gateway_restart_given_no_time_to_answer_is_refused_before_anything_is_touched(tmp_path):
    task, message = _refused(tmp_path, seat_rebalance_gateway_config_write=True,
                             seat_rebalance_gateway_config="/srv/litellm/config.yaml",
                             seat_rebalance_gateway_url="http://fv-gw:4000",
                             seat_rebalance_gateway_restart=["systemctl", "restart", "litellm"],
                             seat_rebalance_gateway_restart_timeout=0)
    assert task == "Check that writing the gateway's config has a config, a restart and a gateway to wait for"
    assert message.endswith("got a config, a URL, a restart and 0 s"), message
    assert "seat_rebalance_gateway_restart_timeout above 0 (seconds to wait for it)" in message
