"""Print what the twin pair costs the machine while nothing runs on it, by its seats' healthcheck
interval.

    sudo python bench/bench_twin_idle.py [--instance 8] [--intervals 5s,30s] [--seconds 60]

The twin-pair fleet (tests/integration/fleets/twin-pair) is brought up and deployed with each
interval in turn as its seats' health_interval (the fleet keeps the collection's 15s). Once its
seats have settled, the machine's busy CPU-seconds over --seconds are printed, a minute's worth,
with the healthchecks docker runs in a minute: each a python3 started in its container through
dockerd, containerd and runc. With two intervals or more, the CPU of one healthcheck is the
difference between two lines over the difference of their checks. Run it on a quiet machine:
everything that runs meanwhile counts.

Docker's healthcheck runs its first probe one interval after the container starts (the
machines here have Docker 20.10, before the start interval of 25.0), and the window's rollback
and the twin tests wait on its verdict: a longer interval makes each of those waits longer. The
twin goes down however the script ends.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench_suite_cpu import busy_idle  # bench/ is this script's own folder, first on sys.path

REPO = Path(__file__).resolve().parents[1]
PAIR = REPO / "tests" / "integration" / "fleets" / "twin-pair"
TWIN = REPO / "tests" / "twin" / "twin"
BIN = REPO / ".venv" / "bin"
SETTLE_S = 20
WITH_HEALTHCHECK = "docker ps --quiet --filter health=healthy --filter health=starting | wc -l"


def run(env, *args, check=True):
    proc = subprocess.run([str(a) for a in args], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(str(a) for a in args[:3]), (proc.stdout + proc.stderr)[-4000:]))
    return proc


def seconds_of(interval: str) -> int:
    return int(interval[:-1]) * (60 if interval.endswith("m") else 1)


def intervals_list(text: str) -> list[str]:
    """--intervals: docker durations in whole seconds or minutes, comma-separated."""
    values = text.split(",")
    if not all(re.fullmatch(r"[1-9][0-9]*[sm]", value) for value in values):
        raise argparse.ArgumentTypeError("expected durations such as 5s,30s,2m, got %r" % text)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="8", help="the twin instance to use (the suite uses 1 to 7)")
    parser.add_argument("--intervals", default="5s,30s", type=intervals_list,
                        help="the seats' health_interval, in turn (default %(default)s)")
    parser.add_argument("--seconds", type=int, default=60, help="seconds measured at each interval")
    args = parser.parse_args()
    env = dict(os.environ, LLMFLEET_TWIN_INSTANCE=args.instance, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build" / "collections"),
               PATH="%s:%s" % (BIN, os.environ.get("PATH", "")), LLMFLEET_TWIN_OWNER=str(os.getpid()))
    measured = []
    with tempfile.TemporaryDirectory(prefix="llmfleet-bench-idle-") as tmp:
        fleet = Path(tmp) / "fleet"
        shutil.copytree(PAIR, fleet)
        seat_defaults = yaml.safe_load((fleet / "group_vars" / "gpu_hosts.yml").read_text())["llmfleet_seat_defaults"]
        inventory = run(env, TWIN, "up", "--spec", fleet / "spec.json").stdout.strip().splitlines()[-1]
        try:
            hosts = ["-i", fleet / "hosts.yml", "-i", inventory]
            run(env, BIN / "ansible-playbook", *hosts, PAIR / "prepare.yml")
            for interval in args.intervals:
                defaults = {kind: dict(fields, health_interval=interval) for kind, fields in seat_defaults.items()}
                run(env, BIN / "ansible-playbook", *hosts, REPO / "playbooks" / "rebalance.yml",
                    "-e", "llmfleet_report_dir=%s/%s" % (tmp, interval),
                    "-e", json.dumps({"llmfleet_seat_defaults": defaults}))
                time.sleep(SETTLE_S)
                before, begun = busy_idle()[0], time.monotonic()
                time.sleep(args.seconds)
                per_minute = (busy_idle()[0] - before) * 60 / (time.monotonic() - begun)
                out = run(env, BIN / "ansible", "gpu_hosts", *hosts, "-m", "shell", "-a", WITH_HEALTHCHECK).stdout
                containers = sum(int(line) for line in out.splitlines() if line.strip().isdigit())
                checks = containers * 60 / seconds_of(interval)
                measured.append((checks, per_minute))
                print("health_interval %s: %.1f CPU-s a minute, %d containers with a healthcheck: %.0f "
                      "healthchecks a minute" % (interval, per_minute, containers, checks), flush=True)
        finally:
            run(env, TWIN, "down", check=False)
    (most, most_cpu), (least, least_cpu) = max(measured), min(measured)
    if most > least:
        print("one healthcheck: %.3f CPU-s; the twin pair without them: %.1f CPU-s a minute"
              % ((most_cpu - least_cpu) / (most - least), least_cpu - least * (most_cpu - least_cpu) / (most - least)))


if __name__ == "__main__":
    main()
