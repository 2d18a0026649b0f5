"""The one command runner, on real processes: an argument list never read by a shell, a program
that hangs killed and named in one line, one that cannot be started named with the reason."""

from __future__ import annotations

import os

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common import command, systemd
from ansible_collections.llmfleet.seats.plugins.module_utils._common.command import CommandError, CommandTimeout
from ansible_collections.llmfleet.seats.plugins.module_utils._common.docker import Docker, DockerError
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import EXPECTED, operator_message
from ansible_collections.llmfleet.seats.plugins.module_utils._common.systemd import SystemdError


def _program(tmp_path, name, script):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)
    return str(path)


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_arguments_reach_the_program_as_they_are(tmp_path):
    echo = _program(tmp_path, "echo-args", 'printf "%s|" "$@"; printf "err" >&2; exit 3')
    assert command.run([echo, "a; rm -rf /", "$HOME", 7], timeout=30) == (3, "a; rm -rf /|$HOME|7|", "err")


def test_merged_output_keeps_the_order_it_was_written(tmp_path):
    both = _program(tmp_path, "both", "echo one; echo two >&2; echo three")
    assert command.run([both], timeout=30, merge_output=True) == (0, "one\ntwo\nthree\n", "")


def test_nothing_waits_on_standard_input(tmp_path):
    reader = _program(tmp_path, "reader", "cat; echo done")
    assert command.run([reader], timeout=30) == (0, "done\n", "")


def test_a_hung_program_is_killed_and_named_with_its_timeout(tmp_path):
    pid_file = tmp_path / "pid"
    hung = _program(tmp_path, "hangs", 'echo $$ > "%s"; exec sleep 600' % pid_file)
    with pytest.raises(CommandTimeout) as raised:
        command.run([hung, "--query=x,y", "more"], timeout=1)
    assert str(raised.value) == "hangs --query did not finish within 1s and was killed"
    assert _gone(int(pid_file.read_text())), "the hung program does not outlive the call"
    assert isinstance(raised.value, EXPECTED) and operator_message(raised.value) == str(raised.value)


def test_a_program_that_cannot_be_started_says_why(tmp_path):
    with pytest.raises(CommandError, match=r"^cannot run %s/absent: No such file or directory$" % tmp_path):
        command.run([str(tmp_path / "absent")], timeout=30)
    not_executable = tmp_path / "plain"
    not_executable.write_text("echo hi\n")
    with pytest.raises(CommandError, match=r": Permission denied$"):
        command.run([str(not_executable)], timeout=30)


def test_the_head_of_endless_output_and_the_status_of_a_short_one(tmp_path):
    endless = _program(tmp_path, "endless", "yes line")
    assert command.head([endless], 1000, timeout=30) == (None, "line\n" * 200)
    failing = _program(tmp_path, "failing", "echo no such thing >&2; exit 2")
    assert command.head([failing], 1000, timeout=30) == (2, "no such thing\n")


def test_docker_and_systemd_say_it_in_their_own_errors(tmp_path):
    hung = _program(tmp_path, "docker", "exec sleep 600")
    with pytest.raises(DockerError, match=r"^docker ps did not finish within 1s and was killed$"):
        Docker(binary=hung).run(["ps"], timeout=1)
    with pytest.raises(SystemdError, match=r"^cannot run .*/nowhere/systemctl: .* \(is this a systemd host\?\)$"):
        systemd.run(str(tmp_path / "nowhere" / "systemctl"), ["show"])
