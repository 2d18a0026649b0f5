# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What every stage shares: byte sizes, the collection's defaults and constants, the one HTTP
client, the one command runner (and the Docker and systemd runners on it) and the one atomic
file writer.

May import: the standard library and Ansible's module_utils only; nothing else of the
collection's (every other stage imports this one).
"""
