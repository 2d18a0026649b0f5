"""vLLM 0.33's KV cache planning, re-derived for the fake from vLLM 0.33's own planning code in
its wheel: per-layer pages, the hybrid block-size
alignment, grouping, bytes per block, the admission check with its null block, the capacity
line, the Mamba max_num_seqs check. Every figure is per GPU (tensor-parallel rank).

Modelled: full attention (MHA/GQA, MLA), sliding window (Gemma 3 and 4, gpt-oss; Gemma 4's
global layers with their own head size), and Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5).
Anything else is refused by name rather than guessed.
"""

from __future__ import annotations

import math

GIB = 2 ** 30
DEFAULT_BLOCK_SIZE = 16
GDN_CHECKPOINT_ALIGNMENT = 64   # FlashInfer GDN prefill (SM90; SM100/120 with CUDA 13)
HOPPER = 90
# torch.cuda.get_device_capability of the cards the twin simulates, by name (major*10+minor):
# the backends vLLM picks, and so its block sizes and alignments, follow it.
_CAPABILITIES = (("H100", 90), ("H200", 90), ("B200", 100), ("RTX PRO 6000", 120), ("A100", 80), ("L40", 89))


def capability(card_name: str) -> int:
    """The compute capability of a card by its name; Hopper's for a card the twin does not know."""
    return next((sm for part, sm in _CAPABILITIES if part in card_name), HOPPER)


MLA_HEAD = "mla"
_KV_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1}
_STATE_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float": 4, "half": 2}


class PlanError(Exception):
    """vLLM refuses the budget; `exc_type` and the message are what it raises."""

    def __init__(self, exc_type: str, message: str):
        super().__init__(message)
        self.exc_type = exc_type


class NotModelled(Exception):
    """A model or option this fake does not size (said plainly instead of guessed)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def format_gib(num_bytes: int) -> str:
    return "%s" % round(num_bytes / GIB, 2)


class Layout:
    """The per-rank KV layout of a model: block size, groups and their pages."""

    def __init__(self, model, kv_cache_dtype="auto", tensor_parallel_size=1, block_size=None,
                 enable_prefix_caching=True, max_num_batched_tokens=8192, sm=HOPPER):
        text = model.text
        self.model = model
        self.sm = sm
        self.tp = tensor_parallel_size
        self.kv_dtype_bytes = self._kv_dtype_bytes(model, kv_cache_dtype)
        self.prefix_caching = enable_prefix_caching
        self.in_flight_tokens = 2 * max_num_batched_tokens   # async scheduling: 2 batches
        kinds = self._layer_kinds(text)
        self.mla = bool(text.get("kv_lora_rank"))
        # the latent head width; FlashMLA and FlashAttention MLA serve only DeepSeek's 576
        self.mla_head = int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim", 64)) if self.mla else 0
        self.token_bytes = self._token_bytes(text, "full")
        self.window = int(text.get("sliding_window") or 0)
        self.mamba_page = self._gdn_page(text) if "mamba" in kinds else 0
        self.aligned_block_size = None
        self.block_size = self._block_size(block_size, kv_cache_dtype)
        self._unify_pages(text, kinds)
        self.groups = self._groups(kinds)
        self.group_size = max(len(group[1]) for group in self.groups)
        self.bytes_per_block = self.group_size * self.page
        self.has_mamba = "mamba" in kinds

    # -- geometry --------------------------------------------------------------------------
    @staticmethod
    def _kv_dtype_bytes(model, kv_cache_dtype):
        if kv_cache_dtype == "auto":
            return 1 if model.checkpoint_kv_fp8 else model.dtype_bytes
        if kv_cache_dtype not in _KV_DTYPE_BYTES:
            raise NotModelled("--kv-cache-dtype %s" % kv_cache_dtype)
        return _KV_DTYPE_BYTES[kv_cache_dtype]

    @staticmethod
    def _layer_kinds(text):
        layers = int(text["num_hidden_layers"])
        names = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding",
                 "linear_attention": "mamba"}
        if text.get("layer_types"):
            kinds = []
            for kind in text["layer_types"][:layers]:
                if kind not in names:
                    raise NotModelled("layer type %r" % kind)
                kinds.append(names[kind])
        elif text.get("full_attention_interval"):
            interval = int(text["full_attention_interval"])
            kinds = ["full" if (i + 1) % interval == 0 else "mamba" for i in range(layers)]
        elif text.get("sliding_window_pattern"):
            pattern = int(text["sliding_window_pattern"])
            kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
        elif text.get("sliding_window") and text.get("use_sliding_window", True) \
                and text.get("model_type") not in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
            kinds = ["sliding"] * layers
        else:
            kinds = ["full"] * layers
        if "mamba" in kinds and not text.get("linear_num_value_heads"):
            raise NotModelled("a Mamba layer type other than Gated DeltaNet")
        return kinds

    def _token_bytes(self, text, kind):
        """KV bytes of one token in one layer of this kind, on one rank."""
        if self.mla:
            # MLAAttentionSpec: one latent head, not split across ranks
            return (int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim", 64))) * self.kv_dtype_bytes
        kv_heads, head_dim = self.model.num_kv_heads, self.model.head_dim
        if kind == "full" and text.get("global_head_dim"):
            # Gemma 4: global layers have their own head size, and with K = V their own KV heads
            head_dim = int(text["global_head_dim"])
            if text.get("attention_k_eq_v") and text.get("num_global_key_value_heads"):
                kv_heads = int(text["num_global_key_value_heads"])
        return 2 * max(1, kv_heads // self.tp) * head_dim * self.kv_dtype_bytes

    def _unify_pages(self, text, kinds):
        """kv_cache_planning.py unify_kv_cache_spec_page_size: a page that divides the largest
        gets a proportionally larger block; others (and Mamba state) are padded to it."""
        pages = {kind: self.block_size * self._token_bytes(text, kind)
                 for kind in set(kinds) if kind != "mamba"}
        self.page = max(pages.values())
        self.kind_block_size = {
            kind: self.block_size * (self.page // page) if self.page % page == 0 else self.block_size
            for kind, page in pages.items()}

    def _gdn_page(self, text):
        """Gated DeltaNet state per layer (model_executor/layers/mamba/mamba_utils.py)."""
        nk, nv = int(text["linear_num_key_heads"]), int(text["linear_num_value_heads"])
        dk, dv = int(text["linear_key_head_dim"]), int(text["linear_value_head_dim"])
        conv_bytes = self.model.dtype_bytes
        ssm_bytes = _STATE_DTYPE_BYTES.get(str(text.get("mamba_ssm_dtype") or ""), conv_bytes)
        conv = (int(text.get("linear_conv_kernel_dim", 4)) - 1) * (2 * nk * dk + nv * dv) // self.tp
        ssm = (nv // self.tp) * dv * dk
        return conv * conv_bytes + ssm * ssm_bytes

    def _block_size(self, user_block_size, kv_cache_dtype):
        if self.mla and kv_cache_dtype.startswith("fp8") and self.mla_head == 576 \
                and (user_block_size or 64) % 64 == 0 and self.sm == HOPPER:
            block = user_block_size or 64    # FLASHMLA on Hopper: FLASH_ATTN_MLA has no fp8
        else:  # FlashAttention MLA, or Triton MLA for other heads or a block FlashMLA cannot split
            block = user_block_size or DEFAULT_BLOCK_SIZE
        if not self.mamba_page:
            return block
        # platforms/interface.py _align_hybrid_block_size
        alignment = max(DEFAULT_BLOCK_SIZE, block)
        if self.mla:
            alignment = max(alignment, 128)
        if self.prefix_caching and self._gdn_checkpoints():
            alignment = alignment * GDN_CHECKPOINT_ALIGNMENT // math.gcd(alignment, GDN_CHECKPOINT_ALIGNMENT)
        attention_block = alignment * cdiv(self.mamba_page, alignment * self.token_bytes)
        attention_block = DEFAULT_BLOCK_SIZE * cdiv(attention_block, DEFAULT_BLOCK_SIZE)
        self.aligned_block_size = attention_block if block < attention_block else None
        return max(block, attention_block)

    def _gdn_checkpoints(self):
        """FlashInfer's GDN prefill, which checkpoints every 64 tokens, runs on SM90, and on
        SM100/SM120 for 128-wide keys; other cards (an L40S) prefill with Triton."""
        family = self.sm // 10
        return family == 9 or (family in (10, 12) and int(self.model.text["linear_key_head_dim"]) == 128)

    def _groups(self, kinds):
        """v1/core/kv_cache_planning.py get_kv_cache_groups: one group when every layer has
        the same spec; else buckets split into groups of (about) the smallest bucket's size."""
        buckets = {}
        for index, kind in enumerate(kinds):
            buckets.setdefault(kind, []).append(index)
        if len(buckets) == 1:
            kind, layers = next(iter(buckets.items()))
            return [(kind, layers)]
        sizes = [len(layers) for layers in buckets.values()]
        group_size = max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)
        groups = []
        for kind, layers in buckets.items():
            count = cdiv(len(layers), group_size)
            groups += [(kind, layers[i::count]) for i in range(count)]
        return groups

    # -- per request -----------------------------------------------------------------------
    def pages_per_request(self, kind, max_model_len):
        if kind == "full":
            return cdiv(max_model_len, self.kind_block_size[kind])
        if kind == "sliding":
            return cdiv(min(self.window - 1 + self.in_flight_tokens, max_model_len),
                        self.kind_block_size[kind]) + 1
        if not self.prefix_caching:
            return 1
        return 3 if self._gdn_checkpoints() else 2   # mamba: align mode keeps 2 (+ a checkpoint)

    def blocks_per_request(self, max_model_len):
        return sum(self.pages_per_request(group[0], max_model_len) for group in self.groups)

    def needed_bytes(self, max_model_len):
        return self.bytes_per_block * self.blocks_per_request(max_model_len)


def longest_fitting_len(layout: Layout, budget: int, limit: int, null_blocks: int = 1) -> int:
    """The longest max_model_len <= limit whose one request fits next to the null block
    (kv_cache_planning.py estimate_max_model_len / _auto_fit_max_model_len); 0 if none."""
    available = budget - null_blocks * layout.bytes_per_block
    low, high, best = 1, limit, 0
    if available <= 0 or layout.needed_bytes(1) > available:
        return 0
    while low <= high:
        mid = (low + high) // 2
        if layout.needed_bytes(mid) <= available:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best


class Plan:
    """What vLLM computes from a budget: blocks, capacity, or the error it raises. ``release``
    is the version it plays, where the figures of older releases differ: the admission check
    keeps no null block back before 0.29, and before 0.20 the token count is the blocks per group
    times the block size (v1/core/kv_cache_utils.py of each release)."""

    def __init__(self, layout: Layout, budget: int, max_model_len: int, max_num_seqs: int,
                 enforce_eager: bool, release=(0, 33, 0)):
        self.layout, self.release = layout, release
        self.null_blocks = 1 if release >= (0, 29) else 0
        self.budget = budget
        self.max_model_len = max_model_len
        self.num_blocks = budget // layout.bytes_per_block if budget > 0 else 0
        self._admit()
        per_request = layout.blocks_per_request(max_model_len)
        self.max_concurrency = self.num_blocks / per_request
        self.tokens = int(self.max_concurrency * max_model_len) if release >= (0, 20) \
            else self.num_blocks // len(layout.groups) * layout.block_size
        self.kv_bytes = self.num_blocks * layout.bytes_per_block
        self.mamba_error = None
        if layout.has_mamba and not enforce_eager and max_num_seqs > self.num_blocks:
            self.mamba_error = PlanError("ValueError", (
                "max_num_seqs (%d) exceeds available Mamba cache blocks (%d). Each decode sequence "
                "requires one Mamba cache block, so CUDA graph capture cannot proceed. Please "
                "lower max_num_seqs to at most %d or increase gpu_memory_utilization."
                % (max_num_seqs, self.num_blocks, self.num_blocks)))

    def _admit(self):
        """kv_cache_planning.py _check_enough_kv_cache_memory, one null block held back (0.29)."""
        layout = self.layout
        available = self.budget - self.null_blocks * layout.bytes_per_block
        if available <= 0:
            raise PlanError("ValueError", (
                "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine (this flag also controls CPU memory reservation on "
                "the CPU backend, despite its name). See "
                "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."))
        needed = layout.needed_bytes(self.max_model_len)
        if needed <= available:
            return
        estimated = longest_fitting_len(layout, self.budget, self.max_model_len, self.null_blocks)
        estimate = ("Based on the available memory, the estimated maximum model length is %d. "
                    % estimated) if estimated > 0 else ""
        raise PlanError("ValueError", (
            "To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is "
            "needed, which is larger than the available KV cache memory (%s GiB). %sTry increasing "
            "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
            "decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
            % (self.max_model_len, format_gib(needed), format_gib(available), estimate)))

    def capacity_lines(self) -> list:
        """One line since 0.28; before, the size and the concurrency on lines of their own."""
        size = "GPU KV cache size: {:,} tokens".format(self.tokens)
        concurrency = "Maximum concurrency for {:,} tokens per request: %.2fx".format(self.max_model_len) \
            % self.max_concurrency
        return [size + ", " + concurrency] if self.release >= (0, 28) else [size, concurrency]
