# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""When two holders of one TCP port clash: a port is held on an address, so ``127.0.0.1:9100``
and ``10.0.0.5:9100`` live side by side, while a holder on every interface (``0.0.0.0`` or
``::``) clashes with any other holder of that port. One rule for seats against seats, against
other containers and against what listens on the host."""

from __future__ import annotations

import ipaddress

from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import ALL_INTERFACES


def normal_address(address):
    """An address as the clash rule compares it: docker's empty host IP is every interface, an
    IPv4 address mapped into IPv6 (how a dual-stack socket shows it) is the IPv4 address, and
    anything that is no address stays as written (compared as text)."""
    if not address:
        return ALL_INTERFACES[0]
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if parsed.version == 6 and parsed.ipv4_mapped:
        parsed = parsed.ipv4_mapped
    return str(parsed)


def addresses_clash(first, second):
    """Whether holders of one port on these two addresses clash."""
    first, second = normal_address(first), normal_address(second)
    return first == second or first in ALL_INTERFACES or second in ALL_INTERFACES


def endpoint(address, port):
    """``127.0.0.1:9100``, ``[::1]:9100``."""
    address = normal_address(address)
    return "%s:%s" % ("[%s]" % address if ":" in address else address, port)
