"""Compare llmfleet.seats' KV sizing with vLLM 0.33.0's own planning code on generated cases.

    python tests/differential/run_differential.py --cases 600 --report out.json

Reads the planning sources out of the vllm wheel on PyPI once (vllm_sources.py, kept under
.build/cache/vllm-src), runs every case through both and writes a JSON report: the number of
cases compared, the mismatches (field, ours, vLLM's), the inputs our side rejected, the
cases no attention backend takes (an fp8_e5m2 MLA cache: refused on both sides, checked by the
release differential's selection), the families and options covered. Runs in its own process because the harness installs stand-in
``torch`` and ``vllm`` modules.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / ".build" / "collections"))
sys.path.insert(0, str(HERE))

from cases import make_cases  # noqa: E402
from vllm_planning import Harness, SourceUnavailable, run_case, sources  # noqa: E402
from vllm_sources import CACHE, wheel_name  # noqa: E402

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing import kv as _kv_sizing  # noqa: E402

COMPARED = ("block_size", "bytes_per_block", "num_blocks", "kv_cache_tokens",
            "max_concurrency_exact", "max_model_len", "boot_ok", "boot_error", "max_num_seqs",
            "max_num_batched_tokens")


def ours(case):
    options = dict(case["options"])
    return _kv_sizing.evaluate_kv_budget(case["config"], options.pop("max_model_len"),
                                         options.pop("kv_cache_memory_bytes"), **options)


def vllms(harness, case, mine):
    # Which backend vLLM picks is not run here: both sides use ours (the release differential
    # runs each release's own selection for MLA models, 0.18 to 0.33 alike).
    return run_case(harness, case["truth"], dict(case["options"], backend=mine["attention_backend"]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--seed", type=int, default=20261005)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--perturb", choices=COMPARED,
                        help="add 1 to this field of our results (proves the comparison bites)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    report = {"cases": 0, "compared": 0, "mismatches": [], "rejected": [], "no_backend": 0, "families": {},
              "boot_failures": 0, "tensor_parallel": {}, "kv_cache_dtypes": {}, "gpus": {}}
    try:
        root = sources(args.cache)
    except SourceUnavailable as exc:
        report["source_error"] = str(exc)
        args.report.write_text(json.dumps(report, indent=1))
        return 2
    report["wheel"] = wheel_name(root)
    harness = Harness(root)
    for case in make_cases(args.cases, args.seed):
        report["cases"] += 1
        try:
            mine = ours(case)
        except ValueError as exc:
            if "an MLA attention backend of vLLM" in str(exc):  # no backend boots it (not run here)
                report["no_backend"] += 1
            else:
                report["rejected"].append({"id": case["id"], "error": str(exc)})
            continue
        theirs = vllms(harness, case, mine)
        if args.perturb:
            mine[args.perturb] = mine[args.perturb] + 1
        report["compared"] += 1
        options = case["options"]
        for key, value in (("families", case["family"]),
                           ("tensor_parallel", str(options["tensor_parallel_size"])),
                           ("kv_cache_dtypes", options["kv_cache_dtype"]),
                           ("gpus", options["gpu"])):
            report[key][value] = report[key].get(value, 0) + 1
        report["boot_failures"] += not theirs["boot_ok"]
        for field in COMPARED:
            if mine[field] != theirs[field]:
                report["mismatches"].append({"id": case["id"], "field": field,
                                             "ours": mine[field], "vllm": theirs[field],
                                             "options": options})
    report["seconds"] = round(time.monotonic() - started, 1)
    args.report.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
