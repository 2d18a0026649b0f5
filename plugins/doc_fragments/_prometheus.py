# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this doc fragment is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

from __future__ import annotations


class ModuleDocFragment:

    # How the calibration modules reach Prometheus: seat_demand and gpu_plateau take the same
    # (plugins/module_utils/_calibration/prometheus.py PROMETHEUS_OPTIONS).
    DOCUMENTATION = r"""
attributes:
  check_mode:
    details:
      - The queries run in check mode too; they only read.
options:
  prometheus_url:
    description: The Prometheus server, for example V(http://fv-mon:9090).
    type: str
    required: true
  bearer_token:
    description: A token for a Prometheus behind authentication (never returned).
    type: str
  timeout:
    description: Seconds each query may take on the server; the wire waits a few seconds longer, so a slow query says so in the server's words.
    type: int
    default: 60
  validate_certs:
    description: Verify the TLS certificate of an V(https) URL.
    type: bool
    default: true
"""
