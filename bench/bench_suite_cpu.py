"""Print where a command's CPU goes, by program: the unit tests' by default, the whole suite's
with `-- scripts/test` (half an hour).

    sudo python bench/bench_suite_cpu.py [--top 25] [-- command ...]

On two cores the suite is CPU-bound, so its wall time is its CPU time over two: what shortens
it is less work. The kernel's process accounting (acct(2)) records every process that ends
while the command runs, with the CPU it used, including the ones no parent waits for (the twin
hosts' sshd children, the containers' processes); /proc/stat gives the machine's busy and idle
time over the same span. Printed: the command's wall seconds and exit status, the machine's
busy and idle CPU-seconds, then per program name (as the kernel keeps it, 15 characters) its
processes, CPU-seconds, share and median per process. Processes that outlive the command (a
dockerd left running) are not counted; everything on the machine meanwhile is. Accounting is
the machine's: this turns it off when the command ends.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
# etime, then utime, stime and six more comp_t counters, and the command's name
ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")
ACCT_HZ = 100  # comp_t times are in AHZ ticks


def comp_t(value: int) -> int:
    """A comp_t: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 0x7))


def records(path: Path):
    """(command, CPU-seconds) of each process the file records."""
    data = path.read_bytes()
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        fields = ACCT_V3.unpack_from(data, offset)
        if fields[1] != 3:
            raise SystemExit("bench_suite_cpu: %s is not in the v3 accounting format" % path)
        yield fields[-1].split(b"\0")[0].decode(errors="replace"), (comp_t(fields[10]) + comp_t(fields[11])) / ACCT_HZ


def busy_idle() -> tuple:
    """The machine's busy and idle CPU-seconds since boot (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / hz, idle / hz


def accounting(path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(None if path is None else str(path).encode()) != 0:
        raise SystemExit("bench_suite_cpu: acct(2): %s (root, and a kernel with process accounting)"
                         % os.strerror(ctypes.get_errno()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="programs to print (default %(default)s)")
    parser.add_argument("command", nargs="*", default=[str(REPO / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                                       str(REPO / "tests" / "unit")],
                        help="the command to measure (after --; default: the unit tests)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmfleet-bench-cpu-") as work:
        log = Path(work) / "pacct"
        log.touch(mode=0o600)
        busy0, idle0 = busy_idle()
        begun = time.monotonic()
        accounting(log)
        try:
            status = subprocess.run(args.command, cwd=REPO, check=False).returncode
        finally:
            accounting(None)
        wall = time.monotonic() - begun
        busy1, idle1 = busy_idle()
        per_program = collections.defaultdict(list)
        for command, seconds in records(log):
            per_program[command].append(seconds)
    total = sum(sum(values) for values in per_program.values())
    print("%s: exit %d after %.0f s of wall time" % (" ".join(args.command), status, wall))
    print("machine: %.0f CPU-s busy, %.0f idle (%.0f%% idle); the processes that ended: %.0f CPU-s"
          % (busy1 - busy0, idle1 - idle0, 100 * (idle1 - idle0) / max(busy1 - busy0 + idle1 - idle0, 1), total))
    print("%-16s %9s %9s %6s %10s" % ("program", "processes", "CPU-s", "share", "median s"))
    for command, values in sorted(per_program.items(), key=lambda item: -sum(item[1]))[:args.top]:
        share = 100 * sum(values) / max(total, 1e-9)
        print("%-16s %9d %9.1f %5.1f%% %10.2f" % (command, len(values), sum(values), share, statistics.median(values)))
    sys.exit(status)


if __name__ == "__main__":
    main()
