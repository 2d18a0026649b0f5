# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""vLLM's KV cache arithmetic for a pinned ``--kv-cache-memory-bytes`` budget.

Mirrors, step by step, what ``vllm serve`` 0.33.0 does between loading the model and printing
"GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: Cx": the block
size (the attention backend's preference, then the hybrid Mamba alignment; the backend is
attention.py's), one KV cache spec per layer (``v1/kv_cache_interface.py``), the hybrid
allocator's grouping and page unification (``v1/core/kv_cache_planning.py``), bytes per block,
``num_blocks = budget // bytes_per_block``, the startup admission check that holds one null
block back (with vLLM's own error text and estimated maximum length), the capacity line
(``v1/core/kv_cache_utils.py``) and the Mamba ``max_num_seqs`` check (``config/compilation.py``).
Every figure is per GPU (TP rank).

``vllm_version`` selects an older release's arithmetic where it differs (``_Options.since``
marks each change with the release that made it; docs/kv-sizing.md lists them), from 0.10.2 on.
``gpu="cpu"`` is vLLM 0.32's CPU platform instead of a card (its CPU build, which the realengine
tests boot).

The sizing rule on top: the smallest budget that boots and whose maximum concurrency at
``max_model_len`` is at least ``kv_factor``, rounded up to a multiple of ``kv_round_to``.

Pure standard library: the module and the filters share it.
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import GPU_PROFILE, KV_FACTOR, KV_ROUND_TO
from ansible_collections.llmfleet.seats.plugins.module_utils._common.sizes import (
    GIB,
    SizeError,
    round_up,
    to_bytes,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.attention import (
    CPU_ATTN_HEAD_SIZES,
    KV_CACHE_DTYPES,
    KV_CACHE_DTYPES_FROM,
    check_0_10_kernels,
    forced_mla_block,
    mla_forcing_backend,
    select_backend,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.model_config import (
    ModelConfigError,
    describe_model,
    load_model_config,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import (
    LATEST,
    ReleaseError,
    modelled,
    parse_version,
)

# The Mamba state dtypes modelled, each with the release its --mamba-*-dtype choices took it in
# (config/cache.py MambaDType); the KV cache's are attention.py's.
_MAMBA_DTYPES_FROM = {"auto": "0.10", "float32": "0.10", "float16": "0.13", "bfloat16": "0.22"}
# The most concurrency at max_model_len a factor may ask for (vLLM's default max_num_seqs): a
# larger one (or inf) would size a cache no card holds.
KV_FACTOR_MAX = 1024
MAMBA_DTYPES = tuple(_MAMBA_DTYPES_FROM)
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

# What vLLM's get_batch_defaults (engine/arg_utils.py) and the CUDA backend priority lists
# (platforms/cuda.py) see for each card. ``sm`` is the compute capability major*10+minor.
GPU_PROFILES = {
    "h100": {"sm": 90, "memory_gib": 79.2, "name": "NVIDIA H100 80GB HBM3"},
    "h200": {"sm": 90, "memory_gib": 139.8, "name": "NVIDIA H200"},
    "b200": {"sm": 100, "memory_gib": 178.4, "name": "NVIDIA B200"},
    "rtx-pro-6000": {"sm": 120, "memory_gib": 95.6,
                     "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"},
    "a100": {"sm": 80, "memory_gib": 79.2, "name": "NVIDIA A100-SXM4-80GB"},
    "l40s": {"sm": 89, "memory_gib": 44.4, "name": "NVIDIA L40S"},
}

# vLLM's CPU platform (platforms/cpu.py, v1/attention/backends/cpu_attn.py), modelled for the
# release whose CPU build the real-engine tests boot: its one attention backend (attention.py), its
# default block of 128, its serving batch defaults, and no asynchronous scheduling (one batch in
# flight).
CPU_PLATFORM = "cpu"
CPU_RELEASES = ("0.32.0",)
PLATFORMS = tuple(sorted(GPU_PROFILES)) + (CPU_PLATFORM,)
_CPU_BLOCK_SIZE = 128

_CONSERVING = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _no_memory_error(opts):
    """vLLM's words when nothing is left for KV blocks, as the release wrote them."""
    if opts.since("0.22"):
        return ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine (this flag also controls CPU memory reservation on the CPU "
                "backend, despite its name). " + _CONSERVING)
    text = ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.")
    return text + " " + _CONSERVING if opts.since("0.13") else text


def _admission_error(opts, max_model_len, needed, available, estimated):
    """vLLM's words when one request of max_model_len does not fit, as the release wrote them
    (0.14 prints sizes with format_gib, before with two decimals; 0.22 fixed "models's")."""
    hint = ("Based on the available memory, the estimated maximum model length is %d." % estimated) \
        if estimated > 0 else ""
    if opts.since("0.22"):
        return ("To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is needed, "
                "which is larger than the available KV cache memory (%s GiB). %sTry increasing "
                "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
                "`max_model_len` when initializing the engine. %s"
                % (max_model_len, format_gib(needed), format_gib(available), hint + " " if hint else "", _CONSERVING))
    if opts.since("0.14"):
        return ("To serve at least one request with the models's max seq len (%d), (%s GiB KV cache is needed, "
                "which is larger than the available KV cache memory (%s GiB). %sTry increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. %s"
                % (max_model_len, format_gib(needed), format_gib(available), hint + " " if hint else "", _CONSERVING))
    text = ("To serve at least one request with the models's max seq len (%d), (%.2f GiB KV cache is needed, "
            "which is larger than the available KV cache memory (%.2f GiB). %s Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
            % (max_model_len, needed / GIB, available / GIB, hint))
    return text + " " + _CONSERVING if opts.since("0.13") else text


_LONG_LEN_WARNING = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses "
    "relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. "
    "If the model uses absolute position encoding, positions exceeding derived_max_model_len "
    "will cause a CUDA array out-of-bounds error.")


class KVSizingError(ValueError):
    """Bad sizing input; the message names the seat, the option or field, and what was expected."""


def _prefix(seat):
    return "seat %s: " % seat if seat else ""


def _cdiv(a, b):
    return -(a // -b)


def format_gib(num_bytes):
    """vLLM's utils/mem_utils.py format_gib: ``str(round(b / 2**30, 2))``."""
    return str(round(num_bytes / GIB, 2))


class _Spec:
    """One layer's KV cache spec (the fields vLLM compares when grouping)."""

    __slots__ = ("kind", "block_size", "num_kv_heads", "head_size", "head_size_v",
                 "dtype_bytes", "window", "page_padded", "state_bytes", "mamba_pages",
                 "stride_base")

    def __init__(self, kind, block_size, num_kv_heads=0, head_size=0, head_size_v=0,
                 dtype_bytes=0, window=None, page_padded=None, state_bytes=0, mamba_pages=0,
                 stride_base=None):
        self.kind, self.block_size = kind, block_size
        self.num_kv_heads, self.head_size, self.head_size_v = num_kv_heads, head_size, head_size_v
        self.dtype_bytes, self.window, self.page_padded = dtype_bytes, window, page_padded
        self.state_bytes, self.mamba_pages, self.stride_base = state_bytes, mamba_pages, stride_base

    def key(self):
        return (self.kind, self.block_size, self.num_kv_heads, self.head_size, self.head_size_v,
                self.dtype_bytes, self.window, self.page_padded, self.state_bytes,
                self.mamba_pages, self.stride_base)

    def replaced(self, **changes):
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return _Spec(**fields)

    @property
    def per_token_bytes(self):
        return self.num_kv_heads * (self.head_size + self.head_size_v) * self.dtype_bytes

    def unpadded_page(self, block_size=None):
        if self.kind == "mamba":
            return self.state_bytes
        return (self.block_size if block_size is None else block_size) * self.per_token_bytes

    @property
    def page_size(self):
        return self.page_padded if self.page_padded is not None else self.unpadded_page()

    def block_stride(self):
        """kv_cache_planning._get_layer_block_stride: the page rounded to its alignment."""
        if self.stride_base is None:
            return self.page_size
        kernel_block = math.gcd(self.stride_base, self.block_size)
        if kernel_block == self.block_size:
            return self.page_size
        return round_up(self.page_size, self.unpadded_page(kernel_block))

    def pages_per_request(self, max_model_len, in_flight_tokens):
        """cdiv(max_memory_usage_bytes, page_size_bytes) for this spec."""
        if self.kind == "mamba":
            return self.mamba_pages
        if self.kind == "sliding":
            tokens = min(self.window - 1 + in_flight_tokens, max_model_len)
            return _cdiv(tokens, self.block_size) + 1
        return _cdiv(max_model_len, self.block_size)


class _Group:
    __slots__ = ("spec", "layer_specs")

    def __init__(self, spec, layer_specs):
        self.spec, self.layer_specs = spec, layer_specs

    def bytes_per_block(self):
        return sum(spec.block_stride() for spec in self.layer_specs)

    def pages_per_request(self, max_model_len, in_flight_tokens, uniform_type=False):
        if uniform_type:  # UniformTypeKVCacheSpecs: the widest layer sets the worker's need
            return max(spec.pages_per_request(max_model_len, in_flight_tokens)
                       for spec in self.layer_specs)
        return self.spec.pages_per_request(max_model_len, in_flight_tokens)


class _Plan:
    """The grouped specs of one seat: everything that does not depend on the budget."""

    def __init__(self, groups, uniform_type, in_flight_tokens, block_size, has_mamba,
                 per_token_kv_bytes, layer_specs, admission, layout_error):
        self.groups, self.uniform_type = groups, uniform_type
        self.layer_specs, self.admission, self.layout_error = layer_specs, admission, layout_error
        self.in_flight_tokens, self.block_size = in_flight_tokens, block_size
        self.has_mamba, self.per_token_kv_bytes = has_mamba, per_token_kv_bytes
        self.bytes_per_block = max(group.bytes_per_block() for group in groups)

    def pages_per_request(self, max_model_len, for_capacity=False):
        # The capacity line reads the scheduler's config, where a UniformTypeKVCacheSpecs group
        # is replaced by its first layer's spec; the admission check reads the worker's.
        uniform = self.uniform_type and not for_capacity
        return sum(group.pages_per_request(max_model_len, self.in_flight_tokens, uniform)
                   for group in self.groups)

    def needed(self, max_model_len):
        """The admission check's bytes for one request of ``max_model_len``, as the release
        counts them: the groups' pages (0.19), the first group's pages times the groups'
        layers (0.14, UniformTypeKVCacheSpecs aside), or every layer's own pages, counted before
        --disable-hybrid-kv-cache-manager promotes sliding layers to full ones (before)."""
        if self.admission == "layers":
            return sum(spec.pages_per_request(max_model_len, self.in_flight_tokens) * spec.page_size
                       for spec in self.layer_specs)
        if self.admission == "first_group" and not self.uniform_type:
            return self.bytes_per_block * self.groups[0].pages_per_request(max_model_len, self.in_flight_tokens)
        return self.bytes_per_block * self.pages_per_request(max_model_len)

    def fits(self, max_model_len, check_memory):
        return self.needed(max_model_len) <= check_memory

    def estimate_max_model_len(self, check_memory, upper):
        """kv_cache_planning._estimate_max_model_len_from_groups (binary search over [1, L])."""
        if not self.fits(1, check_memory):
            return 0
        left, right, result = 1, upper, 1
        while left <= right:
            middle = (left + right) // 2
            if self.fits(middle, check_memory):
                result, left = middle, middle + 1
            else:
                right = middle - 1
        return result


def _group_hybrid(specs, balance):
    """unify_kv_cache_spec_page_size + _get_kv_cache_groups_uniform_page_size. Groups take the
    smallest kind's layer count, or the largest one when it is below ``balance`` times that
    (None: never)."""
    largest = max(spec.page_size for spec in specs)
    unified = []
    for spec in specs:
        page = spec.page_size
        if page == largest:
            unified.append(spec)
        elif spec.kind == "mamba":
            unified.append(spec.replaced(page_padded=largest))
        elif largest % page == 0:
            unified.append(spec.replaced(block_size=spec.block_size * (largest // page)))
        elif spec.kind != "mla":
            unified.append(spec.replaced(page_padded=largest))
        else:
            raise KVSizingError("this model mixes MLA layers with layers whose page size does "
                                "not divide the MLA page (vLLM cannot unify them)")
    buckets = {}
    for spec in unified:
        buckets.setdefault(spec.key(), []).append(spec)
    sizes = [len(layers) for layers in buckets.values()]
    group_size = min(sizes)
    if balance and max(sizes) < group_size * balance:
        group_size = max(sizes)
    groups = []
    for layers in buckets.values():
        num_groups = _cdiv(len(layers), group_size)
        for index in range(num_groups):
            members = layers[index::num_groups]
            groups.append(_Group(members[0], members))
    return groups


def _group(specs, opts, promoted):
    """get_kv_cache_groups for the default LBNHC layout; returns (groups, uniform_type,
    the boot error of a release that cannot group these layers or None)."""
    first = specs[0]
    same_key = {spec.key() for spec in specs}
    if len(same_key) == 1:
        return [_Group(first, specs)], False, None
    if not opts.since("0.11") and len({spec.replaced(window=None).key() for spec in specs}) == 1 \
            and first.kind != "sliding":
        # 0.10's KVCacheSpec.merge: full attention with and without a window (sliding layers
        # the hybrid manager was told to promote) is one type
        return [_Group(first, specs)], False, None
    # 0.11 groups layers of one kind alike (UniformTypeKVCacheSpecs); 0.12 unifies page sizes.
    if opts.since("0.11") and len({spec.block_size for spec in specs}) == 1:
        if first.kind in ("full", "mla"):
            uniform = all(spec.kind in ("full", "mla") for spec in specs)
        elif first.kind == "sliding":
            uniform = all(spec.kind == "sliding" and spec.window == first.window
                          for spec in specs)
        else:
            uniform = all(spec.kind == "mamba" and spec.page_size == first.page_size
                          and spec.mamba_pages == first.mamba_pages for spec in specs)
        if uniform:
            return [_Group(first, specs)], True, None
    # 0.12 balances the groups when the kinds' layer counts are close (within 1.25x; 1.5x in 0.18)
    balance = 1.5 if opts.since("0.18") else 1.25 if opts.since("0.12") else None
    if not opts.since("0.27") and (opts.disable_hma or promoted):
        return _group_hybrid(specs, balance), False, (
            "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type.")
    if not opts.since("0.12") and len({spec.page_size for spec in specs}) > 1:
        return _group_hybrid(specs, balance), False, (
            "NotImplementedError (vLLM %s groups layers of different kinds only when their KV pages are the "
            "same size)" % opts.release["release"])
    return _group_hybrid(specs, balance), False, None


def _release(vllm_version, allow_nearest, seat):
    """The modelled release that plans a seat (vllm_releases.modelled), or its one-line error."""
    if not isinstance(allow_nearest, bool):
        raise KVSizingError("%sallow_nearest_vllm_release: expected true or false, got %r"
                            % (_prefix(seat), allow_nearest))
    try:
        return modelled(vllm_version, allow_nearest)
    except ReleaseError as exc:
        raise KVSizingError(_prefix(seat) + str(exc)) from None


def _release_dtypes(options, came_in):
    return tuple(dtype for dtype, release in came_in.items() if options.since(release))


class _Options:
    """Validated options, with vLLM's defaults resolved for the chosen GPU."""

    def __init__(self, model, max_model_len, seat, kv_cache_dtype="auto", tensor_parallel_size=1,
                 block_size=None, enable_prefix_caching=True, max_num_batched_tokens=None,
                 max_num_seqs=None, gpu=GPU_PROFILE, num_speculative_tokens=0,
                 enforce_eager=False, mamba_cache_dtype="auto", mamba_ssm_cache_dtype="auto",
                 disable_hybrid_kv_cache_manager=False, allow_long_max_model_len=False,
                 vllm_version=LATEST, allow_nearest_vllm_release=False):
        self.seat = seat
        self.release = _release(vllm_version, allow_nearest_vllm_release, seat)
        self.version = parse_version(self.release["release"])
        self.max_len_limit = _max_len_limit(model, self.release, seat)
        if gpu not in PLATFORMS:
            raise self.error("gpu", "one of %s" % ", ".join(PLATFORMS), gpu)
        self.gpu, self.cpu = gpu, gpu == CPU_PLATFORM
        self.sm = None if self.cpu else GPU_PROFILES[gpu]["sm"]
        if self.cpu and self.release["release"] not in CPU_RELEASES:
            raise self.error("vllm_version", "%s: vLLM's CPU platform is modelled for that release"
                             % " or ".join(CPU_RELEASES), self.release["release"])
        for name, value, known, offered in (
                ("kv_cache_dtype", kv_cache_dtype, KV_CACHE_DTYPES, _release_dtypes(self, KV_CACHE_DTYPES_FROM)),
                ("mamba_cache_dtype", mamba_cache_dtype, MAMBA_DTYPES, _release_dtypes(self, _MAMBA_DTYPES_FROM)),
                ("mamba_ssm_cache_dtype", mamba_ssm_cache_dtype, MAMBA_DTYPES,
                 _release_dtypes(self, _MAMBA_DTYPES_FROM))):
            if value not in known:
                raise self.error(name, "one of %s" % ", ".join(known), value)
            if value not in offered:
                raise self.error(name, "one of %s (vLLM %s's choices)" % (
                    ", ".join(offered), self.release["release"]), value)
        self.tp = self.positive_int("tensor_parallel_size", tensor_parallel_size)
        self.user_block_size = None if block_size is None \
            else self.positive_int("block_size", block_size)
        self.num_spec = self.positive_int("num_speculative_tokens", num_speculative_tokens, 0)
        for name, value in (("enable_prefix_caching", enable_prefix_caching),
                            ("enforce_eager", enforce_eager),
                            ("disable_hybrid_kv_cache_manager", disable_hybrid_kv_cache_manager),
                            ("allow_long_max_model_len", allow_long_max_model_len)):
            if not isinstance(value, bool):
                raise self.error(name, "true or false", value)
        self.prefix_caching, self.enforce_eager = enable_prefix_caching, enforce_eager
        self.disable_hma, self.allow_long = disable_hybrid_kv_cache_manager, allow_long_max_model_len
        self.mamba_cache_dtype, self.mamba_ssm_cache_dtype = mamba_cache_dtype, mamba_ssm_cache_dtype
        self.kv_cache_dtype = kv_cache_dtype if kv_cache_dtype != "auto" \
            else (model["checkpoint_kv_cache_dtype"] or "auto")
        self.model_dtype_bytes = _DTYPE_BYTES[model["dtype"]]
        self.kv_bytes = 1 if self.kv_cache_dtype.startswith("fp8") else (
            2 if self.kv_cache_dtype in ("bfloat16", "float16") else self.model_dtype_bytes)
        self._batch_defaults(max_model_len, max_num_batched_tokens, max_num_seqs)
        # 0.26: a sliding window keeps the tokens of every batch in flight (two, scheduled
        # asynchronously; the CPU platform turns that off); before, one batch's.
        self.in_flight_tokens = (2 if self.since("0.26") and not self.cpu else 1) * self.max_num_batched_tokens
        # 0.29: the admission check holds back the null block the block pool keeps.
        self.null_blocks_held = 1 if self.since("0.29") else 0
        gdn = model["attention"] == "gated_delta_net"
        if gdn:
            _check_gdn_release(model, self)
        self.gdn_prefix_caching = gdn and _gdn_prefix_caching(self)

    def since(self, version):
        """Whether the modelled release is ``version`` (``"0.26"``) or later."""
        return self.version >= parse_version(version)

    def error(self, name, expected, got):
        return KVSizingError("%s%s: expected %s, got %r" % (_prefix(self.seat), name, expected, got))

    def positive_int(self, name, value, minimum=1):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(name, "an integer >= %d" % minimum, value)
        return value

    def _batch_defaults(self, max_model_len, max_num_batched_tokens, max_num_seqs):
        """EngineArgs.get_batch_defaults + _set_default_max_num_seqs_and_batched_tokens_args
        for ``vllm serve`` (OPENAI_API_SERVER usage context)."""
        profile = GPU_PROFILES.get(self.gpu)
        if self.cpu:  # per rank of the world
            default_tokens, default_seqs = 2048 * self.tp, 128 * self.tp
        elif profile["memory_gib"] >= 160 and self.since("0.28"):  # B200's own tier from 0.28
            default_tokens, default_seqs = 16384, 1024
        elif profile["memory_gib"] >= 70 and "a100" not in profile["name"].lower():
            default_tokens, default_seqs = 8192, 1024
        else:
            default_tokens, default_seqs = 2048, 256
        seqs = default_seqs if max_num_seqs is None \
            else self.positive_int("max_num_seqs", max_num_seqs)
        if max_num_batched_tokens is None:
            # 0.10 took the card's default as it was; 0.11 caps it at a full batch of lengths
            tokens = min(seqs * max_model_len, default_tokens) if self.since("0.11") else default_tokens
        else:
            tokens = self.positive_int("max_num_batched_tokens", max_num_batched_tokens)
        if max_num_seqs is None:
            seqs = min(seqs, tokens)
        self.max_num_batched_tokens, self.max_num_seqs = tokens, seqs


def _check_tensor_parallel(model, options):
    """The divisibility vLLM asserts when it builds the layers for tensor_parallel_size."""
    tp = options.tp
    heads = model["num_attention_heads"]
    if heads % tp:
        raise options.error("tensor_parallel_size", "a divisor of the model's %d attention heads"
                            % heads, tp)
    for layer in model["layers"]:
        kv_heads = layer.get("num_kv_heads")
        if layer["kind"] in ("full_attention", "sliding_attention") and kv_heads and (
                kv_heads % tp if kv_heads >= tp else tp % kv_heads):
            raise options.error("tensor_parallel_size", "a divisor or multiple of the model's "
                                "%d KV heads" % kv_heads, tp)
    linear = model["linear_attention"]
    if linear:
        conv_dim = (2 * linear["num_key_heads"] * linear["key_head_dim"]
                    + linear["num_value_heads"] * linear["value_head_dim"])
        if conv_dim % tp or linear["num_value_heads"] % tp:
            raise options.error("tensor_parallel_size", "a divisor of the linear-attention "
                                "value heads (%d) and conv width (%d)"
                                % (linear["num_value_heads"], conv_dim), tp)


# The release that first serves each Gated DeltaNet model type (Qwen3-Next: every modelled one);
# registry.py: the Qwen3.5 wrappers (multimodal classes) in 0.17, the text-only classes in 0.27.
_GDN_SERVED_FROM = {"qwen3_5": "0.17", "qwen3_5_moe": "0.17", "qwen3_5_text": "0.27",
                    "qwen3_5_moe_text": "0.27"}


def _check_gdn_release(model, options):
    """A GDN model the release does not register, refused in one line."""
    served_from = _GDN_SERVED_FROM.get(model["model_type"])
    if served_from and not options.since(served_from):
        raise options.error("model_type", "a model vLLM %s serves (%s came in %s)"
                            % (options.release["release"], model["model_type"], served_from),
                            model["model_type"])


def _gdn_prefix_caching(options):
    """MambaModelConfig.verify_and_update_config: before 0.15 prefix caching is turned off for
    a model without Mamba prefix caching (Qwen3-Next, Qwen3.5); from 0.15 it runs in 'align'
    mode, which 0.15 and 0.16 refuse with speculative decoding."""
    if not options.prefix_caching or not options.since("0.15"):
        return False
    if options.num_spec and not options.since("0.17"):
        raise KVSizingError("%snum_speculative_tokens: vLLM %s refuses speculative decoding "
                            "with prefix caching on a GDN hybrid (\"Mamba cache mode 'align' is "
                            "currently not compatible with speculative decoding\"); set "
                            "enable_prefix_caching: false or use 0.17 or later"
                            % (_prefix(options.seat), options.release["release"]))
    return True


def _gdn_kernel_alignment(model, options, backend, block_size):
    """The block multiple the attention block of a GDN hybrid is rounded to: from 0.20 the
    platform's max(smallest kernel block, block size); before, HybridAttentionMambaModelConfig's
    16, which 0.11 to 0.17 raise to 32 on Blackwell (SM100) for FlashInfer's 256-wide heads."""
    if options.since("0.20"):
        return max(min(backend.bases()), block_size)
    head_size = next(layer for layer in model["layers"]
                     if layer["kind"] != "linear_attention")["head_size"]
    if options.since("0.11") and not options.since("0.18") and options.sm // 10 == 10 \
            and head_size == 256:
        return 32
    return 16


def _gdn_checkpoint_alignment(model, options):
    """qwen_gdn_linear_attn._resolve_gdn_prefill_backend (0.33): FlashInfer's GDN prefill (SM90,
    or SM100/SM120 with 128-wide keys on CUDA 13, which vLLM 0.33's cu13 wheel is) checkpoints
    mid-prefill states every 64 tokens (gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)."""
    if not options.gdn_prefix_caching or not options.since("0.33"):
        return None
    family = options.sm // 10
    if family == 9 or (family in (10, 12) and model["linear_attention"]["key_head_dim"] == 128):
        return 64
    return None


def _mamba_state_bytes(model, options):
    """MambaStateShapeCalculator.gated_delta_net_state_shape + gated_delta_net_state_dtype
    (which reads --mamba-ssm-cache-dtype from 0.17; before, both states take the conv dtype)."""
    linear, tp = model["linear_attention"], options.tp
    conv_dim = (2 * linear["num_key_heads"] * linear["key_head_dim"]
                + linear["num_value_heads"] * linear["value_head_dim"]) // tp
    conv_bytes = options.model_dtype_bytes if options.mamba_cache_dtype == "auto" \
        else _DTYPE_BYTES[options.mamba_cache_dtype]
    ssm_dtype = options.mamba_ssm_cache_dtype if options.since("0.17") else "auto"
    if ssm_dtype == "auto" and model["mamba_ssm_dtype"]:
        ssm_dtype = model["mamba_ssm_dtype"]  # Qwen3.5's config check (0.17 on): its mamba_ssm_dtype
    ssm_bytes = conv_bytes if ssm_dtype == "auto" else _DTYPE_BYTES[ssm_dtype]
    conv = (linear["conv_kernel"] - 1 + options.num_spec) * conv_dim * conv_bytes
    ssm = (linear["num_value_heads"] // tp) * linear["value_head_dim"] \
        * linear["key_head_dim"] * ssm_bytes
    return conv + ssm


def _block_size(model, options, backend, attn_per_token):
    """Platform.update_block_size_for_backend: phase 1 (backend preference unless --block-size)
    and phase 2 (_align_hybrid_block_size for Mamba hybrids). Returns (block size, mamba page
    padding or None, mamba state bytes)."""
    if options.cpu:
        return options.user_block_size or _CPU_BLOCK_SIZE, None, 0
    if model["mla"] and not options.since("0.18"):
        return forced_mla_block(options, mla_forcing_backend(options, model)), None, 0
    block_size = options.user_block_size or backend.preferred_block_size(16)
    if block_size % min(backend.bases()):
        raise options.error("block_size", "a multiple of %d (the %s backend's kernel block)"
                            % (min(backend.bases()), backend.name), block_size)
    if model["attention"] != "gated_delta_net":
        return block_size, None, 0
    state_bytes = _mamba_state_bytes(model, options)
    kernel_block = min(backend.bases())
    # Attention blocks must hold the whole Mamba state per page, start on a kernel block and,
    # in align mode, on a prefill checkpoint boundary.
    alignment = math.lcm(_gdn_kernel_alignment(model, options, backend, block_size),
                         _gdn_checkpoint_alignment(model, options) or 1)
    attn_block = alignment * _cdiv(state_bytes, alignment * attn_per_token)
    if options.since("0.20"):  # the platform's alignment also rounds to a kernel block
        attn_block = kernel_block * _cdiv(attn_block, kernel_block)
    block_size = max(block_size, attn_block)
    padded = block_size * attn_per_token
    return block_size, (padded if padded != state_bytes else None), state_bytes


def _layer_specs(model, options, max_model_len):
    """One spec per layer that owns a cache, as the model's attention layers report them."""
    if options.num_spec and model["attention"] != "gated_delta_net":
        raise options.error("num_speculative_tokens", "0: speculative decoding is modelled only "
                            "for Qwen3-Next/Qwen3.5 MTP", options.num_spec)
    backend = select_backend(options, model)
    if not options.since("0.11"):
        check_0_10_kernels(options, backend)
    stride_base = backend.stride_alignment_base()
    attention = [layer for layer in model["layers"] if layer["kind"] != "linear_attention"]
    reference = attention[0]
    kv_heads_rank = 1 if model["mla"] else max(1, reference["num_kv_heads"] // options.tp)
    attn_per_token = kv_heads_rank * (reference["head_size"] + reference["head_size_v"]) \
        * options.kv_bytes
    block_size, mamba_padded, state_bytes = _block_size(model, options, backend, attn_per_token)
    gdn_alignment = _gdn_checkpoint_alignment(model, options) if state_bytes else None
    if options.gdn_prefix_caching:  # 'align' mode
        mamba_pages = 2 + options.num_spec + (1 if gdn_alignment else 0)
    else:  # one state per request; the draft tokens' states count from 0.15
        mamba_pages = 1 + (options.num_spec if options.since("0.15") else 0)
    specs = []
    layers = list(model["layers"])
    if options.num_spec:  # MTP drafter layers: full attention, same geometry as the target's
        layers += [dict(reference, draft=True)] * model["mtp_layers"]
    for layer in layers:
        if "kv_shared_with" in layer:
            continue  # attn_utils.get_kv_cache_spec: KV-sharing layers own no cache
        if layer["kind"] == "linear_attention":
            specs.append(_Spec("mamba", block_size if options.gdn_prefix_caching else max_model_len,
                               page_padded=mamba_padded, state_bytes=state_bytes,
                               mamba_pages=mamba_pages))
            continue
        kv_heads = 1 if layer["kind"] == "mla" else max(1, layer["num_kv_heads"] // options.tp)
        spec = _Spec("mla" if layer["kind"] == "mla" else "full", block_size, kv_heads,
                     layer["head_size"], layer["head_size_v"], options.kv_bytes,
                     stride_base=stride_base)
        if layer["sliding_window"]:
            spec = spec.replaced(kind="sliding", block_size=_sliding_block_size(backend, spec, options),
                                 window=layer["sliding_window"])
        specs.append(spec)
    return specs, block_size, backend


def _sliding_block_size(backend, spec, options):
    """vLLM's attention.py Attention.get_kv_cache_spec: a sliding layer's block size is the cache's
    before 0.25; then the backend's smallest kernel block; from 0.30 the largest kernel block
    whose page fits the full block's page."""
    if not options.since("0.25"):
        return spec.block_size
    if not options.since("0.30"):
        return min(backend.fixed) if backend.fixed else backend.multiple_of
    return backend.largest_block_within(spec.per_token_bytes, spec.per_token_bytes * spec.block_size,
                                        spec.block_size)


def _promote_sliding(specs, model, options):
    """unify_hybrid_kv_cache_specs: with the hybrid manager off, sliding layers are allocated
    as full attention (same page; from 0.27 the full layers' block size, before their own, so
    that a sliding block size of its own leaves the layers of two types and fails the boot)."""
    if any(spec.kind == "mamba" for spec in specs):
        raise options.error("disable_hybrid_kv_cache_manager", "false for a hybrid Mamba "
                            "model (vLLM cannot promote its layers to one type)", True)
    if not any(spec.kind == "sliding" for spec in specs) or \
            not any(spec.kind in ("full", "mla") for spec in specs):
        return specs
    full_blocks = {spec.block_size for spec in specs if spec.kind in ("full", "mla")}
    block = full_blocks.pop() if len(full_blocks) == 1 and options.since("0.27") else None
    return [spec.replaced(kind="full", block_size=block or spec.block_size, window=spec.window)
            if spec.kind == "sliding" else spec for spec in specs]


def _max_len_limit(model, release, seat):
    """The release's limit on max_model_len (describe_model's ``max_len_limits``), or the
    one-line error of a config that release cannot boot."""
    version = parse_version(release["release"])
    limit = [entry for entry in model["max_len_limits"] if parse_version(entry["from"]) <= version][-1]
    if "error" in limit:
        raise KVSizingError("%smodel config field %s; vLLM %s cannot boot it"
                            % (_prefix(seat), limit["error"], release["release"]))
    return limit


def _release_head_size(model, release, seat):
    """The model with the attention head size the release's model file builds (describe_model's
    ``head_size_reads``), or the one-line error of a config whose weights that file cannot load."""
    version = parse_version(release["release"])
    read = [entry for entry in model["head_size_reads"] if parse_version(entry["from"]) <= version][-1]
    if "error" in read:
        raise KVSizingError("%smodel config field %s; vLLM %s cannot load it"
                            % (_prefix(seat), read["error"], release["release"]))
    built = next(layer["head_size"] for layer in model["layers"] if layer["kind"] != "linear_attention")
    if read["head_size"] == built:
        return model
    layers = [dict(layer, head_size=read["head_size"], head_size_v=read["head_size"])
              if layer["kind"] != "linear_attention" and layer["head_size"] == built else layer
              for layer in model["layers"]]
    return dict(model, layers=layers)


def _resolve_max_model_len(model, max_model_len, seat, release):
    if max_model_len == "auto" and parse_version(release["release"]) < (0, 14, 0):
        raise KVSizingError("%smax_model_len: \"auto\" is vLLM's auto-fit, which came in 0.14; vLLM %s "
                            "needs a length" % (_prefix(seat), release["release"]))
    derived = _max_len_limit(model, release, seat)["limit"]
    if max_model_len in ("published", "auto"):
        if model["published_max_model_len"] is None:
            raise KVSizingError("%smax_model_len: the config names no context window "
                                "(max_position_embeddings), so %r cannot be resolved"
                                % (_prefix(seat), max_model_len))
        return model["published_max_model_len"] if max_model_len == "published" else derived
    if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 1:
        raise KVSizingError("%smax_model_len: expected a positive integer, \"published\" or "
                            "\"auto\", got %r" % (_prefix(seat), max_model_len))
    return max_model_len


def _long_len_error(model, max_model_len, options):
    """config/model.py _get_and_verify_max_len: a length beyond the config's window fails the
    boot unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."""
    derived = options.max_len_limit["limit"]
    if options.allow_long or max_model_len <= derived:
        return None
    shown = repr(float(derived)) if options.max_len_limit["is_float"] else str(derived)
    return ("User-specified max_model_len (%d) is greater than the derived max_model_len "
            "(%s=%s or model_max_length=None in model's config.json). To allow overriding this "
            "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. %s"
            % (max_model_len, model["max_len_key"], shown, _LONG_LEN_WARNING))


def _describe(config, seat):
    try:
        return describe_model(config, seat=seat)
    except ModelConfigError:
        raise
    except (TypeError, AttributeError, KeyError) as exc:  # a shape no field check caught
        raise ModelConfigError("%smodel config: unexpected structure (%s: %s)"
                               % (_prefix(seat), type(exc).__name__, exc)) from None


def _prepare(config, max_model_len, seat, options):
    described = isinstance(config, dict) and "derived_max_model_len" in config
    model = config if described else _describe(config, seat)
    requested_len = max_model_len
    release = _release(options.get("vllm_version", LATEST), options.get("allow_nearest_vllm_release", False), seat)
    model = _release_head_size(model, release, seat)
    max_model_len = _resolve_max_model_len(model, max_model_len, seat, release)
    opts = _Options(model, max_model_len, seat, **options)
    _check_tensor_parallel(model, opts)
    layer_specs, block_size, backend = _layer_specs(model, opts, max_model_len)
    specs = _promote_sliding(layer_specs, model, opts) \
        if opts.disable_hma or model["chunked_local_attention"] else layer_specs
    if not specs:
        raise KVSizingError("%sthe model has no layer that holds a KV cache" % _prefix(seat))
    groups, uniform_type, layout_error = _group(specs, opts, specs is not layer_specs)
    per_token = sum(spec.per_token_bytes for spec in specs if spec.kind != "mamba")
    plan = _Plan(groups, uniform_type, opts.in_flight_tokens,
                 min(group.spec.block_size for group in groups),
                 any(spec.kind == "mamba" for spec in specs), per_token, layer_specs,
                 "groups" if opts.since("0.19") else "first_group" if opts.since("0.14") else "layers",
                 layout_error)
    return model, opts, plan, backend, requested_len, max_model_len


def _result(model, opts, plan, backend, budget, requested_len, max_model_len):
    errors = []
    long_error = _long_len_error(model, max_model_len, opts)
    if long_error:
        errors.append(long_error)
    # the groups are built (and a layout refused) before the admission check from 0.14, after it before
    if plan.layout_error and opts.since("0.14"):
        errors.append(plan.layout_error)
    check_memory = budget - opts.null_blocks_held * plan.bytes_per_block
    estimated = None
    if requested_len == "auto" and not long_error:
        fitted = plan.estimate_max_model_len(check_memory, max_model_len) \
            if check_memory > 0 else 0
        if fitted <= 0:
            errors.append("Cannot auto-fit max_model_len: not enough GPU memory available to "
                          "serve even a single token. Try increasing `gpu_memory_utilization`.")
        else:
            max_model_len = min(max_model_len, fitted)
    if check_memory <= 0:
        errors.append(_no_memory_error(opts))
    else:
        needed = plan.needed(max_model_len)
        if needed > check_memory:
            estimated = plan.estimate_max_model_len(check_memory, max_model_len)
            errors.append(_admission_error(opts, max_model_len, needed, check_memory, estimated))
    if plan.layout_error and not opts.since("0.14"):
        errors.append(plan.layout_error)
    num_blocks = budget // plan.bytes_per_block
    pages = plan.pages_per_request(max_model_len, for_capacity=True)
    concurrency = num_blocks / pages
    # 0.20 counts the tokens a full pool holds at this length; before, blocks per group.
    tokens = int(concurrency * max_model_len) if opts.since("0.20") \
        else num_blocks // len(plan.groups) * plan.block_size
    capacity_line = ("{} KV cache size: {:,} tokens, Maximum concurrency for {:,} tokens per request: "
                     "{:.2f}x".format("CPU" if opts.cpu else "GPU", tokens, max_model_len, concurrency))
    # 0.20 refuses a FULL decode graph with more sequences than Mamba blocks (0.18 and 0.19 cap
    # the capture sizes instead)
    if not errors and plan.has_mamba and not opts.enforce_eager and opts.since("0.20") \
            and opts.max_num_seqs > num_blocks:
        errors.append(
            "max_num_seqs (%d) exceeds available Mamba cache blocks (%d). Each decode sequence "
            "requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower "
            "max_num_seqs to at most %d or increase gpu_memory_utilization."
            % (opts.max_num_seqs, num_blocks, num_blocks))
    return {
        "kv_cache_memory_bytes": budget,
        "block_size": plan.block_size,
        "bytes_per_block": plan.bytes_per_block,
        "num_blocks": num_blocks,
        "kv_cache_tokens": tokens,
        "max_concurrency": float("%.2f" % concurrency),
        "max_concurrency_exact": concurrency,
        "boot_ok": not errors,
        "boot_error": errors[0] if errors else None,
        "first_request_error": _first_request_error(model, opts),
        "per_token_kv_bytes": plan.per_token_kv_bytes,
        "groups": [_group_summary(group, max_model_len, plan) for group in plan.groups],
        "vllm_args": ["--kv-cache-memory-bytes", str(budget), "--max-model-len",
                      str(max_model_len)],
        "max_model_len": max_model_len,
        "published_max_model_len": model["published_max_model_len"],
        "blocks_per_request": pages,
        "capacity_line": capacity_line,
        "estimated_max_model_len": estimated,
        "kv_cache_dtype": opts.kv_cache_dtype,
        "tensor_parallel_size": opts.tp,
        "attention_backend": backend.name,
        "gpu": opts.gpu,
        "max_num_batched_tokens": opts.max_num_batched_tokens,
        "max_num_seqs": opts.max_num_seqs,
        "vllm_version": opts.release["version"],
        "vllm_release": opts.release["release"],
    }


def _first_request_error(model, opts):
    """What kills an engine that booted at its first request: the CPU attention kernel's refusal
    of a head size it does not compute (KV planning takes any)."""
    head_size = next(layer for layer in model["layers"] if layer["kind"] != "linear_attention")["head_size"]
    if opts.cpu and head_size not in CPU_ATTN_HEAD_SIZES:
        return "Unsupported CPU attention configuration: head_dim=%d" % head_size
    return None


def _group_summary(group, max_model_len, plan):
    kind = {"full": "full_attention", "mla": "mla", "sliding": "sliding_window",
            "mamba": "mamba"}[group.spec.kind]
    summary = {"kind": kind, "layers": len(group.layer_specs),
               "block_size": group.spec.block_size, "page_size_bytes": group.spec.page_size,
               "pages_per_request": group.spec.pages_per_request(max_model_len,
                                                                 plan.in_flight_tokens)}
    if group.spec.window:
        summary["sliding_window"] = group.spec.window
    return summary


def _budget(value, seat, name="kv_cache_memory_bytes"):
    try:
        return to_bytes(value, "%s%s" % (_prefix(seat), name))
    except SizeError as exc:
        raise KVSizingError(str(exc)) from None


def evaluate_kv_budget(config, max_model_len, kv_cache_memory_bytes, seat=None, **options):
    """What vLLM (0.33, or ``vllm_version``) does with this per-GPU budget: blocks, tokens,
    concurrency, boot verdict.

    ``config`` is a config.json dict (or describe_model's result); ``max_model_len`` an int,
    ``"published"`` or ``"auto"`` (vLLM's auto-fit); the budget an int or a size string.
    ``options``: kv_cache_dtype, tensor_parallel_size, block_size, enable_prefix_caching,
    max_num_batched_tokens, max_num_seqs (None = vLLM's default for ``gpu``), gpu,
    num_speculative_tokens (MTP), enforce_eager, mamba_cache_dtype, mamba_ssm_cache_dtype,
    disable_hybrid_kv_cache_manager, allow_long_max_model_len, vllm_version,
    allow_nearest_vllm_release.
    """
    budget = _budget(kv_cache_memory_bytes, seat)
    model, opts, plan, backend, requested, length = _prepare(config, max_model_len, seat, options)
    return _result(model, opts, plan, backend, budget, requested, length)


def _blocks_for_factor(kv_factor, pages):
    """The fewest blocks whose vLLM concurrency (blocks / pages, a float) reaches kv_factor."""
    blocks = max(1, math.ceil(kv_factor * pages))
    while blocks / pages < kv_factor:
        blocks += 1
    while blocks > 1 and (blocks - 1) / pages >= kv_factor:
        blocks -= 1
    return blocks


def size_kv_budget(config, max_model_len, kv_factor=KV_FACTOR, kv_round_to=KV_ROUND_TO,
                   seat=None, demand_tokens=None, **options):
    """The sizing rule: the smallest per-GPU budget that boots and whose maximum concurrency at
    ``max_model_len`` is at least ``kv_factor``, rounded up to a multiple of ``kv_round_to``.

    Returns evaluate_kv_budget's dict for that budget, plus ``kv_factor``, ``kv_round_to`` and
    ``min_kv_cache_memory_bytes`` (the unrounded minimum).
    """
    if isinstance(kv_factor, bool) or not isinstance(kv_factor, (int, float)) or not 0 < kv_factor <= KV_FACTOR_MAX:
        raise KVSizingError("%skv_factor: expected a finite number > 0 and <= %d, got %r"
                            % (_prefix(seat), KV_FACTOR_MAX, kv_factor))
    round_to = _budget(kv_round_to, seat, "kv_round_to")
    if round_to < 1:
        raise KVSizingError("%skv_round_to: expected a positive size, got %r"
                            % (_prefix(seat), kv_round_to))
    if max_model_len == "auto":
        raise KVSizingError("%smax_model_len: \"auto\" fits the length to a given budget; to "
                            "size a budget give a length or \"published\"" % _prefix(seat))
    model, opts, plan, backend, requested, length = _prepare(config, max_model_len, seat, options)
    long_error = _long_len_error(model, length, opts)
    if long_error:
        raise KVSizingError("%smax_model_len: %s" % (_prefix(seat), long_error))
    if plan.layout_error:
        raise KVSizingError("%svllm_version: vLLM %s cannot run this model at any budget: %s"
                            % (_prefix(seat), opts.release["version"], plan.layout_error))
    # the pool's blocks: enough for the factor's requests at the context, or for the demand's tokens
    # counted as a seat's usage counts them (blocks in use x block size, over every group)
    wanted = _blocks_for_factor(kv_factor, plan.pages_per_request(length, for_capacity=True)) if demand_tokens is None \
        else _cdiv(demand_tokens, plan.block_size) + opts.null_blocks_held
    blocks = max(_cdiv(plan.needed(length), plan.bytes_per_block) + opts.null_blocks_held, wanted)
    if plan.has_mamba and not opts.enforce_eager:
        blocks = max(blocks, opts.max_num_seqs)
    minimum = blocks * plan.bytes_per_block
    result = _result(model, opts, plan, backend, round_up(minimum, round_to), requested, length)
    result.update(kv_factor=kv_factor if demand_tokens is None else None, kv_round_to=round_to,
                  min_kv_cache_memory_bytes=minimum)
    return result


def size_kv_for_demand(config, max_model_len, demand_tokens, kv_round_to=KV_ROUND_TO, seat=None, **options):
    """Sizing from measured demand: the smallest budget whose pool has a block for every
    ``demand_tokens`` token at once, counted as vLLM counts a seat's KV in use (its
    ``kv_cache_usage_perc`` x blocks x block size, every group's blocks alike), and never less
    than one request of ``max_model_len`` (what vLLM needs to boot), rounded up to a multiple
    of ``kv_round_to``. Returns size_kv_budget's dict plus ``demand_tokens``."""
    if isinstance(demand_tokens, bool) or not isinstance(demand_tokens, int) or demand_tokens < 0:
        raise KVSizingError("%sdemand_tokens: expected a count of tokens >= 0, got %r" % (_prefix(seat), demand_tokens))
    result = size_kv_budget(config, max_model_len, kv_round_to=kv_round_to, seat=seat, demand_tokens=demand_tokens,
                            **options)
    result["demand_tokens"] = demand_tokens
    return result


def kv_budget(config, max_model_len, kv_cache_memory_bytes=None, kv_factor=KV_FACTOR,
              kv_round_to=KV_ROUND_TO, seat=None, **options):
    """kv_budget's result for a config.json (a dict, or a path to it or to its model
    directory): the rule's budget sized when ``kv_cache_memory_bytes`` is None, else that budget
    evaluated. The module on a GPU host and the filter on the controller both call this."""
    config = load_model_config(config, seat=seat)
    if isinstance(max_model_len, str) and max_model_len.strip().isdigit():
        # Ansible hands key=value arguments over as strings: digits mean a length.
        max_model_len = int(max_model_len)
    if kv_cache_memory_bytes is None:
        return size_kv_budget(config, max_model_len, kv_factor=kv_factor, kv_round_to=kv_round_to,
                              seat=seat, **options)
    return evaluate_kv_budget(config, max_model_len, kv_cache_memory_bytes, seat=seat, **options)
