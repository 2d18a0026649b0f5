# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The attention backend a seat's vLLM release runs its model with, as KV planning sees it.

Mirrors each modelled release's selection (``platforms/cuda.py`` ``get_attn_backend_cls`` and
the backends' ``validate_configuration``; ``platforms/cpu.py`` for the CPU platform): which
backend takes the first attention layer's heads, the cache dtype, the attention sinks and the
block size, on which card; and what each backend's kernels take (``_Backend``: its kernel block
sizes). kv.py asks for the backend (``select_backend``), for what 0.10's kernels refuse at boot
(``check_0_10_kernels``) and, before 0.18, for the block an MLA backend forces
(``mla_forcing_backend``, ``forced_mla_block``); its block sizes, page strides and sliding
blocks follow from the backend returned.

``options`` is kv.py's validated options: ``sm`` (the card's compute capability, major*10+minor),
``cpu``, ``gpu``, ``kv_cache_dtype`` (resolved), ``user_block_size``, ``release``, ``since(version)``
and ``error(name, expected, got)``; ``model`` is model_config.describe_model's description.

Pure standard library: the module and the filters share it.
"""

from __future__ import annotations

# The KV cache dtypes modelled, each with the release its --kv-cache-dtype choices took it in
# (config/cache.py CacheDType): what the backends below take or refuse.
KV_CACHE_DTYPES_FROM = {"auto": "0.10", "bfloat16": "0.11", "float16": "0.18", "fp8": "0.10",
                        "fp8_e4m3": "0.10", "fp8_e5m2": "0.10"}
KV_CACHE_DTYPES = tuple(KV_CACHE_DTYPES_FROM)

# vLLM's CPU platform (v1/attention/backends/cpu_attn.py, modelled for 0.32): the heads its
# attention kernel computes (another boots, and the engine dies at its first request) ...
CPU_ATTN_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
# ... and its cache dtypes: its fp8 caches need AVX-512 or AMX, which the machines the model is
# checked on lack.
_CPU_KV_CACHE_DTYPES = ("auto",)


class _Backend:
    """An attention backend as KV planning sees it: its kernel block sizes.

    ``fixed`` are exact sizes (``[16, 32, 64]``); ``multiple_of`` is a ``MultipleOf(n)`` base.
    """

    def __init__(self, name, fixed=(), multiple_of=None):
        self.name, self.fixed, self.multiple_of = name, tuple(fixed), multiple_of

    def bases(self):
        return list(self.fixed) + ([self.multiple_of] if self.multiple_of else [])

    def supports(self, block_size):
        return any(block_size % base == 0 for base in self.bases())

    def preferred_block_size(self, default=16):
        return default if self.supports(default) else min(self.bases())

    def largest_block_within(self, per_token, page_budget, fallback):
        """vLLM's attention.py _largest_kernel_block_within, for sliding-window layers."""
        max_block = page_budget // per_token
        candidates = list(self.fixed)
        if self.multiple_of:
            candidates.append(max(self.multiple_of, max_block // self.multiple_of
                                  * self.multiple_of))
        if not candidates:
            return fallback
        fitting = [b for b in candidates if b * per_token <= page_budget]
        return max(fitting) if fitting else min(candidates)

    def stride_alignment_base(self):
        """worker/utils.py customize_attention_spec: fixed-size-only backends get
        ``block_stride_alignment = MultipleOf(max(sizes))``."""
        return max(self.fixed) if self.fixed and not self.multiple_of else None


_FLASH_ATTN = _Backend("FLASH_ATTN", multiple_of=16)
_FLASHINFER = _Backend("FLASHINFER", fixed=(16, 32, 64))
_TRITON_ATTN = _Backend("TRITON_ATTN", multiple_of=16)
_FLEX_ATTENTION = _Backend("FLEX_ATTENTION", fixed=(16,))  # 0.10's fallback
_FLASH_ATTN_HEADS_BEFORE_0_12 = (32, 64, 96, 128, 160, 192, 224, 256)
_FLASH_ATTN_MLA = _Backend("FLASH_ATTN_MLA", multiple_of=16)
_FLASHMLA = _Backend("FLASHMLA", fixed=(64,))
_FLASHINFER_MLA = _Backend("FLASHINFER_MLA", fixed=(32, 64))
_CUTLASS_MLA = _Backend("CUTLASS_MLA", fixed=(128,))
_TRITON_MLA = _Backend("TRITON_MLA", multiple_of=16)
_CPU_ATTN = _Backend("CPU_ATTN", multiple_of=32)


def _attention_backend_0_10(options, model):
    """0.10's CUDA platform, case by case: FlashInfer on B200 (SM100) for heads of 64, 128 and 256;
    else Triton for attention sinks off Hopper; FlashAttention for the heads it lists; FlexAttention
    otherwise (the kernels' own refusals: check_0_10_kernels)."""
    head_size = next(layer for layer in model["layers"] if layer["kind"] != "linear_attention")["head_size"]
    if options.sm == 100 and head_size in (64, 128, 256):
        return _FLASHINFER
    if model["sinks"] and options.sm != 90:
        return _TRITON_ATTN
    return _FLASH_ATTN if head_size in _FLASH_ATTN_HEADS_BEFORE_0_12 else _FLEX_ATTENTION


def check_0_10_kernels(options, backend):
    """What 0.10's attention kernels refuse at boot, its selection having not asked: FlashAttention
    an fp8 cache off Hopper (FA2) and an fp8_e5m2 one anywhere, FlexAttention any fp8 cache and
    blocks other than its 16."""
    if backend not in (_FLASH_ATTN, _FLEX_ATTENTION):
        return
    taken = ("auto", "fp8", "fp8_e4m3") if backend is _FLASH_ATTN and options.sm == 90 else ("auto",)
    release = options.release["release"]
    if options.kv_cache_dtype not in taken:
        raise options.error("kv_cache_dtype", "a KV cache dtype %s, the backend vLLM %s runs this model with on "
                            "this card, takes (%s)" % (backend.name, release, ", ".join(taken)),
                            options.kv_cache_dtype)
    if backend is _FLEX_ATTENTION and options.user_block_size not in (None, 16):
        raise options.error("block_size", "16, the one block FLEX_ATTENTION (the backend vLLM %s runs this model "
                            "with) takes" % release, options.user_block_size)


def _flash_attn_takes(options, head_size, sinks):
    """FlashAttentionBackend.validate_configuration (FA2; FA3 on Hopper; FA4 on Blackwell from 0.20,
    which brings 512-wide heads and sinks there, and fp8 caches from 0.27). Its heads: a multiple
    of 8 up to 256 from 0.12, a list of eight sizes before."""
    family, fp8 = options.sm // 10, options.kv_cache_dtype.startswith("fp8")
    block = options.user_block_size
    if head_size % 8 or head_size > 256 and not (head_size == 512 and family in (9, 10) and options.since("0.20")):
        return False
    if not options.since("0.12") and head_size not in _FLASH_ATTN_HEADS_BEFORE_0_12:
        return False
    if sinks and not (family == 9 or (family == 10 and options.since("0.20"))):
        return False
    if fp8:
        if options.kv_cache_dtype == "fp8_e5m2" and (family != 9 or options.since("0.22")):
            return False
        if family == 9 and head_size == 512 and options.since("0.27"):
            # FA4's 512-wide heads take fp8 from 0.31, in blocks of at least 64
            return options.since("0.31") and block not in (16, 32)
        if family == 10:
            return options.since("0.27") and head_size != 192 and head_size <= (128 if options.since("0.28") else 256)
        if family != 9:
            return False
    # FA4's 256-wide heads on Blackwell need blocks of 128 (0.29 on)
    return not (family == 10 and head_size == 256 and not fp8 and options.since("0.29") and block in (16, 32, 64))


def _flashinfer_takes(options, head_size, sinks):
    """FlashInferBackend.validate_configuration: heads of 64, 128, 256 (and 512 from 0.22); sinks
    through TRT-LLM on Blackwell, and from 0.28 on RTX PRO (SM120), from 0.30 on Hopper."""
    if head_size not in ((64, 128, 256, 512) if options.since("0.22") else (64, 128, 256)):
        return False
    family = options.sm // 10
    return not sinks or family == 10 or (family == 12 and options.since("0.28")) \
        or (family == 9 and options.since("0.30"))


def _attention_backend(options, model):
    """platforms/cuda.py get_attn_backend_cls for a model without MLA (0.11 on): the first of
    FlashInfer, FlashAttention, Triton on Blackwell (FlashAttention first elsewhere) that takes
    the first attention layer's heads, the cache dtype, the sinks and the block size."""
    head_size = next(layer for layer in model["layers"] if layer["kind"] != "linear_attention")["head_size"]
    takes = {_FLASH_ATTN: _flash_attn_takes, _FLASHINFER: _flashinfer_takes,
             _TRITON_ATTN: lambda options, head_size, sinks: head_size >= 32}
    priorities = (_FLASHINFER, _FLASH_ATTN, _TRITON_ATTN) if options.sm // 10 == 10 \
        else (_FLASH_ATTN, _FLASHINFER, _TRITON_ATTN)
    for backend in priorities:
        if takes[backend](options, head_size, model["sinks"]):
            return backend
    raise options.error("head_size", "an attention head size a backend of vLLM %s serves"
                        % options.release["release"], head_size)


# platforms/cuda.py _get_backend_priorities for MLA and what each MLA backend takes (its
# supports_* and kernel block sizes), from 0.18 to 0.33: every one but Triton MLA needs
# DeepSeek's 576-wide latent heads; none takes an fp8_e5m2 cache.
_MLA_PRIORITIES = {10: (_FLASHINFER_MLA, _CUTLASS_MLA, _FLASH_ATTN_MLA, _FLASHMLA, _TRITON_MLA),
                   12: (_TRITON_MLA,)}
_MLA_DEFAULT_PRIORITIES = (_FLASH_ATTN_MLA, _FLASHMLA, _FLASHINFER_MLA, _TRITON_MLA)
_MLA_FAMILY = {"FLASH_ATTN_MLA": 9, "FLASHMLA": 9, "FLASHINFER_MLA": 10, "CUTLASS_MLA": 10}


def _mla_backend_takes(backend, model, options):
    if backend is _TRITON_MLA:
        return True
    mla = model["mla"]
    if mla["kv_lora_rank"] + mla["qk_rope_head_dim"] != 576 or options.sm // 10 != _MLA_FAMILY[backend.name]:
        return False
    if options.user_block_size is not None and not backend.supports(options.user_block_size):
        return False
    if backend is _FLASH_ATTN_MLA:
        return not options.kv_cache_dtype.startswith("fp8")
    # FlashInfer MLA's nope heads: 64 or 128, and 192 from 0.19
    return backend is not _FLASHINFER_MLA or mla["qk_nope_head_dim"] in (
        (64, 128, 192) if options.since("0.19") else (64, 128))


def _mla_backend(options, model):
    """The first MLA backend of the release's CUDA priority list that takes the model (0.18 on),
    or a refusal where none does (vLLM: "No valid attention backend found")."""
    if options.kv_cache_dtype == "fp8_e5m2":
        raise options.error("kv_cache_dtype", "a KV cache dtype an MLA attention backend of vLLM %s "
                            "takes (auto, bfloat16, fp8, fp8_e4m3)" % options.release["release"],
                            options.kv_cache_dtype)
    priorities = _MLA_PRIORITIES.get(options.sm // 10, _MLA_DEFAULT_PRIORITIES)
    return next(backend for backend in priorities if _mla_backend_takes(backend, model, options))


def mla_forcing_backend(options, model):
    """platforms/cuda.py check_and_update_config before 0.18, the backend whose block size it
    forces: FlashMLA on Hopper; on Blackwell CUTLASS MLA, or FlashInfer MLA for 128-wide nope
    heads from 0.15; none (Triton MLA's 16) elsewhere. In 0.10, the seat's backend too (its
    selection goes by that block size)."""
    family = options.sm // 10
    if family == 10:
        flashinfer = options.since("0.15") and model["mla"]["qk_nope_head_dim"] == 128
        return _FLASHINFER_MLA if flashinfer else _CUTLASS_MLA
    return _FLASHMLA if family == 9 else _TRITON_MLA


# 0.11 to 0.17: CUDA's MLA priority lists, and the backend the config check preselects on
# Blackwell (CUTLASS MLA to 0.14; FlashInfer MLA for 128-wide nope heads from 0.15), which the
# selection must then find valid
_MLA_PRIORITIES_BEFORE_0_18 = {"0.11": (_CUTLASS_MLA, _FLASHINFER_MLA, _FLASH_ATTN_MLA, _FLASHMLA, _TRITON_MLA),
                               "0.15": (_FLASHINFER_MLA, _CUTLASS_MLA, _FLASH_ATTN_MLA, _FLASHMLA, _TRITON_MLA)}


def _mla_backend_takes_before_0_18(backend, model, options, kv_cache_dtype):
    """validate_configuration of an MLA backend, 0.11 to 0.17 (the selection ignores the block
    size): 576-wide latent heads only (MLACommonBackend); fp8 caches on FlashMLA, FlashInfer MLA
    and CUTLASS MLA, not FlashAttention MLA or Triton MLA; FlashInfer MLA's 128-wide nope heads
    from 0.15."""
    mla = model["mla"]
    if mla["kv_lora_rank"] + mla["qk_rope_head_dim"] != 576:
        return False
    dtypes = ("auto", "bfloat16") if options.since("0.15") else ("auto",)
    if backend not in (_FLASH_ATTN_MLA, _TRITON_MLA):
        dtypes += ("fp8", "fp8_e4m3")
    if kv_cache_dtype not in dtypes:
        return False
    if backend is _TRITON_MLA:
        return True
    if options.sm // 10 != _MLA_FAMILY[backend.name]:
        return False
    return backend is not _FLASHINFER_MLA or not options.since("0.15") or mla["qk_nope_head_dim"] == 128


def _mla_backend_before_0_18(options, model):
    """The MLA backend 0.11 to 0.17 run: the preselected one, or the first of the priority list
    that takes the model; a refusal where none does (vLLM: "No valid attention backend found",
    or "Selected backend ... is not valid")."""
    family = options.sm // 10
    priorities = _MLA_DEFAULT_PRIORITIES
    if family == 10:
        priorities = _MLA_PRIORITIES_BEFORE_0_18["0.15" if options.since("0.15") else "0.11"]
        if not options.since("0.15") or model["mla"]["qk_nope_head_dim"] == 128:
            priorities = priorities[:1]
    for backend in priorities:
        if _mla_backend_takes_before_0_18(backend, model, options, options.kv_cache_dtype):
            return backend
    release = options.release["release"]
    mla = model["mla"]
    if mla["kv_lora_rank"] + mla["qk_rope_head_dim"] != 576:
        raise options.error("kv_lora_rank + qk_rope_head_dim", "the 576-wide latent heads every MLA "
                            "attention backend of vLLM %s takes" % release,
                            mla["kv_lora_rank"] + mla["qk_rope_head_dim"])
    taken = [dtype for dtype in KV_CACHE_DTYPES if any(
        _mla_backend_takes_before_0_18(backend, model, options, dtype) for backend in priorities)]
    raise options.error("kv_cache_dtype", "a KV cache dtype an MLA attention backend of vLLM %s takes on "
                        "this card (%s)" % (release, ", ".join(taken)), options.kv_cache_dtype)


def forced_mla_block(options, backend):
    """The block size an MLA backend forced before 0.18: its own, unless the block already is
    one (0.10: exactly it; 0.11: a multiple of it; FlashInfer MLA also takes 32)."""
    block = options.user_block_size or 16
    forced = {"FLASHMLA": 64, "CUTLASS_MLA": 128, "FLASHINFER_MLA": 64}.get(backend.name)
    if forced is None:
        return block
    if backend.name == "FLASHINFER_MLA":
        keeps = block == 32 or block % 64 == 0
    else:
        keeps = block % forced == 0 if options.since("0.11") else block == forced
    return block if keeps else forced


def select_backend(options, model):
    """The attention backend the seat's release runs the model's first attention layer with."""
    if options.cpu:
        return _cpu_backend(options, model)
    if options.kv_cache_dtype == "bfloat16" and not options.since("0.15"):
        # the CLI takes it from 0.11, but no attention backend lists it before 0.15
        raise options.error("kv_cache_dtype", "a KV cache dtype an attention backend of vLLM %s takes "
                            "(bfloat16 comes in 0.15)" % options.release["release"], options.kv_cache_dtype)
    if model["mla"]:
        if options.since("0.18"):
            return _mla_backend(options, model)
        return _mla_backend_before_0_18(options, model) if options.since("0.11") \
            else mla_forcing_backend(options, model)
    return _attention_backend(options, model) if options.since("0.11") \
        else _attention_backend_0_10(options, model)


def _cpu_backend(options, model):
    """CpuPlatform.get_attn_backend_cls: CPU_ATTN for every model without MLA, with the model's
    own dtype for its cache."""
    if model["mla"] or model["attention"] == "gated_delta_net":
        raise options.error("gpu", "a GPU profile: MLA and Mamba models on vLLM's CPU platform are "
                            "not modelled", options.gpu)
    if options.kv_cache_dtype not in _CPU_KV_CACHE_DTYPES:
        raise options.error("kv_cache_dtype", "auto on vLLM's CPU platform (an fp8 cache there needs "
                            "AVX-512 or AMX: \"FP8 KV cache on CPU requires x86 with AVX-512 or AMX.\")",
                            options.kv_cache_dtype)
    return _CPU_ATTN
