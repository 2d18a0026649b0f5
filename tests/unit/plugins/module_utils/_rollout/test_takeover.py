"""Taking over what runs outside the collection in a seat's place: which containers block which
seat, what is refused without the seat's opt-in, how each steps aside, and the rollback's
verdict measured against the host as it was before the window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.ports import endpoint
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout import takeover
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.rollback import host_differences
from ansible_collections.llmfleet.seats.plugins.module_utils._rollout.takeover import (
    TakeOverError,
    bring_back,
    conflicts,
    engines_served,
    exposure_changes,
    takeover_lines,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._runtimes.host import (
    container_record, listening_sockets, socket_holders)

FILES = {"/srv/compose/chat/compose.yaml", "/srv/ops/compose.yaml"}
REAL_LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "vllm_logs" / "real-0.32.0-cpu"


def _exists(path):
    return path in FILES


def _container(name, project=None, service=None, ports=(), state="running", seat=None, restart="unless-stopped",
               files=None, auto_remove=False, health="healthy", image="vllm/vllm-openai:v0.33.0"):
    labels = {}
    if project:
        labels.update({"com.docker.compose.project": project, "com.docker.compose.service": service,
                       "com.docker.compose.project.working_dir": "/srv/%s" % (files or project),
                       "com.docker.compose.project.config_files": "/srv/%s/compose.yaml" % (files or project)})
    if seat:
        labels["io.llmfleet.seat"] = seat
    bindings = {"8000/tcp": [{"HostIp": ip, "HostPort": str(port)} for ip, port in ports]} if ports else {}
    return container_record({
        "Id": "id-" + name, "Name": "/" + name,
        "Config": {"Image": image, "Labels": labels},
        "State": {"Status": state, "Health": {"Status": health} if health else None},
        "HostConfig": {"PortBindings": bindings, "RestartPolicy": {"Name": restart}, "AutoRemove": auto_remove},
    })


class _StoppedDocker:
    """Each container stopped beside its seat; records what bring_back asks docker to do."""

    def __init__(self, records):
        self.records, self.calls = {record["id"]: record for record in records}, []

    def inspect_one(self, ref):
        record = self.records.get(ref)
        return {"Id": record["id"], "Name": "/" + record["name"], "State": {"Status": "exited"},
                "HostConfig": {"RestartPolicy": {"Name": record["restart"]}}} if record else None

    def run(self, args, timeout=None):
        self.calls.append(args)
        return 0, "", ""


def test_the_rollback_brings_containers_back_in_the_order_they_last_started():
    """The util-sized seat that booted on an empty card comes back before the neighbour that
    came after it, whatever their names; one that was not running is not started at all."""
    def started(name, at, state="running"):
        return dict(_container(name, state=state, health=None), started_at=at, was_running=state == "running",
                    step_aside="stop")
    entries = [started("aaa-embedder", "2026-12-04T04:01:09.5Z"), started("zzz-qwen", "2026-12-04T04:00:58.1Z"),
               started("idle", None, state="exited")]
    docker = _StoppedDocker(entries)
    changed, actions, problems = bring_back(entries, docker, wait_timeout=1, check_mode=False)
    assert changed and [call for call in docker.calls if call[0] == "start"] == [
        ["start", "id-zzz-qwen"], ["start", "id-aaa-embedder"]], docker.calls


class _BootingDocker:
    """Stopped containers that, once started, run and print a real vLLM 0.32 boot log a few
    lines per read, as a server does while it boots; records each call in order."""

    def __init__(self, records, logs, lines_per_read=30):
        self.records = {record["id"]: record for record in records}
        self.logs, self.lines_per_read = logs, lines_per_read
        self.running, self.shown, self.calls = set(), {}, []

    def _record(self, ref):
        return self.records.get(ref) or next((r for r in self.records.values() if r["name"] == ref), None)

    def inspect_one(self, ref):
        record = self._record(ref)
        if record is None:
            return None
        log = self.logs[record["name"]]
        exited = record["name"] in self.running and log and self.shown.get(record["name"], 0) >= len(
            log.splitlines()) and "Application startup complete." not in log
        status = "exited" if exited else "running" if record["name"] in self.running else "exited"
        return {"Id": record["id"], "Name": "/" + record["name"], "Path": "vllm",
                "Args": ["serve", "/models/qwen"] if record["name"] != "asr" else ["asr-serve"],
                "State": {"Status": status, "StartedAt": "2026-12-04T09:00:00.000000001Z"},
                "HostConfig": {"RestartPolicy": {"Name": record["restart"]}}}

    def log_head(self, ref, limit, since=None, timeout=30):
        name = self._record(ref)["name"]
        self.calls.append(["logs", name])
        lines = self.logs[name].splitlines()
        self.shown[name] = min(len(lines), self.shown.get(name, 0) + self.lines_per_read)
        return "\n".join(lines[:self.shown[name]])[:limit]

    def run(self, args, timeout=None):
        self.calls.append(args)
        if args[0] == "start":
            self.running.add(self.records[args[1]]["name"])
        return 0, "", ""


def _stopped_server(name, at):
    return dict(_container(name, state="running", health=None), started_at=at, was_running=True, step_aside="stop")


def test_a_brought_back_vllm_serves_before_the_next_container_starts(monkeypatch):
    """Without a healthcheck, running is not enough: a util-sized vLLM takes its memory while it
    boots, so the next container starts only once its log says the API server is up."""
    monkeypatch.setattr(takeover, "POLL_S", 0)
    entries = [_stopped_server("qwen", "2026-12-04T04:00:58.1Z"), _stopped_server("asr", "2026-12-04T04:01:09.5Z")]
    docker = _BootingDocker(entries, {"qwen": (REAL_LOGS / "ready-served.log").read_text(), "asr": ""})
    engines_served(entries, docker)
    assert [entry["engine"] for entry in entries] == ["vllm", None]
    changed, _actions, problems = bring_back(entries, docker, wait_timeout=60, check_mode=False)
    assert changed and problems == []
    asr_started = docker.calls.index(["start", "id-asr"])
    qwen_reads = [position for position, call in enumerate(docker.calls) if call == ["logs", "qwen"]]
    assert len(qwen_reads) > 1 and max(qwen_reads) < asr_started, docker.calls
    assert docker.shown["qwen"] >= 99, "read up to the line that says the API server started"


def test_a_brought_back_vllm_that_fails_to_boot_says_why_and_the_rest_still_come_back(monkeypatch):
    monkeypatch.setattr(takeover, "POLL_S", 0)
    entries = [_stopped_server("qwen", "2026-12-04T04:00:58.1Z"), _stopped_server("asr", "2026-12-04T04:01:09.5Z")]
    docker = _BootingDocker(entries, {"qwen": (REAL_LOGS / "admission-failed.log").read_text(), "asr": ""})
    engines_served(entries, docker)
    _changed, _actions, problems = bring_back(entries, docker, wait_timeout=60, check_mode=False)
    assert len(problems) == 1 and problems[0].startswith(
        "qwen: brought back, but its server failed to boot: ValueError: To serve at least one request"), problems
    assert ["start", "id-asr"] in docker.calls


def test_an_engine_name_from_the_journal_that_is_no_engine_is_not_waited_on(monkeypatch):
    monkeypatch.setattr(takeover, "POLL_S", 0)
    entry = dict(_stopped_server("qwen", None), engine=["vllm"])
    docker = _BootingDocker([entry], {"qwen": ""})
    assert bring_back([entry], docker, wait_timeout=5, check_mode=False)[2] == []
    assert ["logs", "qwen"] not in docker.calls


def test_a_start_time_is_kept_only_in_dockers_own_format():
    def record(value):
        return container_record({"Id": "x", "Name": "/x", "State": {"Status": "running", "StartedAt": value}})["started_at"]
    assert record("2026-12-04T04:00:58.123456789Z") == "2026-12-04T04:00:58.123456789Z"
    assert record("2026-12-04T04:00:58Z\nservices:") is None and record(12) is None


def _seat(name, port, take_over=False, container=None, runtime="compose"):
    return {"name": name, "port": port, "container": container or "vllm-" + name, "runtime": runtime,
            "take_over": take_over}


def test_a_hand_started_project_of_the_seats_name_is_refused_without_the_opt_in():
    hand = _container("chat-chat-1", "chat", "chat", [("127.0.0.1", 9100)], files="compose/chat")
    entries, problems = conflicts("gpu7", [_seat("chat", 9100)], [hand], exists=_exists)
    assert entries == []
    assert problems == [
        "host gpu7: container chat-chat-1 (compose project chat, service chat, running) holds seat chat: its "
        "compose project chat, its GPU memory (compose service chat), its port 127.0.0.1:9100; expected nothing "
        "else there, or take_over: true on seat chat to stop it in the window (a rollback brings it back), or "
        "stop it yourself first"]


def test_with_the_opt_in_it_is_removed_only_because_the_seats_project_would_replace_it():
    hand = _container("chat-chat-1", "chat", "chat", [("127.0.0.1", 9100)], files="compose/chat")
    entries, problems = conflicts("gpu7", [_seat("chat", 9100, take_over=True)], [hand], exists=_exists)
    assert problems == []
    (entry,) = entries
    assert (entry["step_aside"], entry["seats"], entry["was_running"]) == ("remove", ["chat"], True)
    assert entry["compose_config_files"] == ["/srv/compose/chat/compose.yaml"]
    assert takeover_lines(entries) == [
        "chat-chat-1 for seat chat (seat chat: its compose project chat, its GPU memory (compose service chat), "
        "its port 127.0.0.1:9100; removed; compose project chat, its files in /srv/compose/chat)"]


def test_another_projects_service_is_only_stopped_and_an_unrelated_port_holder_is_named():
    ops_chat = _container("ops-chat-1", "ops", "chat", [("", 8211)])
    stranger = _container("metrics", None, None, [("0.0.0.0", 8212)], restart="always")
    seats = [_seat("chat", 8211, take_over=True), _seat("coder", 8212)]
    entries, problems = conflicts("gpu7", seats, [ops_chat, stranger], exists=_exists)
    assert [(e["name"], e["step_aside"]) for e in entries] == [("ops-chat-1", "stop")]
    assert problems == [
        "host gpu7: container metrics (started with docker run, running) holds seat coder: its port 0.0.0.0:8212 "
        "(the seat's 127.0.0.1:8212); expected nothing else there, or take_over: true on seat coder to stop it in the window (a rollback "
        "brings it back), or stop it yourself first"]


def test_a_docker_run_container_with_the_seats_name_is_renamed_aside_and_one_with_rm_is_refused():
    named = _container("vllm-chat", ports=[("", 9100)])
    gone_on_stop = _container("vllm-coder", ports=[("", 9200)], auto_remove=True)
    seats = [_seat("chat", 9100, take_over=True), _seat("coder", 9200, take_over=True)]
    entries, problems = conflicts("gpu7", seats, [named, gone_on_stop], exists=_exists)
    assert [(e["name"], e["step_aside"], e.get("aside_name")) for e in entries] == [
        ("vllm-chat", "rename", "vllm-chat-before-llmfleet")]
    assert len(problems) == 1 and "vllm-coder" in problems[0] and "--rm" in problems[0]


def test_a_project_whose_files_are_gone_cannot_be_taken_over():
    orphan = _container("chat-chat-1", "chat", "chat", [("", 9100)], files="elsewhere")
    entries, problems = conflicts("gpu7", [_seat("chat", 9100, take_over=True)], [orphan], exists=_exists)
    assert entries == [] and "are not on the host to bring it back from" in problems[0]


def test_the_collections_own_containers_and_stopped_strangers_without_a_name_clash_are_left_alone():
    ours = _container("vllm-chat", "chat", "chat", [("", 9100)], seat="chat")
    stopped = _container("old-thing", ports=[("", 9100)], state="exited")
    assert conflicts("gpu7", [_seat("chat", 9100)], [ours, stopped], exists=_exists) == ([], [])


def test_seats_that_are_not_a_plan_are_refused():
    with pytest.raises(TakeOverError):
        conflicts("gpu7", [{"port": 1}], [], exists=_exists)


def test_a_host_name_with_a_newline_in_a_label_is_not_shown():
    record = container_record({"Id": "x", "Name": "/a", "Config": {"Labels": {
        "com.docker.compose.project": "chat\nservices:"}}, "State": {"Status": "running"}})
    assert record["compose_project"] is None


CARDS = [{"index": 0, "uuid": "GPU-a", "memory_used_mib": 30000}, {"index": 1, "uuid": "GPU-b", "memory_used_mib": 4000}]


def _running(name, image="img:1", health="healthy"):
    return {"name": name, "image": image, "state": "running", "health": health}


def test_the_host_as_it_was_has_no_difference():
    before = [_running("chat-chat-1"), _running("asr", health=None)]
    assert host_differences(before, list(before), CARDS, {"gpus": CARDS}, 1024) == []


def test_every_difference_from_the_host_before_is_named():
    before = [_running("chat-chat-1"), _running("coder-coder-1"), _running("asr", health=None)]
    after = [_running("chat-chat-1", health="starting"), _running("asr", image="img:2"), _running("vllm-chat")]
    cards_after = [dict(CARDS[0], memory_used_mib=0), dict(CARDS[1], memory_used_mib=4500)]
    assert host_differences(before, after, CARDS, cards_after, 1024) == [
        "container asr runs img:2, it ran img:1 before",
        "container chat-chat-1 was healthy before and is starting now",
        "container coder-coder-1 ran before the window and does not run now",
        "container vllm-chat runs now and did not before the window",
        "GPU 0 holds 0 MiB, it held 30,000 MiB before the window (tolerance 1,024 MiB)",
    ]


def _planned(name, port, bind, take_over=False):
    return dict(_seat(name, port, take_over), launch={"bind_address": bind})


def test_a_seat_port_a_process_outside_docker_listens_on_is_refused_naming_both():
    ours = _container("vllm-chat", "chat", "chat", [("", 9100)], seat="chat")
    seats = [_seat("chat", 9100), _seat("coder", 9200, take_over=True)]
    listening = {("0.0.0.0", 22): "11", ("0.0.0.0", 9100): "12", ("::", 9100): "13", ("0.0.0.0", 9200): "14"}
    entries, problems = conflicts("gpu7", seats, [ours], listening=listening, exists=_exists,
                                  holders=lambda inodes: {"14": "nginx (pid 812)"} if inodes == ["14"] else {})
    assert entries == [] and problems == [
        "host gpu7: seat coder: port 9200 is held by a process that is no container: nginx (pid 812) listens on "
        "0.0.0.0:9200; the seat publishes 127.0.0.1:9200; expected a free port on that address, or stop that "
        "process first"]


@pytest.mark.parametrize("listens, bind, clash", [
    ("127.0.0.1", "10.0.0.5", False),
    ("10.0.0.5", "127.0.0.1", False),
    ("::1", "127.0.0.1", False),
    ("127.0.0.1", "127.0.0.1", True),
    ("::ffff:127.0.0.1", "127.0.0.1", True),
    ("0.0.0.0", "10.0.0.5", True),
    ("::", "127.0.0.1", True),
    ("10.0.0.5", "0.0.0.0", True),
    ("fd00::5", "::", True),
])
def test_a_process_on_the_host_clashes_with_a_seat_by_address_and_port(listens, bind, clash):
    _entries, problems = conflicts("gpu7", [_planned("chat", 9100, bind)], [], listening={(listens, 9100): "7"},
                                   exists=_exists)
    assert bool(problems) is clash, problems
    if clash:
        assert "a process listens on %s" % endpoint(listens, 9100) in problems[0]
        assert "the seat publishes %s" % endpoint(bind, 9100) in problems[0]


def test_what_docker_listens_on_for_a_published_port_is_the_containers_not_a_process():
    ours = _container("vllm-chat", "chat", "chat", [("10.0.0.5", 9100)], seat="chat")
    seats = [_planned("chat", 9100, "10.0.0.5"), _planned("coder", 9100, "127.0.0.1")]
    listening = {("10.0.0.5", 9100): "1", ("127.0.0.1", 9100): "2"}
    _entries, problems = conflicts("gpu7", seats, [ours], listening=listening, exists=_exists)
    assert len(problems) == 1 and problems[0].startswith("host gpu7: seat coder: port 9100 is held by a process"), \
        problems


@pytest.mark.parametrize("published, bind, clash", [
    ("127.0.0.1", "10.0.0.5", False),
    ("10.0.0.5", "127.0.0.1", False),
    ("127.0.0.1", "127.0.0.1", True),
    ("", "10.0.0.5", True),
    ("0.0.0.0", "127.0.0.1", True),
    ("::", "10.0.0.5", True),
    ("10.0.0.5", "0.0.0.0", True),
])
def test_another_container_clashes_with_a_seat_by_address_and_port(published, bind, clash):
    stranger = _container("metrics", None, None, [(published, 9100)])
    _entries, problems = conflicts("gpu7", [_planned("coder", 9100, bind)], [stranger], exists=_exists)
    assert bool(problems) is clash, problems
    if clash:
        assert "container metrics (started with docker run, running) holds seat coder: its port %s" % (
            endpoint(published, 9100)) in problems[0]


def test_the_listening_sockets_are_read_from_proc_net_with_their_addresses(tmp_path):
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (tmp_path / "tcp").write_text(header + "   0: 00000000:2380 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1 0\n"
                                  "   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 102 1 0\n"
                                  "   2: 0500000A:23F0 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 103 1 0\n")
    (tmp_path / "tcp6").write_text(header + "   0: 00000000000000000000000000000000:23F0 "
                                   "00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 104 1 0\n"
                                   "   1: 00000000000000000000000001000000:2380 "
                                   "00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 105 1 0\n")
    assert listening_sockets(str(tmp_path)) == {("0.0.0.0", 0x2380): "101", ("10.0.0.5", 0x23F0): "103",
                                                ("::", 0x23F0): "104", ("::1", 0x2380): "105"}


def test_the_process_holding_a_socket_is_named_from_proc(tmp_path):
    for pid, command, inode in (("41", "sshd", "900"), ("812", "nginx\x1b[31m", "901"), ("90", "redis", "902")):
        (tmp_path / pid / "fd").mkdir(parents=True)
        (tmp_path / pid / "comm").write_text(command + "\n")
        (tmp_path / pid / "fd" / "3").symlink_to("socket:[%s]" % inode)
    assert socket_holders(["901", "902"], str(tmp_path)) == {"901": "a process (pid 812)", "902": "redis (pid 90)"}


def test_a_window_that_publishes_a_running_seat_elsewhere_says_so():
    containers = [_container("vllm-a", "a", "a", [("", 8101)], seat="a"),
                  _container("vllm-b", "b", "b", [("127.0.0.1", 8102)], seat="b"),
                  _container("vllm-c", "c", "c", [("10.0.0.5", 8103)], seat="c")]

    def planned(name, port, bind):
        return dict(_seat(name, port), launch={"bind_address": bind})

    seats = [planned("a", 8101, "127.0.0.1"), planned("b", 8102, "0.0.0.0"), planned("c", 8103, "10.0.0.5")]
    assert exposure_changes("gpu7", seats, containers) == [
        "host gpu7: seat a is published on every interface now (0.0.0.0:8101) and the window publishes it on "
        "127.0.0.1 only: a gateway on another host will no longer reach it; set its bind_address to the "
        "address the gateway comes in on",
        "host gpu7: seat b is published on 127.0.0.1 now and the window publishes it on every interface "
        "(0.0.0.0): reachable from every network the host is on"]
