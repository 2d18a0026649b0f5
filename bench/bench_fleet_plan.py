"""Print how long `playbooks/plan.yml` takes per host at fleet sizes.

    python bench/bench_fleet_plan.py [--hosts 10,50,200] [--forks 8]

Each size is the fv-ml1 inventory copied N times (cards from the inventory, the plateau
snapshot read on the controller, no SSH: every host's address is a closed local port), planned
in one run with the plan files written. Printed per size: wall seconds, seconds per host, and
whether every host's plan is byte for byte the plan of the first one (they must be: the hosts
are identical but for their names). The target is 200 hosts in at most 60 s on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
FV_ML1 = REPO / "inventories" / "fv-ml1"
BIN = REPO / ".venv" / "bin"


def fleet(root: Path, count: int) -> Path:
    """An inventory of ``count`` copies of fv-ml1; returns its hosts.yml."""
    shutil.copytree(FV_ML1 / "models", root / "models")
    shutil.copytree(FV_ML1 / "snapshots", root / "snapshots")
    host_vars = yaml.safe_load((FV_ML1 / "host_vars" / "fv-ml1.yml").read_text())
    host_vars.update({"seat_plan_cards_source": "inventory", "ansible_host": "127.0.0.1",
                      "ansible_port": 9, "llmfleet_plan_accept": {"snapshot_host": "fv-ml1"}})
    (root / "host_vars").mkdir()
    names = ["fv-ml1-%03d" % number for number in range(count)]
    for name in names:
        (root / "host_vars" / ("%s.yml" % name)).write_text(yaml.safe_dump(host_vars, sort_keys=False))
    hosts = root / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {name: None for name in names}}}))
    return hosts


def plan(hosts: Path, output: Path, forks: int) -> float:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build" / "collections"),
               PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
    started = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(hosts), "playbooks/plan.yml",
                           "-f", str(forks), "-e", "llmfleet_report_dir=%s" % output],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit("plan.yml failed:\n%s" % (proc.stdout[-3000:] + proc.stderr[-2000:]))
    return seconds


def identical(output: Path, count: int) -> bool:
    """Every host's plan is the first host's, its name aside."""
    def text(number):
        name = "fv-ml1-%03d" % number
        return (output / ("%s-plan.json" % name)).read_text().replace(name, "HOST")
    first = text(0)
    return all(text(number) == first for number in range(1, count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="10,50,200", help="comma-separated fleet sizes")
    parser.add_argument("--forks", type=int, default=8)
    args = parser.parse_args()
    print("%6s %9s %12s %s" % ("hosts", "seconds", "s per host", "plans identical"))
    for count in [int(size) for size in args.hosts.split(",")]:
        with tempfile.TemporaryDirectory(prefix="llmfleet-bench-fleet-") as tmp:
            root = Path(tmp)
            hosts = fleet(root / "inventory", count)
            seconds = plan(hosts, root / "out", args.forks)
            same = identical(root / "out", count)
            json.loads((root / "out" / "fv-ml1-000-plan.json").read_text())
            print("%6d %9.1f %12.2f %s" % (count, seconds, seconds / count, "yes" if same else "NO"))


if __name__ == "__main__":
    main()
