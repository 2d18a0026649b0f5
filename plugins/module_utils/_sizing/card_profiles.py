# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Which of the sizing's GPU profiles a card is, from the name NVML and nvidia-smi give it:
adopt writes the profile of the cards it reads, and the plan refuses a profile that
contradicts them. A card none of them describes has no profile: never a guess."""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# Each profile's cards by name: the variants share the compute capability and the memory tier
# vLLM's defaults follow (an H100 PCIe or NVL is Hopper with 80+ GiB, like the SXM card).
CARD_NAMES = (
    ("h100", lazy_regex(r"\bH100\b")),
    ("h200", lazy_regex(r"\bH200\b")),
    ("b200", lazy_regex(r"\bB200\b")),
    ("rtx-pro-6000", lazy_regex(r"\bRTX PRO 6000 BLACKWELL\b")),
    ("a100", lazy_regex(r"\bA100\b")),
    ("l40s", lazy_regex(r"\bL40S\b")),
)


def profile_of_card(name):
    """The GPU profile of a card named ``name`` (``NVIDIA L40S`` -> ``l40s``), or None."""
    if not isinstance(name, str):
        return None
    found = {profile for profile, pattern in CARD_NAMES if pattern.search(name.upper())}
    return found.pop() if len(found) == 1 else None
