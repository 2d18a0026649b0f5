# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What a seat really holds on each of its GPUs: weights + pinned KV + runtime overhead.

vLLM's declared budget is not what the process needs: the CUDA context, NCCL and
cuBLAS handles sit outside ``--gpu-memory-utilization``; CUDA graphs, the activation peak,
FlashInfer's 394 MiB workspace and its autotuner allocate on top of the KV cache. So the
overhead is measured where it can be: at the plateau, days after a boot, as the seat's process
memory less its weights and its KV. Otherwise it is the default below, which the operator can
override per seat (``overhead_bytes``).

``--gpu-memory-utilization`` then only gates the boot: the smallest 0.01 step whose
``ceil(total x util)`` covers the footprint plus a margin, so vLLM itself refuses to start a seat
whose GPU has no room for it.
"""

from __future__ import annotations

import math
import os
import struct

from ansible_collections.llmfleet.seats.plugins.module_utils._cards.snapshot import seat_mib
from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import load_json, loads_bounded
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import MIB, bytes_to_mib

# CUDA context + NCCL/cuBLAS (~512 MiB), CUDA graphs (~512 MiB at vLLM's default capture sizes
# for 7-30B models), activations at max_num_batched_tokens (~768 MiB) and the FlashInfer
# workspace (394 MiB): about 2.2 GiB, rounded up. Measured values replace it.
DEFAULT_OVERHEAD_MIB = 2304
# What is already held at boot, before graphs and autotuning grow it to the plateau.
DEFAULT_BOOT_OVERHEAD_MIB = 1536
# Below this a "measured" overhead is not believable (a context alone is about this much).
MIN_OVERHEAD_MIB = 512


# The largest header a safetensors file may have (the format's own limit).
SAFETENSORS_HEADER_MAX = 100 * 1000 * 1000


class FootprintError(ValueError):
    """A footprint that cannot be counted; the message names the seat and what is missing."""


def safetensors_tensor_bytes(path):
    """Bytes of the tensors in one ``.safetensors`` file, from its header alone: an 8-byte
    little-endian header length, then a JSON map of tensor name to ``data_offsets``."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        length = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else None
        # safetensors' own bound on a header: a larger length is no checkpoint's, and never read
        if length is None or length > min(size - 8, SAFETENSORS_HEADER_MAX):
            raise FootprintError("%s: not a safetensors file (a git-lfs pointer or a partial "
                                 "download?); declare the seat's weights_bytes" % path)
        try:
            header = loads_bounded(handle.read(length).decode("utf-8"))
            return sum(entry["data_offsets"][1] - entry["data_offsets"][0]
                       for name, entry in header.items() if name != "__metadata__")
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise FootprintError("%s: the safetensors header cannot be read; declare the "
                                 "seat's weights_bytes" % path) from None


def checkpoint_bytes(model_dir):
    """Bytes of a checkpoint's weights from its directory: the safetensors index's
    ``metadata.total_size``, else the tensors listed in the ``*.safetensors`` headers. None if
    neither is there."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        try:
            document = load_json(index)
        except ValueError:  # not JSON, or beyond the read caps: the headers are counted instead
            document = None
        metadata = document.get("metadata") if isinstance(document, dict) else None
        total = metadata.get("total_size") if isinstance(metadata, dict) else None
        if isinstance(total, int) and total > 0:
            return total
    files = sorted(name for name in os.listdir(model_dir) if name.endswith(".safetensors")) \
        if os.path.isdir(model_dir) else []
    if files:
        return sum(safetensors_tensor_bytes(os.path.join(model_dir, name)) for name in files)
    return None


def weights_bytes_per_gpu(seat, config_path):
    """Declared ``weights_bytes``, else the checkpoint next to the model's config.json; per GPU."""
    total = seat.get("weights_bytes")
    if total is None:
        try:
            total = checkpoint_bytes(os.path.dirname(config_path))
        except FootprintError as exc:
            raise FootprintError("seat %s: weights_bytes: %s" % (seat["name"], exc)) from None
    if total is None:
        raise FootprintError(
            "seat %s: weights_bytes: not declared, and no model.safetensors.index.json or "
            "*.safetensors next to %s; declare the checkpoint's size (e.g. 16GiB)"
            % (seat["name"], config_path))
    return -(-total // seat.get("tensor_parallel_size", 1))


def measured_overhead_mib(seat_name, plateau, weights_mib, kv_mib):
    """Overhead per GPU seen at the plateau: the seat's process memory on each GPU less its
    weights and KV; the largest over its GPUs. None when the snapshot does not show the seat."""
    held = seat_mib(plateau.get("gpus", [])).get(seat_name) if plateau else None
    if not held:
        return None
    return max(max(held.values()) - weights_mib - kv_mib, MIN_OVERHEAD_MIB)


def fixed_footprint(seat):
    """A fixed tenant holds its cap at the plateau, and its boot size (else the cap) at boot."""
    cap = bytes_to_mib(seat["memory_cap_bytes"])
    boot = bytes_to_mib(seat["memory_boot_bytes"]) if seat.get("memory_boot_bytes") else cap
    return {"weights_mib": None, "kv_mib": None, "overhead_mib": None,
            "overhead_source": "fixed cap", "footprint_mib": cap, "boot_footprint_mib": boot}


# What a plateau's measurement of a seat depends on besides its KV: the same image, model and
# context, or the overhead it shows is not this plan's.
RAN_FIELDS = ("image", "model", "max_model_len")


def vllm_footprint(seat, kv_bytes, weights_bytes, plateau=None, ran=None,
                   default_overhead_mib=DEFAULT_OVERHEAD_MIB,
                   default_boot_overhead_mib=DEFAULT_BOOT_OVERHEAD_MIB):
    """The seat's footprint per GPU, at the plateau and at boot, with where the overhead came from.

    ``ran`` is what the seat ran when the plateau snapshot was taken: its
    ``kv_cache_memory_bytes`` and, where recorded, its ``image``, ``model`` and ``max_model_len``.
    The measurement is the seat's memory less its weights and the KV it ran with, and is only
    reused for the same image, model and context; otherwise the default overhead is used and
    the source says why.
    """
    weights_mib, kv_mib = bytes_to_mib(weights_bytes), bytes_to_mib(kv_bytes)
    if seat.get("overhead_bytes") is not None:
        overhead, source = bytes_to_mib(seat["overhead_bytes"]), "declared"
    else:
        overhead, source = default_overhead_mib, "default"
        differs = ["%s %s (the plan: %s)" % (field, ran[field], seat.get(field))
                   for field in RAN_FIELDS if ran and ran.get(field) is not None and ran[field] != seat.get(field)]
        if differs:
            source = "default: at the plateau it ran %s" % "; ".join(differs)
        elif ran and ran.get("kv_cache_memory_bytes") is not None:
            measured = measured_overhead_mib(seat["name"], plateau, weights_mib,
                                             bytes_to_mib(ran["kv_cache_memory_bytes"]))
            if measured is not None:
                overhead, source = measured, "measured at plateau"
                if ran["kv_cache_memory_bytes"] != kv_bytes:
                    source += " (it ran with %d MiB of KV there)" % bytes_to_mib(ran["kv_cache_memory_bytes"])
    boot_overhead = min(overhead, default_boot_overhead_mib)
    return {"weights_mib": weights_mib, "kv_mib": kv_mib, "overhead_mib": overhead,
            "overhead_source": source, "footprint_mib": weights_mib + kv_mib + overhead,
            "boot_footprint_mib": weights_mib + kv_mib + boot_overhead}


def boot_gate_utilization(footprint_mib, margin_mib, total_mib):
    """The smallest 0.01 step whose ``ceil(total x util)`` (bytes, as vLLM computes it) covers
    the footprint plus the margin."""
    need = (footprint_mib + margin_mib) * MIB
    total = total_mib * MIB
    hundredths = max(1, math.ceil(need * 100 / total))
    while math.ceil(total * (hundredths / 100)) < need:  # vLLM: ceil(total_memory * util)
        hundredths += 1
    if hundredths > 100:
        raise FootprintError("a footprint of %d MiB plus %d MiB margin does not fit a %d MiB GPU"
                             % (footprint_mib, margin_mib, total_mib))
    return hundredths / 100
