# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Beside the pipeline, before its first run: adopting a host that something else started.
``read`` runs on the GPU host and asks its Docker engine what every running container launches
(and finds the model configs it serves); ``inventory`` turns that and a gpu_info reading into a
starting host_vars file, and says what it could not work out.

May import: _common, _cards, _sizing (the vLLM release an image names), _engines.
"""
