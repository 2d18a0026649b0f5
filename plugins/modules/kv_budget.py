#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kv_budget
short_description: Size or evaluate a vLLM seat's KV cache exactly as its vLLM release does
version_added: 0.1.0
description:
  - Computes, from a model's C(config.json), what C(vllm serve) (0.33, or the release
    O(vllm_version) names) does with a KV cache budget
    pinned by C(--kv-cache-memory-bytes) - block size, bytes per block, blocks, the
    C(GPU KV cache size) and C(Maximum concurrency) figures it logs, and whether it boots (with
    vLLM's own error text when it does not).
  - Without O(kv_cache_memory_bytes) it sizes the budget - the smallest one that boots and whose
    maximum concurrency at O(max_model_len) is at least O(kv_factor), rounded up to a multiple
    of O(kv_round_to). With it, it evaluates that budget.
  - All bytes are per GPU (tensor-parallel rank). Defaults model C(vllm serve) on H100/H200;
    O(gpu) selects another card's defaults.
  - The arithmetic is checked against each modelled release's own planning code on generated
    configurations (the collection's differential tests).
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.pure
options:
  model_config:
    description:
      - The model's C(config.json) as a dictionary. Mutually exclusive with O(model_config_path).
    type: dict
  model_config_path:
    description:
      - A C(config.json) file, or a model directory holding one, on the host the module runs on.
    type: path
  max_model_len:
    description:
      - The context length to serve, an integer, or V(published) for the model's native window
        (C(max_position_embeddings); rope/YaRN extensions are not applied), or V(auto) (vLLM's
        auto-fit to the budget; only with O(kv_cache_memory_bytes)).
    type: raw
    required: true
  kv_cache_dtype:
    description:
      - vLLM's C(--kv-cache-dtype); V(auto) is the model dtype (FP8 for ModelOpt checkpoints with an FP8 KV scheme).
      - A dtype the seat's vLLM release does not offer, or that none of its attention backends takes for the model on O(gpu),
        is refused (V(bfloat16) comes in 0.11 and works from 0.15, V(float16) comes in 0.18).
    type: str
    choices: [auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2]
    default: auto
  tensor_parallel_size:
    description: vLLM's C(--tensor-parallel-size); every figure is per GPU.
    type: int
    default: 1
  block_size:
    description: vLLM's C(--block-size); null is what vLLM picks for the model and O(gpu).
    type: int
  enable_prefix_caching:
    description: Whether prefix caching is on (vLLM's default); it sets the Mamba cache mode of hybrid models.
    type: bool
    default: true
  max_num_batched_tokens:
    description:
      - vLLM's C(--max-num-batched-tokens); null is vLLM's default for O(gpu) (8192 on H100/H200).
        Sliding-window layers keep twice this many tokens in flight.
    type: int
  max_num_seqs:
    description:
      - vLLM's C(--max-num-seqs); null is vLLM's default for O(gpu) (1024 on H100/H200). Hybrid
        Mamba models fail to boot when it exceeds the number of blocks.
    type: int
  kv_cache_memory_bytes:
    description:
      - A budget to evaluate, per GPU - an integer, or a size such as V(22GiB), V(5.5GiB),
        V(512MiB), or vLLM's V(8G) (binary) / V(8g) (decimal). Null sizes the budget instead.
    type: raw
  kv_factor:
    description: The sizing rule's minimum concurrency at O(max_model_len).
    type: float
    default: 1.25
  kv_round_to:
    description: The sizing rule rounds the budget up to a multiple of this size.
    type: raw
    default: 0.5GiB
  gpu:
    description:
      - The card, for vLLM's batch defaults and attention backend (block size) -
        V(h100), V(h200) (Hopper), V(b200), V(rtx-pro-6000) (Blackwell), V(a100), V(l40s).
      - V(cpu) is vLLM's CPU platform (its CPU build, release 0.32 only), checked against a live engine.
    type: str
    choices: [h100, h200, b200, rtx-pro-6000, a100, l40s, cpu]
    default: h100
  num_speculative_tokens:
    description: MTP speculative tokens (Qwen3-Next and Qwen3.5 only); they add draft layers and Mamba state.
    type: int
    default: 0
  enforce_eager:
    description: vLLM's C(--enforce-eager); without CUDA graphs the Mamba C(max_num_seqs) check does not apply.
    type: bool
    default: false
  mamba_cache_dtype:
    description: vLLM's C(--mamba-cache-dtype); V(float16) comes in vLLM 0.13, V(bfloat16) in 0.22.
    type: str
    choices: [auto, float32, float16, bfloat16]
    default: auto
  mamba_ssm_cache_dtype:
    description: vLLM's C(--mamba-ssm-cache-dtype); V(auto) honours a Qwen3.5 config's C(mamba_ssm_dtype); V(float16)
      comes in vLLM 0.13, V(bfloat16) in 0.22.
    type: str
    choices: [auto, float32, float16, bfloat16]
    default: auto
  disable_hybrid_kv_cache_manager:
    description: vLLM's C(--disable-hybrid-kv-cache-manager); sliding-window layers are then allocated as full attention.
    type: bool
    default: false
  allow_long_max_model_len:
    description: Whether C(VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) is set; without it a length beyond the model's window fails to boot.
    type: bool
    default: false
  vllm_version:
    description:
      - The vLLM release the seat runs (V(0.26.0)); its minor's own KV arithmetic is used.
      - Modelled are 0.10.2 and every minor from 0.11 to 0.33; another version fails unless
        O(allow_nearest_vllm_release) is set.
    type: str
    default: 0.33.0
  allow_nearest_vllm_release:
    description: Plan a release that is not modelled with the nearest modelled one's arithmetic (returned as RV(vllm_release)).
    type: bool
    default: false
  seat:
    description: The seat's name, used in error messages.
    type: str
notes:
  - Not modelled - block-outermost KV layouts, EAGLE drafters, context parallelism, KV
    connectors and offloading, TurboQuant/NVFP4 KV packings, and the memory outside the KV cache
    (weights, activations, CUDA graphs).
  - How the figures are computed and what is verified - C(docs/kv-sizing.md) in the collection.
"""

EXAMPLES = r"""
- name: Size gen-small's KV for its published window (1.25x, rounded to 0.5 GiB)
  llmfleet.seats.kv_budget:
    model_config_path: /srv/models/Qwen3.5-4B
    max_model_len: published
  register: kv

- name: Evaluate a pinned budget, FP8 KV on two GPUs
  llmfleet.seats.kv_budget:
    model_config: "{{ lookup('ansible.builtin.file', 'models/coder/config.json') | from_json }}"
    max_model_len: 32768
    kv_cache_memory_bytes: 22GiB
    kv_cache_dtype: fp8
    tensor_parallel_size: 2
    gpu: rtx-pro-6000
  register: kv

- name: Pass the pinned budget to vLLM
  ansible.builtin.debug:
    msg: "{{ kv.vllm_args | join(' ') }}"
"""

RETURN = r"""
kv_cache_memory_bytes:
  description: The budget per GPU - the sized one, or the one evaluated.
  returned: success
  type: int
  sample: 5905580032
block_size:
  description: vLLM's KV cache block size in tokens (after the hybrid Mamba alignment).
  returned: success
  type: int
  sample: 16
bytes_per_block:
  description: Bytes one block takes in the shared pool (the largest group's pages).
  returned: success
  type: int
  sample: 2359296
num_blocks:
  description: C(kv_cache_memory_bytes // bytes_per_block), the null block included.
  returned: success
  type: int
  sample: 3640
kv_cache_tokens:
  description: What vLLM logs as C(GPU KV cache size ... tokens).
  returned: success
  type: int
  sample: 58240
max_concurrency:
  description: What vLLM logs as C(Maximum concurrency for L tokens per request), to two decimals.
  returned: success
  type: float
  sample: 1.78
max_concurrency_exact:
  description: The same concurrency unrounded (blocks over blocks per request).
  returned: success
  type: float
  sample: 1.77734375
boot_ok:
  description: Whether vLLM boots with this budget (the admission check, and for Mamba hybrids the C(max_num_seqs) check).
  returned: success
  type: bool
  sample: true
boot_error:
  description: vLLM's error message when it does not boot, else null.
  returned: success
  type: str
  sample: null
first_request_error:
  description:
    - What kills the engine at its first request although it booted, else null - on O(gpu=cpu), the CPU
      attention kernel's refusal of a head size it does not compute.
  returned: success
  type: str
  sample: "Unsupported CPU attention configuration: head_dim=16"
per_token_kv_bytes:
  description: KV bytes per token per GPU over every attention layer that holds a cache.
  returned: success
  type: int
  sample: 147456
groups:
  description: vLLM's KV cache groups - kind, layers, block size, page bytes, pages per request (and window).
  returned: success
  type: list
  elements: dict
  sample: [{"kind": "full_attention", "layers": 36, "block_size": 16, "page_size_bytes": 65536, "pages_per_request": 2048}]
vllm_args:
  description: The vLLM arguments that pin this budget and length.
  returned: success
  type: list
  elements: str
  sample: ["--kv-cache-memory-bytes", "8589934592", "--max-model-len", "32768"]
max_model_len:
  description: The resolved context length (V(published) and V(auto) resolved).
  returned: success
  type: int
  sample: 32768
published_max_model_len:
  description: The model's native window from its config.
  returned: success
  type: int
  sample: 40960
blocks_per_request:
  description: Blocks one request of C(max_model_len) takes, summed over the groups.
  returned: success
  type: int
  sample: 2048
capacity_line:
  description: The capacity line as vLLM logs it.
  returned: success
  type: str
  sample: "GPU KV cache size: 58,240 tokens, Maximum concurrency for 32,768 tokens per request: 1.78x"
estimated_max_model_len:
  description: vLLM's estimate of the longest length that fits, when the admission check fails; else null.
  returned: success
  type: int
  sample: null
kv_cache_dtype:
  description: The KV cache dtype after resolving V(auto) for quantized checkpoints.
  returned: success
  type: str
  sample: auto
tensor_parallel_size:
  description: The tensor-parallel size the figures are for.
  returned: success
  type: int
  sample: 1
attention_backend:
  description: The attention backend the seat's vLLM release picks on O(gpu) for the model and the cache dtype
    (it decides the default block size).
  returned: success
  type: str
  sample: FLASH_ATTN
gpu:
  description: The card profile used.
  returned: success
  type: str
  sample: h100
max_num_batched_tokens:
  description: The resolved C(max_num_batched_tokens).
  returned: success
  type: int
  sample: 8192
max_num_seqs:
  description: The resolved C(max_num_seqs).
  returned: success
  type: int
  sample: 1024
kv_factor:
  description: The sizing rule's factor.
  returned: when sizing (no O(kv_cache_memory_bytes))
  type: float
  sample: 1.25
kv_round_to:
  description: The rounding unit in bytes.
  returned: when sizing (no O(kv_cache_memory_bytes))
  type: int
  sample: 536870912
min_kv_cache_memory_bytes:
  description: The smallest budget meeting the rule before rounding.
  returned: when sizing (no O(kv_cache_memory_bytes))
  type: int
  sample: 5662310400
vllm_version:
  description: The release the figures are for, as O(vllm_version) named it.
  returned: success
  type: str
  sample: 0.26.0
vllm_release:
  description: The release whose source the arithmetic follows (its minor's modelled release, or the nearest one).
  returned: success
  type: str
  sample: 0.26.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import GPU_PROFILE, KV_FACTOR, KV_ROUND_TO
from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.kv import (
    PLATFORMS,
    KV_CACHE_DTYPES,
    MAMBA_DTYPES,
    kv_budget,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.vllm_releases import LATEST


def main():
    module = AnsibleModule(
        argument_spec={
            "model_config": {"type": "dict"},
            "model_config_path": {"type": "path"},
            "max_model_len": {"type": "raw", "required": True},
            "kv_cache_dtype": {"type": "str", "choices": list(KV_CACHE_DTYPES),
                               "default": "auto"},
            "tensor_parallel_size": {"type": "int", "default": 1},
            "block_size": {"type": "int"},
            "enable_prefix_caching": {"type": "bool", "default": True},
            "max_num_batched_tokens": {"type": "int", "no_log": False},
            "max_num_seqs": {"type": "int"},
            "kv_cache_memory_bytes": {"type": "raw"},
            "kv_factor": {"type": "float", "default": KV_FACTOR},
            "kv_round_to": {"type": "raw", "default": KV_ROUND_TO},
            "gpu": {"type": "str", "choices": list(PLATFORMS), "default": GPU_PROFILE},
            "num_speculative_tokens": {"type": "int", "default": 0, "no_log": False},
            "enforce_eager": {"type": "bool", "default": False},
            "mamba_cache_dtype": {"type": "str", "choices": list(MAMBA_DTYPES),
                                  "default": "auto"},
            "mamba_ssm_cache_dtype": {"type": "str", "choices": list(MAMBA_DTYPES),
                                      "default": "auto"},
            "disable_hybrid_kv_cache_manager": {"type": "bool", "default": False},
            "allow_long_max_model_len": {"type": "bool", "default": False},
            "vllm_version": {"type": "str", "default": LATEST},
            "allow_nearest_vllm_release": {"type": "bool", "default": False},
            "seat": {"type": "str"},
        },
        mutually_exclusive=[["model_config", "model_config_path"]],
        required_one_of=[["model_config", "model_config_path"]],
        supports_check_mode=True,
    )
    params = dict(module.params)
    config = params.pop("model_config")
    path = params.pop("model_config_path")
    with operator_errors(module):
        result = kv_budget(config if config is not None else path, **params)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
