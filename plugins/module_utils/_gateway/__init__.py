# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Beside the pipeline, the gateway: a real client's view of each LiteLLM route (chat, stream,
reasoning, tools) and the audit of a LiteLLM config's targets against where the seats are.

May import: _common.
"""
