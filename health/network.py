"""Launcher/network probe: address facts for the preamble and the hostname check.

Reads this node's interfaces (``SIOCGIFADDR`` ioctl), its IPv4 routing table
(``/proc/net/route``, which is per network namespace) and name resolution
(``getaddrinfo``, so ``/etc/hosts`` counts). The routing-table parser is pure and
tested on recorded text. Nothing here decides: ``judge`` does.
"""

from __future__ import annotations

import dataclasses
import fcntl
import ipaddress
import logging
import socket
import struct
from collections.abc import Sequence
from pathlib import Path

from health.preamble import NodeAddressFacts

logger = logging.getLogger(__name__)

_SIOCGIFADDR = 0x8915  # linux/sockios.h


@dataclasses.dataclass(frozen=True)
class NetworkResult:
    """What the launcher/network stage saw on one node."""

    host: str
    """This node's name as the allocation names it."""
    node_rank: int
    num_nodes: int
    hostname_addresses: tuple[str, ...]
    """What ``host`` resolves to on this node."""
    interface: str | None = None
    master_addr: str | None = None
    master_port: int | None = None
    reason: str = ""
    """How the preamble chose interface and address."""
    error: str | None = None
    """Why no preamble could be built (then interface/address are None)."""

    @property
    def hostname_is_loopback(self) -> bool:
        """True when every address the hostname resolves to is loopback."""
        return bool(self.hostname_addresses) and all(
            ipaddress.ip_address(a).is_loopback for a in self.hostname_addresses
        )


def parse_proc_net_route(text: str) -> list[tuple[str, str, str]]:
    """Parse ``/proc/net/route``.

    Args:
        text: the file's content (header line first; addresses little-endian hex).

    Returns:
        (interface, destination network CIDR, gateway) per route, e.g.
        ``("eth0", "10.0.0.0/24", "0.0.0.0")``; the default route is ``0.0.0.0/0``.
    """
    routes = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8:
            continue
        iface, dest, gateway, mask = cols[0], cols[1], cols[2], cols[7]

        def ip(h: str) -> str:
            return socket.inet_ntoa(struct.pack("<I", int(h, 16)))

        net = ipaddress.IPv4Network(f"{ip(dest)}/{ip(mask)}", strict=False)
        routes.append((iface, str(net), ip(gateway)))
    return routes


def route_interface_for(routes: Sequence[tuple[str, str, str]], addr: str) -> str | None:
    """Longest-prefix match of ``addr`` in parsed routes.

    Args:
        routes: ``parse_proc_net_route`` output.
        addr: an IPv4 address.

    Returns:
        The interface the kernel would use, or None when no route matches.
    """
    target = ipaddress.IPv4Address(addr)
    best: tuple[int, str] | None = None
    for iface, cidr, _ in routes:
        net = ipaddress.IPv4Network(cidr)
        if target in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, iface)
    return None if best is None else best[1]


def interface_addresses() -> dict[str, tuple[str, ...]]:
    """IPv4 address of every interface of this network namespace.

    Returns:
        Interface name -> (address,) or () when it has none.
    """
    out: dict[str, tuple[str, ...]] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                res = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, req)
                out[name] = (socket.inet_ntoa(res[20:24]),)
            except OSError:
                out[name] = ()
    return out


def resolve(host: str) -> tuple[str, ...]:
    """IPv4 addresses ``host`` resolves to here (hosts file and DNS), in order.

    Args:
        host: a hostname or address.

    Returns:
        Distinct addresses; () when resolution fails (logged).
    """
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        logger.warning("cannot resolve host=%s: %s", host, exc)
        return ()
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return tuple(seen)


def gather_address_facts(hostnames: Sequence[str], node_rank: int) -> NodeAddressFacts:
    """Collect the facts ``preamble.build_preamble`` needs on this node.

    Args:
        hostnames: every node of the allocation in node-rank order (node 0 first).
        node_rank: this node's index in ``hostnames``.

    Returns:
        The address facts; the route interface is the one routing to the first other
        node whose name resolves to a non-loopback address.

    Raises:
        ValueError: if ``node_rank`` is not an index of ``hostnames``.
    """
    if not 0 <= node_rank < len(hostnames):
        raise ValueError(f"node_rank {node_rank} outside 0..{len(hostnames) - 1}")
    try:
        routes = parse_proc_net_route(Path("/proc/net/route").read_text())
    except OSError as exc:
        logger.warning("cannot read /proc/net/route: %s", exc)
        routes = []
    default = next((i for i, cidr, _ in routes if cidr == "0.0.0.0/0"), None)
    route_iface = None
    for i, peer in enumerate(hostnames):
        if i == node_rank:
            continue
        addrs = [a for a in resolve(peer) if not ipaddress.ip_address(a).is_loopback]
        if addrs:
            route_iface = route_interface_for(routes, addrs[0])
            break
    return NodeAddressFacts(
        node_rank=node_rank,
        num_nodes=len(hostnames),
        node0_hostname=hostnames[0],
        interfaces=interface_addresses(),
        route_interface=route_iface,
        default_route_interface=default,
        node0_resolved=resolve(hostnames[0]) if node_rank != 0 else (),
    )


def port_is_free(addr: str, port: int) -> bool:
    """Whether a TCP listener could bind ``addr:port`` right now.

    Args:
        addr: local IPv4 address.
        port: TCP port.

    Returns:
        True when bind succeeded (the socket is closed again at once).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((addr, port))
        except OSError:
            return False
    return True
