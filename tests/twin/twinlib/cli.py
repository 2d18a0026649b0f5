"""`tests/twin/twin`: the fleet twin's command line (docs/twin.md)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys

from . import fleet, sysroot
from .procs import TwinError
from .spec import SpecError, parse_spec, spec_from_inventory


def _load_spec(path: str | None) -> object:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as exc:
        raise SpecError("twin spec %s: cannot read it (%s)" % (path, exc.strerror)) from None
    except ValueError as exc:
        raise SpecError("twin spec %s: not valid JSON (%s)" % (path, exc)) from None


def _inventory_spec(path: str) -> dict:
    command = shutil.which("ansible-inventory")
    if command is None:
        raise SpecError("--inventory needs ansible-inventory on PATH (. scripts/env.sh)")
    proc = subprocess.run([command, "-i", path, "--list"], capture_output=True, text=True,
                          check=False, timeout=120)
    if proc.returncode != 0:
        raise SpecError("ansible-inventory -i %s failed: %s" % (path, proc.stderr.strip()))
    return spec_from_inventory(json.loads(proc.stdout))


def _gpu_of(host: fleet.Host, token: str) -> str:
    gpus = (host.gpu_state() or {}).get("gpus", [])
    for gpu in gpus:
        if token in (gpu["uuid"], str(gpu["index"])):
            return gpu["uuid"]
    raise TwinError("twin host %s has no GPU %r (indices 0-%d or UUIDs)"
                    % (host.name, token, len(gpus) - 1))


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="twin", description="The fleet twin: hosts reached "
                                     "over SSH, with dockerd and simulated GPUs (docs/twin.md). "
                                     "LLMFLEET_TWIN_INSTANCE=N (0-9, now %d) picks which of this "
                                     "machine's twins a command acts on." % fleet.hostlib.INSTANCE)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="bring the twin up; prints the inventory path last")
    up.add_argument("--hosts", type=int, metavar="N", help="number of hosts")
    shape = up.add_mutually_exclusive_group()
    shape.add_argument("--spec", metavar="FILE", help="JSON spec of hosts and GPUs")
    shape.add_argument("--inventory", metavar="PATH",
                       help="an Ansible inventory: a twin of its hosts with llmfleet_gpus")
    owner = os.environ.get("LLMFLEET_TWIN_OWNER", "")
    up.add_argument("--owner", type=int, metavar="PID", default=int(owner) if owner.isdigit() else None,
                    help="the process whose twin this is (default: $LLMFLEET_TWIN_OWNER): once it "
                         "is gone, the next `up` removes the twin as leftovers")
    commands.add_parser("down", help="remove everything the twin made")
    commands.add_parser("build-root", help="build the root of the systemd host kind from Debian's "
                        "packages (once per recipe); prints its path")
    watch = commands.add_parser("watch", help="print each container's state as it changes, until stopped")
    watch.add_argument("--interval", type=float, default=2.0, metavar="S", help="seconds between looks")
    status = commands.add_parser("status", help="hosts, daemons, GPUs and containers")
    status.add_argument("--json", action="store_true", help="machine-readable")
    execute = commands.add_parser("exec", help="run a command on a host (its network and files)")
    execute.add_argument("host")
    execute.add_argument("cmd", nargs=argparse.REMAINDER, help="the command (after --)")
    gpu = commands.add_parser("gpu", help="change a host's simulated GPUs")
    gpu.add_argument("host")
    gpu.add_argument("--background", action="append", default=[], metavar="GPU=MIB",
                     help="memory held by no process on GPU (index or UUID); repeatable")
    gpu.add_argument("--faults", metavar="JSON", help='state.json faults, e.g. \'{"gpu_lost": [1]}\'')
    args = parser.parse_args(argv)

    try:
        if args.command == "up":
            # stopped half way, `up` removes what it made (fleet.up catches the exit)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
            raw = _inventory_spec(args.inventory) if args.inventory else _load_spec(args.spec)
            fleet_spec = parse_spec(raw, args.hosts)
            print(fleet.up(fleet_spec, args.owner))
        elif args.command == "down":
            fleet.down()
        elif args.command == "build-root":
            print(sysroot.build_root())
        elif args.command == "watch":
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            try:
                fleet.watch(args.interval)
            except KeyboardInterrupt:
                pass
        elif args.command == "status":
            report = fleet.status()
            print(json.dumps(report, indent=1) if args.json else fleet.format_status(report))
        elif args.command == "exec":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            if not cmd:
                parser.error("exec needs a command: twin exec HOST -- CMD [ARGS]")
            host = fleet.find_host(args.host)
            os.execvpe(host.enter()[0], host.enter() + cmd,
                       dict(fleet.HOST_ENV, TERM=os.environ.get("TERM", "dumb")))
        elif args.command == "gpu":
            host = fleet.find_host(args.host)
            for item in args.background:
                token, mib = item.partition("=")[::2]
                if not mib.isdigit():
                    parser.error("--background wants GPU=MIB, got %r" % item)
                fleet.gpu_request(host, {"op": "set_background", "uuid": _gpu_of(host, token),
                                         "mib": int(mib)})
            if args.faults is not None:
                try:
                    faults = json.loads(args.faults)
                except ValueError as exc:
                    parser.error("--faults is not valid JSON: %s" % exc)
                fleet.gpu_request(host, {"op": "set_faults", "faults": faults})
    except (TwinError, SpecError) as exc:
        print("twin: error: %s" % exc, file=sys.stderr)
        return 1
    return 0
