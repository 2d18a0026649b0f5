"""Print seat_placement's solve times and worst spare beside a first-fit-decreasing baseline.

    python bench/bench_placement.py [--instances 8] [--seed 1] [--suites 9x4,32x8,...] [-v]

Each suite draws random hosts (seat needs uniform in MiB, GPU sizes of an RTX PRO 6000 or an
H200) and solves each one with the exact search (llmfleet.seats.seat_placement's
module_utils) on one core. Beside it, in the same run, two greedy placements and their worst
spare ("-" when they cannot place every seat): first-fit-decreasing (largest seat first onto
the first GPU it fits) and spread (largest first onto the roomiest GPU). Targets: 9 seats x 4
GPUs well under 0.1 s; 24-32 seats x 8 GPUs proven optimal in under 5 s.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".build" / "collections"))

from ansible_collections.llmfleet.seats.plugins.module_utils._placement import (  # noqa: E402
    DEFAULT_NODE_LIMIT,
    place,
)

H200, RTX = 143771, 97887


def host(rng, suite):
    """One random host for a suite: (gpus, seats)."""
    if suite == "9x4":  # fv-ml1's shape: three cards in use, one kept clear, a pinned tenant
        gpus = [{"id": "GPU-%d" % i, "capacity_mib": RTX, "keep_clear": i == 3} for i in range(4)]
        seats = [{"name": "asr", "need_mib": 3840, "gpu": "GPU-0"}] + [
            {"name": "seat-%d" % i, "need_mib": rng.randint(3000, 45000),
             "current_gpu": "GPU-%d" % rng.randrange(3)} for i in range(8)]
    elif suite in ("48x8", "64x16"):
        return rack(rng, *(int(part) for part in suite.split("x")))
    else:
        sizes = [RTX] * 4 + [H200] * 4 if suite == "mixed" else [H200] * 8
        gpus = [{"id": "GPU-%d" % i, "capacity_mib": size} for i, size in enumerate(sizes)]
        seats = [{"name": "seat-%02d" % i, "need_mib": rng.randint(2000, 40000)}
                 for i in range(rng.randint(24, 32))]
        if suite in ("moves", "mixed", "constrained"):
            for seat in seats:
                seat["current_gpu"] = "GPU-%d" % rng.randrange(8)
        if suite == "tp":
            for seat in rng.sample(seats, 3):
                seat["gpu_count"] = rng.choice([2, 4])
                seat["need_mib"] = rng.randint(20000, 60000)
        if suite == "constrained":
            gpus[7]["keep_clear"] = True
            for seat in rng.sample(seats, 6):
                seat["avoid_gpus"] = ["GPU-%d" % rng.randrange(7)]
            rng.choice(seats)["gpu"] = "GPU-0"
    room = sum(g["capacity_mib"] for g in gpus if not g.get("keep_clear"))
    while sum(s["need_mib"] * s.get("gpu_count", 1) for s in seats) > 0.97 * room:
        seats.pop()
    return gpus, seats


def rack(rng, count, cards):
    """A rack-sized host: ``count`` seats on ``cards`` H200s, the last kept clear, needs uniform
    over a range and scaled to ask 85 % of the cards' memory; every seat runs somewhere now,
    four are tensor-parallel (2 or 4 GPUs), two pinned, six avoid a GPU."""
    gpus = [{"id": "GPU-%d" % i, "capacity_mib": H200, "keep_clear": i == cards - 1}
            for i in range(cards)]
    usable = [gpu["id"] for gpu in gpus if not gpu["keep_clear"]]
    mean = 0.85 * H200 * len(usable) / count
    seats = [{"name": "seat-%02d" % i, "need_mib": rng.randint(int(0.3 * mean), int(1.7 * mean)),
              "current_gpu": rng.choice(usable)} for i in range(count)]
    for seat in rng.sample(seats, 4):
        seat["gpu_count"] = rng.choice([2, 4])
        seat["current_gpu"] = rng.sample(usable, seat["gpu_count"])
    singles = [seat for seat in seats if "gpu_count" not in seat]
    for seat in rng.sample(singles, 8)[:2]:
        seat["gpu"] = seat["current_gpu"]
    for seat in rng.sample([seat for seat in singles if "gpu" not in seat], 6):
        seat["avoid_gpus"] = [rng.choice([gpu for gpu in usable if gpu != seat["current_gpu"]])]
    scale = 0.85 * H200 * len(usable) / sum(s["need_mib"] * s.get("gpu_count", 1) for s in seats)
    for seat in seats:
        seat["need_mib"] = int(seat["need_mib"] * scale)
    return gpus, seats


def greedy(gpus, seats, roomiest):
    """Pinned seats first, then the largest seat first onto the first GPU(s) in order where it
    fits (first-fit-decreasing) or, with ``roomiest``, onto the GPU(s) with the most room
    (spread). Its worst spare, or None when some seat fits nowhere."""
    spare = {g["id"]: g["capacity_mib"] for g in gpus}
    usable = [g["id"] for g in gpus if not g.get("keep_clear")]
    order = sorted(seats, key=lambda s: (not s.get("gpu"), -s["need_mib"]))
    for seat in order:
        count = seat.get("gpu_count", 1)
        if seat.get("gpu"):
            chosen = seat["gpu"] if isinstance(seat["gpu"], list) else [seat["gpu"]]
        else:
            fits = [g for g in usable if g not in seat.get("avoid_gpus", [])
                    and spare[g] >= seat["need_mib"]]
            if roomiest:
                fits.sort(key=lambda g: -spare[g])
            if len(fits) < count:
                return None
            chosen = fits[:count]
        for gpu in chosen:
            spare[gpu] -= seat["need_mib"]
    if any(spare[g] < 0 for g in usable):
        return None
    return min(spare[g] for g in usable)


def run_suite(suite, instances, seed, node_limit, verbose):
    rng = random.Random("%s-%d" % (suite, seed))
    times, proven, moves, gaps = [], 0, [], []
    gains = {"first-fit-decreasing": [], "spread": []}
    failed = dict.fromkeys(gains, 0)
    for number in range(instances):
        gpus, seats = host(rng, suite)
        started = time.perf_counter()
        result = place(gpus, seats, node_limit=node_limit)
        elapsed = time.perf_counter() - started
        baselines = {"first-fit-decreasing": greedy(gpus, seats, roomiest=False),
                     "spread": greedy(gpus, seats, roomiest=True)}
        times.append(elapsed)
        proven += result["optimal"]
        gaps.append(result["bound_mib"] - result["worst_spare_mib"])
        moves.append(len(result["moves"]))
        for name, worst in baselines.items():
            if worst is None:
                failed[name] += 1
            else:
                gains[name].append(result["worst_spare_mib"] - worst)
        if verbose:
            print("  %-11s #%d %2d seats: %7.3f s %-8s worst spare %6d MiB (bound %6d); "
                  "first-fit-decreasing %6s, spread %6s; %2d moves, %d steps"
                  % (suite, number, len(seats), elapsed,
                     "proven" if result["optimal"] else "UNPROVEN", result["worst_spare_mib"],
                     result["bound_mib"], *("-" if w is None else w for w in baselines.values()),
                     len(result["moves"]), result["search_nodes"]))
    times.sort()
    versus = []
    for name, values in gains.items():
        text = "%s +%s MiB" % (name, "%.0f" % statistics.fmean(values) if values else "-")
        if failed[name]:
            text += " (fails %d)" % failed[name]
        versus.append(text)
    print("%-11s %2d hosts: solve median %6.3f s, p90 %6.3f s, max %6.3f s; proven %d/%d "
          "(largest certified gap %d MiB); worst spare gained over %s; moves mean %.1f"
          % (suite, instances, statistics.median(times), times[math.ceil(0.9 * len(times)) - 1],
             times[-1], proven, instances, max(gaps), ", ".join(versus), statistics.fmean(moves)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=8, help="hosts per suite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--suites", default="9x4,32x8,moves,tp,constrained,mixed,48x8,64x16",
                        help="9x4 (fv-ml1 shape), 32x8 (8 H200s), moves (32x8 with every "
                             "seat's current GPU), tp (three multi-GPU seats), constrained "
                             "(avoid lists, a kept-clear GPU, a pin), mixed (4 RTX PRO 6000 + "
                             "4 H200, current GPUs), 48x8 and 64x16 (rack-sized: TP seats, "
                             "pins, avoid lists, a kept-clear GPU, every seat running, 85 %% of "
                             "the memory asked)")
    parser.add_argument("--node-limit", type=int, default=DEFAULT_NODE_LIMIT,
                        help="seat_placement's search_node_limit (default %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per host")
    args = parser.parse_args()
    for suite in args.suites.split(","):
        run_suite(suite, args.instances, args.seed, args.node_limit, args.verbose)


if __name__ == "__main__":
    main()
