"""Print the collection's gate overhead on a real engine's boot.

    sudo python bench/bench_real_engine_gates.py [--instance 7]

A twin host whose seat runs the real vLLM 0.32 (its CPU build; tests/realengine/README.md) gets one
window that boots the seat. Two times, from the same start:

- the engine's own: when its /health first answered 200, polled every 0.1 s inside the container
  (tests/twin/seat/real-vllm notes it in the container's log);
- the window's: from the start of the seat's boot to the end of its gates (the boot phase of the
  report: health, served models, the boot log's KV line, the card gates).

Their difference is what the collection adds to a real boot: the target is at most 2 s per seat.
The twin goes down however the script ends.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
FIRST_200 = re.compile(r"real-vllm: /health first answered 200 (?P<seconds>[0-9.]+) s after the engine started")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="7", help="the twin instance to use (LLMFLEET_TWIN_INSTANCE)")
    args = parser.parse_args(argv)
    os.environ["LLMFLEET_TWIN_INSTANCE"] = args.instance  # read when the twin's library is imported
    sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "twin")]
    from support.real_vllm import REAL_ENGINE_FLEET, real_engine_fleet  # noqa: E402  (the tests' own)
    from support.rollout import rebalance, report_of, twin_pair  # noqa: E402
    from twinlib import fleet  # noqa: E402

    with tempfile.TemporaryDirectory(prefix="bench-real-engine-") as work:
        hosts = real_engine_fleet(Path(work) / "fleet")
        with twin_pair(REAL_ENGINE_FLEET / "spec.json", fleet_dir=hosts.parent) as twin_inventory:
            # the venv's python itself, which compiles each module's code as a GPU host does
            rebalance(hosts, twin_inventory, Path(work) / "report",
                      "-e", "ansible_python_interpreter=%s" % fleet.VENV_PYTHON)
            section = report_of(Path(work) / "report")["hosts"]["twin1"]
            logs = fleet.find_host("twin1").docker(["logs", "vllm-tiny"])
    log = logs.stdout + logs.stderr
    found = FIRST_200.search(log)
    if section["status"] != "applied" or not found:
        raise SystemExit("the window did not boot the seat (%s), or its log has no first 200" % section["status"])
    engine_s, gated_s = float(found.group("seconds")), section["boots"]["elapsed_s"]
    print("real engine (vLLM 0.32 CPU build), one seat on one card")
    print("  engine: first 200 on /health  %6.2f s" % engine_s)
    print("  window: boot started to gated %6.2f s" % gated_s)
    print("  gate overhead                 %6.2f s  (target <= %.1f s: %s)"
          % (gated_s - engine_s, TARGET_S, "met" if gated_s - engine_s <= TARGET_S else "MISSED"))


if __name__ == "__main__":
    main()
