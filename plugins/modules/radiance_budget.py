#!/usr/bin/python
# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: radiance_budget
short_description: A radiance seat's KV cache from radiance 1.8.1's funding formula, and its pinned-RAM ledger
version_added: 0.2.0
description:
  - radiance (1.8.1) keeps an MoE model's experts on the card or in a pinned host pool and gives
    its KV cache what is left; it has no KV flag. This computes, per card, what its budget
    resolver does -
    C(capacity = card_total - already_held - drift - headroom - arena - step_staging - hw_queues - prefetch),
    C(elastic = capacity - static_weights),
    C(expert_floor = min(plane + spare, max(plane + 2 x unit_max - host_room, 0))),
    C(kv = min(max_num_seqs x max_model_len, elastic - expert_floor)), the cache cut into whole
    blocks.
  - Demand (C(max_num_seqs x max_model_len)) is in tokens and supply in bytes; they meet at
    O(kv_bytes_per_token), the engine's KV bytes per token on one card.
  - The smallest of O(card_total_mib) is every card's budget.
  - The pinned-RAM ledger is
    C(tp x host_pool_mib + ple_table_mib + prefix_cache_mib + statics_arena_mib + checkpoint_slots x 111.98 MiB),
    checked against O(ttm_min_mib) (the serve script refuses to start below it) and
    O(ttm_target_mib) (it must clear the ledger by O(ttm_slack_mib)).
  - It also says what one step of each knob buys, and with O(target_tokens) the host-pool
    ladder that would fund it.
  - Every input has a plausible range, checked before anything is computed - a card's MiB at
    most 1 TiB (1048576), a host's at most 64 TiB (67108864), O(max_num_seqs) at most 65536,
    O(max_model_len) and O(kv_bytes_per_token) at most 2^24 - so a size given in bytes is refused
    naming the field; the host-pool ladder may be at most 4096 rungs long.
author:
  - llmfleet.seats contributors (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.seats._attributes
  - llmfleet.seats._attributes.pure
options:
  card_total_mib:
    description: Each card's total memory in MiB, as the boot ledger's C(VRAM budget, per card) prints it; the smallest binds.
    type: list
    elements: int
    required: true
  already_held_mib:
    description: Memory already held on the card when the engine resolves its budget (contexts, other processes).
    type: int
    default: 0
  drift_mib:
    description: The ledger's drift term.
    type: int
    default: 0
  gpu_headroom_mib:
    description: C(GPU_HEADROOM_MIB) (C(--gpu-headroom-mib)).
    type: int
    default: 96
  arena_mib:
    description: The activation arena.
    type: int
    default: 0
  step_staging_mib:
    description: The step staging buffers.
    type: int
    default: 0
  hw_queues_mib:
    description: The hardware queues.
    type: int
    default: 0
  prefetch_mib:
    description: The expert prefetch buffers.
    type: int
    default: 0
  static_weights_mib:
    description: The weights that always stay on the card (attention, shared experts, embeddings), per card.
    type: int
    required: true
  plane_mib:
    description: The expert plane per card; omit it to derive it from O(printed_experts_mib).
    type: int
  printed_experts_mib:
    description:
      - A live ledger's C(experts) figure, at that boot's O(host_pool_mib); the plane is then
        C(printed_experts + host_pool - 2 x unit_max).
    type: int
  spare_mib:
    description: The spare expert slots' memory.
    type: int
    default: 0
  unit_max_mib:
    description: The largest expert unit.
    type: int
    default: 0
  host_pool_mib:
    description: C(HOST_POOL_MIB) (C(--host-pool-mib)), per rank.
    type: int
    required: true
  file_tier_staging_mib:
    description: The file tier's staging, taken off the host room when disk tiering is on.
    type: int
    default: 0
  max_num_seqs:
    description: C(MAX_SEQS) (C(--max-num-seqs)).
    type: int
    required: true
  max_model_len:
    description: C(MAX_MODEL_LEN) (C(--max-model-len)).
    type: int
    required: true
  kv_bytes_per_token:
    description: KV bytes per token on one card (a ledger's cache bytes over its tokens).
    type: int
    required: true
  block_size:
    description: The paged cache's block size in tokens.
    type: int
    default: 16
  tp:
    description: Tensor-parallel ranks; each pins its own host pool.
    type: int
    default: 1
  ple_table_mib:
    description: The PLE/n-gram table pinned on the host.
    type: int
    default: 0
  prefix_cache_mib:
    description: C(PREFIX_CACHE_MIB).
    type: int
    default: 0
  statics_arena_mib:
    description: The statics and arena pinned on the host.
    type: int
    default: 2048
  checkpoint_slots:
    description: C(--checkpoint-slots), a number or V(auto) (C(max_num_seqs x (1 + retained))).
    type: raw
    default: auto
  retained:
    description: How many checkpoints per sequence the retention policy keeps (for V(auto) slots).
    type: int
    default: 0
  ttm_min_mib:
    description: C(TTM_MIN_MIB); the serve script refuses to start below it.
    type: int
    required: true
  ttm_target_mib:
    description: C(TTM_TARGET_MIB), what the preflight raises the kernel's limit to.
    type: int
    required: true
  ttm_slack_mib:
    description: How far O(ttm_target_mib) must clear the ledger.
    type: int
    default: 1024
  target_tokens:
    description: KV tokens the seat should fund; adds the host-pool ladder to the result.
    type: int
  host_limit_mib:
    description: The most host RAM the ladder may pin (the host's RAM says no above it).
    type: int
notes:
  - The formulas and constants (111.98 MiB a checkpoint slot, ~2,048 MiB of statics and arena)
    are radiance 1.8.1's; another build may differ.
  - The cache is elastic - the KV figure is its ceiling; the mover may lend arena slots and
    cache blocks to the expert slab under load.
"""

EXAMPLES = r"""
- name: What the env file funds, and what the pool must be for 250,000 tokens
  llmfleet.seats.radiance_budget:
    card_total_mib: [26624, 27320]
    already_held_mib: 512
    drift_mib: 64
    gpu_headroom_mib: 96
    arena_mib: 987
    step_staging_mib: 256
    hw_queues_mib: 64
    prefetch_mib: 128
    static_weights_mib: 6144
    plane_mib: 40960
    spare_mib: 512
    unit_max_mib: 384
    host_pool_mib: 30720
    max_num_seqs: 4
    max_model_len: 65536
    kv_bytes_per_token: 36864
    tp: 2
    ple_table_mib: 1024
    prefix_cache_mib: 2048
    retained: 1
    ttm_min_mib: 68000
    ttm_target_mib: 70000
    target_tokens: 250000
  register: budget
"""

RETURN = r"""
card_total_mib:
  description: The cards' totals as given.
  returned: success
  type: list
  elements: int
  sample: [26624, 27320]
binding_card:
  description: The position in O(card_total_mib) of the smallest card, whose budget every card gets.
  returned: success
  type: int
  sample: 0
capacity_mib:
  description: What the engine may claim on the smallest card.
  returned: success
  type: int
  sample: 24517
elastic_mib:
  description: Capacity less the static weights.
  returned: success
  type: int
  sample: 18373
plane_mib:
  description: The expert plane used (given, or derived from O(printed_experts_mib)).
  returned: success
  type: int
  sample: 40960
expert_floor_mib:
  description: The experts that must stay on the card.
  returned: success
  type: int
  sample: 11008
experts_mib:
  description: What the experts get on the card (the floor, and what the cache leaves).
  returned: success
  type: int
  sample: 11008
kv_cap_tokens:
  description: Demand, C(max_num_seqs x max_model_len).
  returned: success
  type: int
  sample: 262144
kv_bytes:
  description: The cache's carve per card, C(min(demand, elastic - expert_floor)) in bytes.
  returned: success
  type: int
  sample: 7722762240
kv_mib:
  description: RV(kv_bytes) in MiB.
  returned: success
  type: float
  sample: 7365.0
vram_kv_bytes:
  description: What the engine allocates for the cache per card - whole blocks (the ledger's C(vram_kv)).
  returned: success
  type: int
  sample: 7722221568
kv_blocks:
  description: The cache's blocks.
  returned: success
  type: int
  sample: 13093
kv_tokens:
  description: The printed tokens of context, blocks x block size.
  returned: success
  type: int
  sample: 209488
sessions:
  description: Sessions at O(max_model_len), C(kv_tokens // max_model_len).
  returned: success
  type: int
  sample: 3
binding:
  description: V(demand) when the cache funds every sequence, V(supply) when the card's room runs out first.
  returned: success
  type: str
  sample: supply
funded_fraction:
  description: The share of demand the cache funds (the "funds N % of demand" figure).
  returned: success
  type: float
  sample: 0.7991
host_holds_plane:
  description: Whether the host pool already holds the whole plane, so more host RAM buys no cache.
  returned: success
  type: bool
  sample: false
checkpoint_slots:
  description: The checkpoint slots (V(auto) resolved).
  returned: success
  type: int
  sample: 8
checkpoint_store_mib:
  description: Slots x 111.98 MiB.
  returned: success
  type: float
  sample: 895.84
pin_ledger_mib:
  description: The pinned host RAM the seat needs.
  returned: success
  type: float
  sample: 67455.84
pin_ledger_parts:
  description: The ledger's terms in words.
  returned: success
  type: str
pin_ok:
  description: Whether O(ttm_min_mib) covers the ledger and O(ttm_target_mib) clears it by the slack.
  returned: success
  type: bool
  sample: true
pin_error:
  description: Why the ledger is refused, naming the variable; null when RV(pin_ok).
  returned: success
  type: str
knob_effects:
  description: What one step of each knob buys (C(HOST_POOL_MIB) +1,024, C(MAX_SEQS) +1, C(GPU_HEADROOM_MIB) to 48).
  returned: success
  type: list
  elements: dict
  contains:
    knob:
      description: The env file's variable.
      type: str
    change:
      description: The step.
      type: str
    kv_tokens:
      description: The change in KV tokens.
      type: int
    kv_cap_tokens:
      description: The change in demand.
      type: int
    pin_ledger_mib:
      description: The change in the pinned-RAM ledger.
      type: float
    why:
      description: Why, in words.
      type: str
host_pool_rungs:
  description:
    - With O(target_tokens), C(HOST_POOL_MIB) raised 1,024 MiB a rung until the target is funded,
      the host's RAM (O(host_limit_mib)) says no, or the host holds the whole plane; empty without it.
  returned: success
  type: list
  elements: dict
  contains:
    host_pool_mib:
      description: The rung's pool.
      type: int
    kv_tokens:
      description: What it funds.
      type: int
    pin_ledger_mib:
      description: What it pins.
      type: float
    funded:
      description: Whether it funds the target.
      type: bool
    stopped:
      description: On the last rung, why the ladder stops (V(funded), V(host_ram), V(plane_on_host), V(demand)).
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.seats.plugins.module_utils._common.errors import operator_errors
from ansible_collections.llmfleet.seats.plugins.module_utils._sizing.radiance import RADIANCE_BUDGET_SPEC, radiance_budget


def main():
    module = AnsibleModule(argument_spec=RADIANCE_BUDGET_SPEC, supports_check_mode=True)
    with operator_errors(module):
        result = radiance_budget(module.params)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
