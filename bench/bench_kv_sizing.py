"""Print KV sizing throughput (seats/s) and per-seat latency.

    python bench/bench_kv_sizing.py [--seconds 3]

A "seat" is one size_kv_budget call from a raw config.json dict (describe the model, group its
layers, apply the rule), cycling through the test fixtures' models at their published windows;
evaluate_kv_budget on a fixed 8 GiB budget is timed the same way. The target is well under
10 ms per seat.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".build" / "collections"))

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import (  # noqa: E402
    evaluate_kv_budget,
    size_kv_budget,
)

FIXTURES = REPO / "tests" / "unit" / "fixtures" / "model_configs"


def seats():
    configs = [json.loads(path.read_text()) for path in sorted(FIXTURES.glob("*.json"))]
    # Hybrid Mamba models boot only with max_num_seqs under their block count.
    return [(config, {"max_num_seqs": 64, "allow_long_max_model_len": True})
            for config in configs]


def measure(label, call, seconds):
    work = seats()
    latencies = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for config, options in work:
            started = time.perf_counter()
            call(config, options)
            latencies.append(time.perf_counter() - started)
    total = sum(latencies)
    latencies.sort()
    print("%-9s %7d seats in %.2f s: %8.0f seats/s; per seat mean %.3f ms, p50 %.3f ms, "
          "p99 %.3f ms, max %.3f ms"
          % (label, len(latencies), total, len(latencies) / total,
             1000 * statistics.fmean(latencies), 1000 * latencies[len(latencies) // 2],
             1000 * latencies[int(len(latencies) * 0.99)], 1000 * latencies[-1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    args = parser.parse_args()
    print("%d model configs from %s" % (len(seats()), FIXTURES.relative_to(REPO)))
    measure("size", lambda config, options: size_kv_budget(config, "published", **options),
            args.seconds)
    measure("evaluate",
            lambda config, options: evaluate_kv_budget(config, 131072, "8G", **options),
            args.seconds)


if __name__ == "__main__":
    main()
