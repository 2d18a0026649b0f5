"""`playbooks/ladder.yml` refuses, in one line and before any host is touched, a seat no host
lists and a dry run (a ladder is measured by booting each rung)."""

from __future__ import annotations

from conftest import REPO_ROOT, run_ansible

FLEET = REPO_ROOT / "tests" / "integration" / "fleets" / "twin-pair" / "hosts.yml"
LADDER = REPO_ROOT / "playbooks" / "ladder.yml"


def test_a_seat_no_host_lists_is_refused_naming_the_seats_there_are():
    proc = run_ansible(["ansible-playbook", "-i", str(FLEET), str(LADDER), "-e", "seat=nope"])
    assert proc.returncode != 0
    assert "seat: expected the name of a seat of gpu_hosts (alpha, beta, gamma, asr, delta, epsilon), " \
           "got 'nope'" in proc.stdout + proc.stderr


def test_a_dry_run_is_refused(tmp_path):
    proc = run_ansible(["ansible-playbook", "-i", str(FLEET), str(LADDER), "-e", "seat=alpha", "--check",
                        "-e", "llmfleet_report_dir=%s" % tmp_path])
    assert proc.returncode != 0
    assert "host twin1: a ladder is measured by booting and probing each rung, so it has no dry run" \
        in proc.stdout + proc.stderr
    assert "UNREACHABLE" not in proc.stdout and not list(tmp_path.iterdir()), "nothing was contacted or written"
