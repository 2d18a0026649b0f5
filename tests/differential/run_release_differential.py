"""Compare llmfleet.seats' KV sizing for one vLLM release with that release's own planning code.

    python tests/differential/run_release_differential.py --release 0.26.0 --cases 200 --report out.json
    python tests/differential/run_release_differential.py --release all --cases 600 --report out.json
    python tests/differential/run_release_differential.py --release 0.26.0 --backend-grid --report out.json

Reads the release's sources out of its wheel on PyPI once (vllm_sources.py, kept under
.build/cache/vllm-src), imports its
``kv_cache_interface.py`` and ``kv_cache_utils.py`` and runs its max-length check with the RoPE
patching before it (vllm_release_planning.py), and runs the generated cases through both sides,
with the release named to ours (``vllm_version``). Writes a JSON report per release: cases
compared, mismatches (field, ours, the release's), the families covered, the boots refused at
the max length, the auto-fit lengths compared, the cases both sides refuse (a config the
release cannot load, a cache dtype it does not offer or no attention backend of it takes,
auto-fit before 0.14, a GDN model it does not register). ``all``
runs every modelled release before 0.33, one process each (a harness owns ``vllm`` in
sys.modules); 0.33 itself is run_differential.py's. ``--backend-grid`` compares instead the
attention backend ours and the release's own selection pick (0.10.2 to 0.33) over a
grid of cards, head sizes, cache dtypes, sinks and block sizes, and exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / ".build" / "collections"))
sys.path.insert(0, str(HERE))

from cases import make_cases  # noqa: E402
from vllm_planning import GPUS as VLLM_GPUS  # noqa: E402
from vllm_release_planning import SourceUnavailable, load, run_case  # noqa: E402
from vllm_sources import CACHE  # noqa: E402

from ansible_collections.llmfleet.seats.plugins.module_utils._sizing import attention as _attention  # noqa: E402
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing import kv as _kv_sizing  # noqa: E402
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import (  # noqa: E402
    LATEST,
    MODELLED,
    parse_version,
)

COMPARED = ("bytes_per_block", "num_blocks", "kv_cache_tokens", "max_concurrency_exact", "boot_ok", "boot_error",
            "max_num_batched_tokens", "max_num_seqs", "max_model_len", "attention_backend")
# What the release's platform says of each card (as the 0.33 harness's).
GPUS = {name: (int(profile["memory_gib"] * (1 << 30)), profile["name"])
        for name, profile in _kv_sizing.GPU_PROFILES.items()}
CAPABILITIES = {name: gpu[0] for name, gpu in VLLM_GPUS.items()}


def ours(case, release):
    options = dict(case["options"], vllm_version=release)
    return _kv_sizing.evaluate_kv_budget(case["config"], options.pop("max_model_len"),
                                         options.pop("kv_cache_memory_bytes"), **options)


def release_inputs(case, mine, release):
    """What the release's planning takes from the rest of its boot, as ours resolved it: the
    attention backend, the block size, the KV dtype, the batch limits, the max length."""
    model = _kv_sizing.describe_model(case["config"])
    options = dict(case["options"], vllm_version=release)
    length = mine["max_model_len"]
    opts = _kv_sizing._Options(model, length, None, **{k: v for k, v in options.items()
                                                       if k not in ("max_model_len", "kv_cache_memory_bytes")})
    return case["truth"], {
        "backend": mine["attention_backend"], "tensor_parallel_size": opts.tp,
        "kv_dtype": opts.kv_cache_dtype if opts.kv_cache_dtype != "auto" else case["truth"]["dtype"],
        "max_model_len": length, "block_size": mine["block_size"],
        "enable_prefix_caching": opts.prefix_caching, "kv_cache_memory_bytes": case["options"]["kv_cache_memory_bytes"],
        "max_num_batched_tokens": opts.max_num_batched_tokens, "max_num_seqs": opts.max_num_seqs,
        # every release turns the hybrid manager off for chunked local attention (Llama 4), whose
        # layers are then full attention; `vllm serve` schedules asynchronously (two batches in
        # flight) in the releases that count them
        "disable_hybrid_kv_cache_manager": opts.disable_hma or bool(case["truth"].get("chunked_local")),
        "async_scheduling": True,
        # a GDN hybrid's config checks start from what the operator set
        "architecture": (case["config"].get("architectures") or [None])[0], "capability": CAPABILITIES[case["options"]["gpu"]],
        "user_block_size": case["options"]["block_size"], "num_speculative_tokens": opts.num_spec,
        "mamba_cache_dtype": case["options"]["mamba_cache_dtype"],
        "mamba_ssm_cache_dtype": case["options"]["mamba_ssm_cache_dtype"],
        "enforce_eager": case["options"]["enforce_eager"], "gpu": case["options"]["gpu"],
        "kv_dtype_setting": opts.kv_cache_dtype}


def their_backends(harness, case, options):
    """The backend the release picks for each attention layer, as ``({layer name:
    backend name}, None)`` in layer order, or ``(None, its error)`` where none takes a layer."""
    picked, by_geometry = {}, {}
    for index, layer in enumerate(case["truth"]["layers"]):
        if layer["kind"] == "linear" or layer.get("shared"):
            continue
        geometry = (layer["kind"], layer["head_size"], bool(layer.get("window")))
        if geometry not in by_geometry:
            by_geometry[geometry] = harness.attention_backend(case["truth"], options, options["capability"], layer)
        if by_geometry[geometry].startswith("ValueError"):
            return None, by_geometry[geometry]
        picked["model.layers.%d" % index] = by_geometry[geometry]
    return picked, None


def their_max_len(harness, case, length):
    """``(max_model_len, None)`` as the release's max-length check resolves ``length``, or
    ``(None, its ValueError text)``, or ``(None, the name of what else it raises)`` for a config
    it cannot boot."""
    try:
        return harness.max_len(case["config"], case["truth"], length, case["options"]["allow_long_max_model_len"]), None
    except ValueError as exc:
        return None, str(exc)
    except (KeyError, TypeError) as exc:
        return None, type(exc).__name__


def their_backends_as_set(harness, case):
    """their_backends for the case's own cache dtype and block size, the rest of its inputs
    resolved by ours at the latest release (which plans what an older one refuses)."""
    plain = dict(case, options=dict(case["options"], kv_cache_dtype="auto", block_size=None))
    options = release_inputs(case, ours(plain, LATEST), LATEST)[1]
    return their_backends(harness, case, dict(options, kv_dtype_setting=case["options"]["kv_cache_dtype"],
                                              user_block_size=case["options"]["block_size"]))


def refused_alike(harness, case, release, error):
    """Whether the release, too, fails the boot of a case ours refused: a config it cannot
    load, a cache dtype its CLI does not offer, a model no attention backend of it takes (or, in
    0.10, whose backend's kernels refuse the cache dtype or block size),
    auto-fit before the release that brought it, a GDN model it does not register or a Mamba
    cache mode its config checks refuse."""
    if "cannot boot it" in error:
        return their_max_len(harness, case, 1)[1] in ("KeyError", "TypeError")
    if "'s choices)" in error:  # the CLI's
        field = error.split(":", 1)[0]
        return case["options"][field] not in harness.cli_dtypes[
            "CacheDType" if field == "kv_cache_dtype" else "MambaDType"]
    if "the backend vLLM %s runs this model with" % release in error:
        # 0.10's kernels refuse what its selection never asked about (read from their Impl
        # classes): the release's own selection must have picked the backend named
        picked = their_backends_as_set(harness, case)[0]
        return picked is not None and list(picked.values())[0] in error
    if "attention backend of vLLM" in error or "576-wide latent heads" in error:
        return their_backends_as_set(harness, case)[1] is not None
    if case["family"] == "gdn" and ("model_type: expected a model vLLM" in error
                                    or "not compatible with speculative decoding" in error):
        truth, options = release_inputs(case, ours(case, LATEST), LATEST)  # the config checks come first
        return "error" in harness.hybrid(truth, dict(options, block_size=options["user_block_size"]),
                                         options["capability"])
    return case["options"]["max_model_len"] == "auto" and "auto-fit, which came in 0.14" in error and \
        parse_version(release) < (0, 14, 0)


def their_plan(harness, case, truth, options):
    """The release's numbers for a case it boots past the model config, with the
    backend the release picks for the first attention layer, the block size its platform then
    settles on (a GDN hybrid's comes out of its config checks) and a sliding layer's block size
    from the release's own backend class."""
    picked, error = their_backends(harness, case, options)
    if error:
        return {"boot_ok": False, "boot_error": error}
    backends = list(dict.fromkeys(picked.values()))
    options = dict(options, backend=backends[0], layer_backends=picked)
    if not truth.get("linear"):
        options["block_size"] = harness.block_size(truth, options, backends)
    theirs = run_case(harness, truth, options)
    theirs["attention_backend"] = backends[0]
    return theirs


def run_release(release, count, seed, cache, perturb=None):
    report = {"release": release, "cases": 0, "compared": 0, "mismatches": [], "rejected": [],
              "families": {}, "boot_failures": 0, "length_refusals": 0,
              "refused_alike": 0, "auto_fits": 0}
    started = time.monotonic()
    harness = load(release, cache)
    report["source"] = harness.source
    for case in make_cases(count, seed):
        report["cases"] += 1
        try:
            mine = ours(case, release)
        except ValueError as exc:
            if refused_alike(harness, case, release, str(exc)):
                report["refused_alike"] += 1
            else:
                report["rejected"].append({"id": case["id"], "error": str(exc)})
            continue
        auto = case["options"]["max_model_len"] == "auto"
        length, length_error = their_max_len(harness, case, -1 if auto else mine["max_model_len"])
        if length_error:  # the boot stops at the model config
            theirs = {"boot_ok": False, "boot_error": length_error}
            report["length_refusals"] += 1
        else:
            truth, options = release_inputs(case, mine, release)
            if auto:  # the engine fits the length the model config derived
                options.update(max_model_len=length, original_max_model_len=-1)
            theirs = their_plan(harness, case, truth, options)
            limits = harness.batch_limits(GPUS[case["options"]["gpu"]], options["tensor_parallel_size"],
                                          length, case["options"]["max_num_batched_tokens"],
                                          case["options"]["max_num_seqs"])
            if limits:
                theirs["max_num_batched_tokens"], theirs["max_num_seqs"] = limits
        if perturb:
            mine[perturb] = mine[perturb] + 1
        report["compared"] += 1
        report["auto_fits"] += auto
        report["families"][case["family"]] = report["families"].get(case["family"], 0) + 1
        report["boot_failures"] += not theirs["boot_ok"]
        if (theirs["boot_error"] or "").startswith("NotImplementedError") and mine["boot_error"]:
            mine["boot_error"] = mine["boot_error"].split(" (", 1)[0]  # ours says why
        for field in COMPARED:
            if field in theirs and mine[field] != theirs[field]:
                report["mismatches"].append({"id": case["id"], "field": field, "ours": mine[field],
                                             "vllm": theirs[field], "options": case["options"]})
    report["seconds"] = round(time.monotonic() - started, 1)
    return report


# The grid the backends' support rules are compared on: every head size, cache dtype, sink and
# block size choice the rules tell apart, on every card modelled.
GRID_HEADS = (64, 80, 96, 128, 192, 256, 512)
GRID_KV_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")
GRID_BLOCKS = (None, 16, 32, 64, 128)
# MLA: (kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim)
GRID_MLA = ((512, 64, 128), (512, 64, 192), (512, 64, 64), (256, 32, 64))


def backend_grid(harness, release):
    """Ours and the release's selection over GRID_*: ``(points, mismatches)``."""
    dense = _kv_sizing.describe_model({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 32,
                                       "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096,
                                       "max_position_embeddings": 8192, "torch_dtype": "bfloat16"})
    points, mismatches = 0, []
    for gpu, kv_dtype, block in itertools.product(sorted(GPUS), GRID_KV_DTYPES, GRID_BLOCKS):
        options = {"tensor_parallel_size": 1, "kv_dtype_setting": kv_dtype, "user_block_size": block}
        try:
            opts = _kv_sizing._Options(dense, 8192, None, gpu=gpu, kv_cache_dtype=kv_dtype, block_size=block,
                                       vllm_version=release)
        except ValueError:  # a cache dtype the release's CLI does not offer
            continue
        variants = [("std", head, sinks) for head in GRID_HEADS for sinks in (False, True)] + \
            [("mla",) + geometry for geometry in GRID_MLA]
        for variant in variants:
            if variant[0] == "mla":
                rank, rope, nope = variant[1:]
                model = dict(dense, mla={"kv_lora_rank": rank, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope})
                truth = {"dtype": "bfloat16", "heads": 32, "sinks": False, "mla": {"nope": nope}}
                layer = {"kind": "mla", "head_size": rank + rope, "kv_heads": 1}
            else:
                head, sinks = variant[1:]
                model = dict(dense, sinks=sinks, layers=[dict(dense["layers"][0], head_size=head)])
                truth = {"dtype": "bfloat16", "heads": 32, "sinks": sinks}
                layer = {"kind": "full", "head_size": head, "kv_heads": 8}
            try:
                ours = _attention.select_backend(opts, model).name
            except ValueError:
                ours = None
            theirs = harness.attention_backend(dict(truth, layers=[layer]), options, CAPABILITIES[gpu], layer)
            theirs = None if theirs.startswith("ValueError") else theirs
            points += 1
            if ours != theirs:
                mismatches.append({"gpu": gpu, "kv_cache_dtype": kv_dtype, "block_size": block,
                                   "model": variant, "ours": ours, "vllm": theirs})
    return points, mismatches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", required=True, help="a modelled release (0.26.0) or all")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261005)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--perturb", choices=COMPARED, help="add 1 to this field of ours (proves the comparison bites)")
    parser.add_argument("--backend-grid", action="store_true",
                        help="compare the attention backend over a grid instead (0.10.2 to 0.33)")
    args = parser.parse_args(argv)
    if args.backend_grid:
        points, mismatches = backend_grid(load(args.release, args.cache), args.release)
        args.report.write_text(json.dumps({"release": args.release, "points": points, "mismatches": mismatches},
                                          indent=1))
        print("vllm %-7s %d backend choices, %d mismatches" % (args.release, points, len(mismatches)))
        return 1 if mismatches else 0
    if args.release == "all":
        reports = []
        for release in (source for source in MODELLED.values() if source != LATEST):
            with tempfile.NamedTemporaryFile(suffix=".json") as one:
                command = [sys.executable, __file__, "--release", release, "--cases", str(args.cases),
                           "--seed", str(args.seed), "--cache", str(args.cache), "--report", one.name]
                proc = subprocess.run(command + (["--perturb", args.perturb] if args.perturb else []),
                                      capture_output=True, text=True, check=False)
                reports.append(json.loads(Path(one.name).read_text()) if proc.returncode in (0, 2)
                               else {"release": release, "error": proc.stderr[-2000:]})
        args.report.write_text(json.dumps(reports, indent=1, default=str))
        for report in reports:
            print("vllm %-7s %s" % (report["release"], report.get("error") or report.get("source_error") or
                                    "%4d compared, %d mismatches, %d boot failures (%d at the max length), %d refused "
                                    "alike, %.1f s; GDN hybrids %d" % (
                                        report["compared"], len(report["mismatches"]), report["boot_failures"],
                                        report["length_refusals"], report["refused_alike"], report["seconds"],
                                        report["families"].get("gdn", 0))))
        return 0 if all("error" not in r and "source_error" not in r and not r["mismatches"] for r in reports) else 1
    try:
        report = run_release(args.release, args.cases, args.seed, args.cache, args.perturb)
    except SourceUnavailable as exc:
        args.report.write_text(json.dumps({"release": args.release, "source_error": str(exc)}))
        return 2
    args.report.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
