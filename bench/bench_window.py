"""Print how long a window that boots every seat takes beside its floor, and how long an
unchanged window takes, on a three-host fleet twin.

    sudo python bench/bench_window.py [--instance 6] [--boot-seconds 82,35,60,45] [--serial 3]

The twin fleet of the rebalance tests (tests/integration/fleets/twin-pair) plus a third host
like its second is brought up on this machine. Each vLLM seat's stand-in takes its own boot
seconds (cycling through --boot-seconds, as real seats differ; an 8B model's vLLM with CUDA
graphs takes about 80 s). Two figures:

- the first rebalance boots every seat: its wall seconds beside the floor, the busiest GPU's
  boots one after another (from the seats' own boot times in the report), per host and for the
  window (hosts --serial at a time, as llmfleet_serial: the window's floor is the sum over each
  batch of hosts of its busiest host's floor); the target is at most 1.15 x the floor;
- a second rebalance with nothing changed: its wall seconds, the tasks each host changed (on
  the controller: its plan and report files) and whether any seat was restarted (every
  container's start time before and after); the target is at most 20 s with nothing restarted.

The twin goes down however the script ends.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PAIR = REPO / "tests" / "integration" / "fleets" / "twin-pair"
TWIN = REPO / "tests" / "twin" / "twin"
BIN = REPO / ".venv" / "bin"
# (raw: Ansible would template docker's own braces)
STARTED = ("docker ps --quiet | xargs --no-run-if-empty docker inspect "
           "--format {% raw %}'{{.Name}} {{.State.StartedAt}}'{% endraw %}")


def trio(root: Path, boot_seconds: list[float]) -> tuple[Path, Path]:
    """The pair's fleet with a third host like the second (its own GPUs and seat names), each
    vLLM seat booting in its own time."""
    shutil.copytree(PAIR, root, dirs_exist_ok=True)
    text = (PAIR / "host_vars" / "twin2.yml").read_text().replace("GPU-7a1c0002", "GPU-7a1c0003")
    third = yaml.safe_load(text)
    for seat, name in zip(third["llmfleet_seats"], ("zeta", "eta", "theta", "iota")):
        seat["name"], seat["served_model_names"] = name, [name]
    (root / "host_vars" / "twin3.yml").write_text(yaml.safe_dump(third, sort_keys=False))
    count = 0
    for host in ("twin1", "twin2", "twin3"):
        path = root / "host_vars" / ("%s.yml" % host)
        host_vars = yaml.safe_load(path.read_text())
        for seat in host_vars["llmfleet_seats"]:
            if seat["engine"] == "vllm":
                seconds = boot_seconds[count % len(boot_seconds)]
                seat.setdefault("environment", {})["FAKE_VLLM_BOOT_DELAY_S"] = str(seconds)
                count += 1
        path.write_text(yaml.safe_dump(host_vars, sort_keys=False))
    hosts = yaml.safe_load((PAIR / "hosts.yml").read_text())
    hosts["gpu_hosts"]["hosts"]["twin3"] = None
    (root / "hosts.yml").write_text(yaml.safe_dump(hosts))
    spec = json.loads((PAIR / "spec.json").read_text())
    host = json.loads(json.dumps(spec["hosts"][1]).replace("twin2", "twin3").replace("GPU-7a1c0002", "GPU-7a1c0003"))
    spec["hosts"].append(host)
    (root / "spec.json").write_text(json.dumps(spec))
    return root / "hosts.yml", root / "spec.json"


def run(env, *args, check=True):
    proc = subprocess.run([str(a) for a in args], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(str(a) for a in args[:3]), (proc.stdout + proc.stderr)[-4000:]))
    return proc


def started(env, hosts, inventory):
    out = run(env, BIN / "ansible", "gpu_hosts", "-i", hosts, "-i", inventory, "-m", "shell", "-a", STARTED).stdout
    return sorted(line for line in out.splitlines() if line.startswith("/"))


def boot_seconds_list(text: str) -> list[float]:
    """--boot-seconds: finite, non-negative seconds, comma-separated."""
    try:
        values = [float(value) for value in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected seconds separated by commas, got %r" % text) from None
    if not all(math.isfinite(value) and value >= 0 for value in values):
        raise argparse.ArgumentTypeError("expected finite, non-negative seconds, got %r" % text)
    return values


def boots(report_dir: Path) -> dict:
    """Per host, the boots' seconds and their floor, from the window's report."""
    report = json.loads((report_dir / "report.json").read_text())
    return {host: section["boots"] for host, section in sorted(report["hosts"].items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="6", help="the twin instance to use (tests use 1 to 5)")
    parser.add_argument("--boot-seconds", default="82,35,60,45", type=boot_seconds_list,
                        help="the vLLM seats' boot seconds, in turn (default %(default)s)")
    parser.add_argument("--serial", type=int, default=3,
                        help="hosts rebalanced at a time, llmfleet_serial (default %(default)s)")
    args = parser.parse_args()
    boot_seconds = args.boot_seconds
    serial = ["-e", "llmfleet_serial=%d" % args.serial]
    env = dict(os.environ, LLMFLEET_TWIN_INSTANCE=args.instance, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build" / "collections"),
               PATH="%s:%s" % (BIN, os.environ.get("PATH", "")), LLMFLEET_TWIN_OWNER=str(os.getpid()))
    with tempfile.TemporaryDirectory(prefix="llmfleet-bench-window-") as tmp:
        hosts, spec = trio(Path(tmp) / "fleet", boot_seconds)
        inventory = run(env, TWIN, "up", "--spec", spec).stdout.strip().splitlines()[-1]
        try:
            run(env, BIN / "ansible-playbook", "-i", hosts, "-i", inventory, PAIR / "prepare.yml")
            # the venv's python itself, which compiles each module's code as a GPU host does
            rebalance = [BIN / "ansible-playbook", "-i", hosts, "-i", inventory, REPO / "playbooks" / "rebalance.yml",
                         "-e", "ansible_python_interpreter=%s" % (BIN / "python")]
            begun = time.monotonic()
            run(env, *rebalance, *serial, "-e", "llmfleet_report_dir=%s/first" % tmp)
            deploy_seconds = time.monotonic() - begun
            booted = boots(Path(tmp) / "first")
            before = started(env, hosts, inventory)
            begun = time.monotonic()
            again = run(env, *rebalance, *serial, "-e", "llmfleet_report_dir=%s/again" % tmp)
            seconds = time.monotonic() - begun
            after = started(env, hosts, inventory)
        finally:
            run(env, TWIN, "down", check=False)
    floors = [host["floor_s"] for host in booted.values()]  # in the order the play takes them
    floor = sum(max(floors[start:start + args.serial]) for start in range(0, len(floors), args.serial))
    print("window booting every seat, 3 hosts %d at a time: %.1f s, floor %.1f s: %.2f x the floor "
          "(target 1.15)" % (args.serial, deploy_seconds, floor, deploy_seconds / floor))
    for host, record in booted.items():
        print("  %s: boots %.1f s, floor %.1f s (%.2f x); seats %s" % (
            host, record["elapsed_s"], record["floor_s"], record["elapsed_s"] / record["floor_s"],
            ", ".join("%s %.1f s" % (boot["seat"], boot["boot_s"]) for boot in record["seats"])))
    changed = dict(re.findall(r"^(twin\d)\s+: ok=\d+\s+changed=(\d+)", again.stdout, re.M))
    print("unchanged window, 3 hosts %d at a time: %.1f s (target 20 s)" % (args.serial, seconds))
    print("tasks changed per host: %s (the plan and report files on the controller)" % ", ".join(
        "%s %s" % item for item in sorted(changed.items())))
    print("seats restarted: %s" % ("none" if before == after else "YES: %s" % sorted(set(after) - set(before))))


if __name__ == "__main__":
    main()
