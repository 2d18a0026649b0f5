"""`playbooks/ladder.yml` refuses, in one line each, all at once and before any host is touched,
what cannot make a ladder: a seat no host lists, a dry run, a missing report directory, a knob
the seat's engine lacks (a fixed seat has none), a ladder_high or ladder_step that is not a
whole number or would lay out more rungs than a ladder can hold; each names the variable as
the operator gave it (ladder_*, not the role's seat_ladder_*), under -e target= and -l as well.

The fleet's hosts have no address: a task that contacted one would be UNREACHABLE."""

from __future__ import annotations

import pytest

from conftest import REPO_ROOT, run_ansible

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair" / "hosts.yml"
LADDER = REPO_ROOT / "playbooks" / "ladder.yml"


def ladder(*args):
    proc = run_ansible(["ansible-playbook", "-i", str(FLEET), str(LADDER), *args])
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-2000:]
    assert "UNREACHABLE" not in output and "Traceback" not in output and "HostVarsVars" not in output, output[-3000:]
    assert "seat_ladder_" not in output.replace("llmfleet.seats.seat_ladder", ""), output[-3000:]
    return output


def test_a_seat_no_host_lists_is_refused_naming_the_seats_there_are():
    assert "seat: expected the name of a seat of gpu_hosts (alpha, beta, gamma, asr, delta, epsilon), " \
           "got 'nope'" in ladder("-e", "seat=nope")


def test_a_dry_run_is_refused(tmp_path):
    output = ladder("-e", "seat=alpha", "--check", "-e", "llmfleet_report_dir=%s" % tmp_path)
    assert "host twin1: a ladder is measured by booting and probing each rung, so it has no dry run" in output
    assert not list(tmp_path.iterdir()), "nothing was written"


@pytest.mark.parametrize("args, words", [
    # the seat is one of the hosts' (it was said not to be when the report dir was missing)
    (["-e", "seat=alpha"], ["1 problem(s) with the ladder",
                            "llmfleet_report_dir: expected a directory on the controller for ladder.json, got ''"]),
    (["-e", "seat=asr", "-e", "llmfleet_report_dir=/nonexistent/r"],
     ["seat asr: ladder_knob: a fixed seat has no knob to ladder (its memory is its cap)"]),
    (["-e", "seat=alpha", "-e", "ladder_knob=host_pool_mib", "-e", "llmfleet_report_dir=/nonexistent/r"],
     ["seat alpha: ladder_knob: expected max_model_len or max_num_seqs or kv_cache_memory_bytes for a vllm seat, "
      "got 'host_pool_mib'"]),
    (["-e", "seat=alpha", "-e", "ladder_knob=context", "-e", "llmfleet_report_dir=/nonexistent/r"],
     ["ladder_knob: expected one of max_model_len, max_num_seqs, kv_cache_memory_bytes, host_pool_mib, "
      "got 'context'"]),
    (["-e", "seat=alpha", "-e", "ladder_high=1e6", "-e", "ladder_step=4k", "-e", "llmfleet_report_dir=/nonexistent/r"],
     ["2 problem(s) with the ladder",
      "ladder_high: expected a whole number in the knob's unit (0: the arithmetic's upper end), got '1e6'",
      "ladder_step: expected a whole number in the knob's unit (0: the knob's own step), got '4k'"]),
    (["-e", "seat=alpha", "-e", "ladder_high=%d" % 10 ** 15, "-e", "ladder_step=1",
      "-e", "ladder_knob=kv_cache_memory_bytes", "-e", "llmfleet_report_dir=/nonexistent/r"],
     ["ladder_step: expected a step that makes at most 10000 rungs up to ladder_high 1000000000000000, got 1"]),
    # a host pattern or a limit selects the hosts; the seats are theirs, not gpu_hosts'
    (["-e", "seat=alpha", "-e", "target=twin1"],
     ["llmfleet_report_dir: expected a directory on the controller for ladder.json"]),
    (["-e", "seat=alpha", "-e", "target=twin*:&gpu_hosts", "-e", "ladder_high=x", "-e", "llmfleet_report_dir=/r"],
     ["1 problem(s)", "ladder_high: expected a whole number"]),
    (["-e", "seat=alpha", "-l", "twin1", "-e", "ladder_knob=max_num_seqs"],
     ["llmfleet_report_dir: expected a directory on the controller for ladder.json"]),
], ids=["no-report-dir", "fixed-seat", "knob-of-another-engine", "unknown-knob", "not-whole-numbers",
        "too-many-rungs", "target-host", "target-pattern", "limit"])
def test_what_cannot_make_a_ladder_is_refused_by_its_own_name(args, words):
    output = ladder(*args)
    for word in words:
        assert word in output, word + "\n" + output[-3000:]
    assert "not one of" not in output and "expected the name of a seat" not in output


def test_a_limited_run_gets_its_run_id_and_reaches_the_role(tmp_path):
    # -l twin1 skipped the play that made the run's id: the role's variables failed to template
    output = ladder("-e", "seat=alpha", "-l", "twin1", "--check", "-e", "llmfleet_report_dir=%s" % tmp_path)
    assert "host twin1: a ladder is measured by booting and probing each rung, so it has no dry run" in output
