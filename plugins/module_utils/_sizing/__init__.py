# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Stage 2, sizing: a model's config.json read into its layer geometry, the attention backend
each vLLM release runs it with, the KV budget in bytes exactly as vLLM turns it into blocks,
tokens and concurrency, and each seat's footprint per GPU (weights + KV + runtime overhead,
measured at the plateau where it can be).

May import: _common, _cards (what a plateau snapshot shows a seat holding).
"""
