# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stage 1, the cards: what each GPU holds now, read through NVML, nvidia-smi or a recorded
snapshot, with every process attributed to its container and compose service.

May import: _common.
"""
