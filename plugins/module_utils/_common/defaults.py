# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The collection's defaults and the names every stage shares, each in one place. Module docs
and role defaults repeat the numbers (they must be literal YAML); a unit test holds them equal.
"""

from __future__ import annotations

import re

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# Sizing rule: the smallest KV budget whose concurrency at max_model_len is at least the factor,
# rounded up to a multiple of the step.
KV_FACTOR = 1.25
KV_ROUND_TO = "0.5GiB"
# Sizing from measured demand (a seat's kv_sizing: demand): the peak KV tokens in use over the
# calibration window times the factor, held by the smallest budget, rounded like the rule; and
# the share of its KV below which a seat is said never to have used much of it.
DEMAND_FACTOR = 1.25
DEMAND_LOW_USE = 0.25
# The format a demand snapshot (playbooks/calibrate.yml) is written in and read back by the plan.
DEMAND_SNAPSHOT_FORMAT = "llmfleet.seats/demand/1"
# The GPU whose attention backends and block sizes vLLM's arithmetic assumes (sizing's profiles).
GPU_PROFILE = "h100"
# Free MiB a GPU keeps beyond its seats' footprints when a seat boots (and in the boot gate's
# --gpu-memory-utilization), and how far below the plan's spare a measured card may be.
MARGIN_MIB = 512
TOLERANCE_MIB = 512
# Whether a card after a boot (and at the plateau) is held to the plan's spare less the tolerance,
# or to the margin alone: off for a ladder's rung, whose spare at plateau is what it measures.
SPARE_GATE = True
# How long a seat may take to answer /health 200, and how often it is asked.
HEALTH_TIMEOUT_S = 1800
HEALTH_INTERVAL_S = 10

# How far apart a ladder's rungs are when the operator names no step, in each knob's unit:
# tokens, sequences, bytes, and MiB of a radiance seat's host pool.
LADDER_STEPS = {"max_model_len": 4096, "max_num_seqs": 4096, "kv_cache_memory_bytes": 4096,
                "host_pool_mib": 1024}

# A seat's name names its compose project, directory and container: the whole string matches.
SEAT_NAME_RE = lazy_regex(r"\A[a-z0-9][a-z0-9_-]*\Z")
SEAT_NAME_EXPECTED = "lowercase letters, digits, '-' or '_', starting with a letter or digit"
# A container's name as docker allows it: a seat's container_name, and what adopt writes as one.
CONTAINER_NAME_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# An inventory host name: it is written into every seat file's header and names the host in
# every message, so the whole string matches (a newline in one became a command in serve.sh).
HOST_NAME_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
HOST_NAME_EXPECTED = "a host name of letters, digits, '.', '-' or '_', starting with a letter or digit"
# What becomes a file line, a path, a label or an argument: no control character anywhere
# (a final "\n" in a name made a directory "voices\n").
CONTROL_RE = lazy_regex(r"[\x00-\x1f\x7f]")

# A seat's health path: it becomes a string in its healthcheck's code.
HEALTH_PATH_RE = lazy_regex(r"\A/[A-Za-z0-9._~%/-]*(\?[A-Za-z0-9._~%=&-]*)?\Z")
HEALTH_PATH_EXPECTED = "a URL path such as /health (letters, digits, ._~%/- and a query)"

# Environment variables (and command-line flags) named with one of these words hold secrets even
# when the inventory did not put them in secret_environment: their values go only to the 0600
# .env and are shown nowhere else. Whole words between '_', '-' or '.', any case: HF_TOKEN,
# OPENAI_API_KEY, DB_PASSWORD, --api-key are secrets; TOKENIZERS_PARALLELISM, KEYBOARD,
# MONKEY_PATCH, AUTHOR, MAX_NUM_BATCHED_TOKENS are not.
SECRET_NAME_RE = lazy_regex(
    r"(?<![A-Za-z0-9])(?:TOKEN|KEY|APIKEY|SECRETS?|PASSWORD|PASSWD|PASSPHRASE|PWD|CREDENTIALS?|CREDS|AUTH)"
    r"(?![A-Za-z0-9])", re.IGNORECASE)
# The .env variable that carries a secret NAME into the container's environment.
SECRET_VAR_PREFIX = "SEAT_SECRET_"
# What stands for a secret's value everywhere but the .env.
REDACTED = "<secret>"
# Ansible hides every occurrence of a secret's value in what a module returns and prints: a secret
# shorter than this would hide parts of a window's figures ("2" turns 12.6 s into a masked string).
SECRET_MIN_CHARS = 8

# The label on every container the collection runs: its value is the seat's name.
MANAGED_LABEL = "io.llmfleet.seat"
# The label on a seat kept stopped after another took its place (a model swap): its value is the
# name of the seat that replaced it. A rollback starts it again; only llmfleet_retire removes it.
DORMANT_LABEL = "io.llmfleet.dormant"

# The host address a seat's port is published on unless the inventory says otherwise: the host
# itself, so a new seat is reachable from nowhere else until the operator names the address its
# gateway comes in on (docs/inventory.md, "Exposure").
BIND_ADDRESS = "127.0.0.1"
# The addresses that publish a port on every interface of the host.
ALL_INTERFACES = ("0.0.0.0", "::")
# A docker network's name (docker's own grammar), whole: it is a compose key and an argument.
NETWORK_NAME_RE = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
