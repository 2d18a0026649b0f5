"""The gateway side of a seat's api_key, through real ansible runs at -vvv: a route to a keyed
seat that sends no key (or another literal key) is refused before the window, naming the route
and the seat; no key, the seat's or one written in the config, appears in anything printed,
the diff of a repointed config included."""

from __future__ import annotations

import json

from conftest import run_ansible

SEAT_KEY = "sk-seat-4f1c0e9a7b3d2c18"
FILE_KEY = "sk-file-9e8d7c6b5a4f3e2d"
CONFIG = """model_list:
  - model_name: guarded
    litellm_params:
      model: hosted_vllm/guarded
      api_base: http://10.250.50.54:8040/v1
%s
  - model_name: open
    litellm_params:
      model: hosted_vllm/open
      api_base: http://10.251.50.54:8041/v1
      api_key: %s
""" % ("%s", FILE_KEY)
SEATS = [{"name": "guarded", "host": "10.251.50.54", "port": 8040, "previous_host": "10.250.50.54",
          "served_model_names": ["guarded"], "api_key": SEAT_KEY},
         {"name": "open", "host": "10.251.50.54", "port": 8041, "served_model_names": ["open"]}]


def _routes(tmp_path, route_key):
    """gateway_routes in check mode with --diff at -vvv, repointing the moved route."""
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG % route_key)
    args = {"path": str(path), "rewrite": True, "backup_date": "20261005", "seats": SEATS}
    proc = run_ansible(["ansible", "localhost", "-m", "llmfleet.seats.gateway_routes", "-a", json.dumps(args),
                        "--check", "--diff", "-vvv"])
    return proc, path


def _printed(proc):
    return proc.stdout + proc.stderr


def test_a_route_without_the_seats_key_is_refused_naming_route_and_seat(tmp_path):
    proc, path = _routes(tmp_path, "")
    assert proc.returncode != 0
    lines = [line for line in proc.stdout.splitlines() if "do not point at their seat" in line]
    assert lines, proc.stdout[-3000:]
    assert ("line 5 model_list[0] (guarded) api_base http://10.251.50.54:8040/v1: no_key - seat guarded has an"
            " api_key; route guarded must carry the seat's key") in lines[0]
    assert SEAT_KEY not in _printed(proc) and FILE_KEY not in _printed(proc)
    assert "Traceback" not in _printed(proc)
    assert path.read_text() == CONFIG % "", "a refused audit writes nothing"


def test_a_route_with_another_literal_key_is_refused_without_showing_either(tmp_path):
    proc, _path = _routes(tmp_path, "      api_key: sk-not-the-seats-key-77")
    assert proc.returncode != 0
    assert "wrong_key - route guarded carries an api_key that is not seat guarded's key" in proc.stdout, \
        proc.stdout[-3000:]
    for key in (SEAT_KEY, FILE_KEY, "sk-not-the-seats-key-77"):
        assert key not in _printed(proc), key


def test_a_route_with_the_seats_key_passes_and_its_diff_shows_no_key(tmp_path):
    proc, path = _routes(tmp_path, "      api_key: os.environ/GUARDED_KEY")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "+      api_base: http://10.251.50.54:8040/v1" in proc.stdout, "the diff of the repoint is shown"
    assert "api_key: ********" in proc.stdout, "the file's own key is masked in the diff"
    assert FILE_KEY not in _printed(proc) and SEAT_KEY not in _printed(proc)
    assert path.read_text() == CONFIG % "      api_key: os.environ/GUARDED_KEY", "check mode writes nothing"
