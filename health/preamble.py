"""The multi-node launch preamble (DESIGN.md section 5), as a pure function.

Facts about this node (its interfaces and addresses, which interface routes to the
other nodes, what node 0's hostname resolves to here) go in; the environment
variables every rank of a run needs come out. The health gate and the gate driver
both call ``build_preamble`` so that a healthy gate proves the launch the runs use.
Gathering the facts is ``health.network``'s job; nothing here touches the system.

Rules:

- the socket interface is the configured one, else the one holding the route to the
  other nodes, else the default-route interface, else the first non-loopback one;
- ``MASTER_ADDR`` is a raw IPv4 address, never a hostname and never loopback: on node
  0 its own address on that interface (a hosts file mapping the host's own name to
  127.0.1.1 breaks Gloo's full mesh, DESIGN.md section 5), elsewhere the resolution
  of node 0's hostname with loopback answers dropped;
- ``MASTER_PORT`` is fresh per run yet agreed by every node without talking:
  ``derive_master_port(job_id, run_index)``;
- ``NCCL_*``, ``TORCH_*``, ``NVSHMEM_*``, ``GLOO_*``, ``CUDA_*`` and ``PYTORCH_*``
  variables pass through unchanged unless the gate overrides them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import logging
from collections.abc import Mapping

logger = logging.getLogger(__name__)

PASSTHROUGH_PREFIXES: tuple[str, ...] = (
    "NCCL_",
    "TORCH_",
    "NVSHMEM_",
    "GLOO_",
    "CUDA_",
    "PYTORCH_",
)
"""Environment prefixes copied from the launching environment."""

MULTICAST_SAFETY_ENV: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""NVLink-multicast switches that some shared machines require off; the preamble
keeps whatever the launching environment set for them and warns when an override
changes one."""

PORT_RANGE: tuple[int, int] = (20000, 32768)
"""MASTER_PORT range [low, high): above well-known ports and below the Linux default
ephemeral range (ip_local_port_range 32768-60999), so an outgoing connection of another
process cannot already hold the derived port."""


@dataclasses.dataclass(frozen=True)
class NodeAddressFacts:
    """What ``health.network.gather_address_facts`` learned on one node."""

    node_rank: int
    """This node's index in the allocation (0 = rendezvous host)."""
    num_nodes: int
    node0_hostname: str
    """Hostname of node 0 as the scheduler names it."""
    interfaces: Mapping[str, tuple[str, ...]]
    """Interface name -> its IPv4 addresses (loopback included)."""
    route_interface: str | None = None
    """Interface the kernel routes the other nodes' addresses through, if known."""
    default_route_interface: str | None = None
    node0_resolved: tuple[str, ...] = ()
    """Addresses node 0's hostname resolves to on this node (DNS or hosts file)."""


@dataclasses.dataclass(frozen=True)
class Preamble:
    """The computed launch environment and how it was decided."""

    env: Mapping[str, str]
    """Variables to export for every rank of the run."""
    interface: str
    master_addr: str
    master_port: int
    reason: str
    """One line: which rule chose the interface and the address."""


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def _is_ipv4(addr: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(addr), ipaddress.IPv4Address)
    except ValueError:
        return False


def derive_master_port(job_id: str, run_index: int) -> int:
    """A MASTER_PORT every node computes alike, different for every run.

    Args:
        job_id: the scheduler job id (or any allocation-unique string).
        run_index: 0 for the health gate, then 1, 2, ... for the runs.

    Returns:
        A port in ``PORT_RANGE``: SHA-256 of ``"<job_id>:<run_index>"`` modulo the range.

    Raises:
        ValueError: if ``run_index`` is negative.
    """
    if run_index < 0:
        raise ValueError(f"run_index must be >= 0, got {run_index}")
    low, high = PORT_RANGE
    digest = hashlib.sha256(f"{job_id}:{run_index}".encode()).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low)


def choose_interface(facts: NodeAddressFacts, preferred: str | None = None) -> tuple[str, str]:
    """Pick the socket interface.

    Args:
        facts: this node's address facts.
        preferred: a configured interface name (e.g. from ``AXBGATE_HEALTH_IFNAME``).

    Returns:
        (interface name, the rule that chose it).

    Raises:
        ValueError: if ``preferred`` is not an interface with an IPv4 address, or if no
            non-loopback interface with an IPv4 address exists.
    """
    usable = {
        name: addrs
        for name, addrs in facts.interfaces.items()
        if any(_is_ipv4(a) and not _is_loopback(a) for a in addrs)
    }
    if preferred:
        if preferred not in usable:
            raise ValueError(
                f"configured interface {preferred!r} has no non-loopback IPv4 address; "
                f"usable: {sorted(usable)}"
            )
        return preferred, "configured"
    if facts.route_interface in usable:
        return facts.route_interface, "route to the other nodes"
    if facts.default_route_interface in usable:
        return facts.default_route_interface, "default route"
    if not usable:
        raise ValueError("no non-loopback interface with an IPv4 address")
    name = sorted(usable)[0]
    return name, "first non-loopback interface"


def choose_master_addr(facts: NodeAddressFacts, interface: str) -> tuple[str, str]:
    """Pick MASTER_ADDR as a raw, non-loopback IPv4 address.

    Args:
        facts: this node's address facts.
        interface: the chosen socket interface.

    Returns:
        (address, the rule that chose it).

    Raises:
        ValueError: on node 0 when the interface has no usable address; elsewhere when
            node 0's hostname resolves only to loopback (or nothing) on this node.
    """
    if facts.node_rank == 0:
        own = [
            a for a in facts.interfaces.get(interface, ()) if _is_ipv4(a) and not _is_loopback(a)
        ]
        if not own:
            raise ValueError(f"interface {interface!r} has no non-loopback IPv4 address")
        return own[0], f"node 0 own address on {interface}"
    resolved = [a for a in facts.node0_resolved if _is_ipv4(a) and not _is_loopback(a)]
    if not resolved:
        raise ValueError(
            f"node 0 hostname {facts.node0_hostname!r} resolves only to "
            f"{list(facts.node0_resolved)} here: no routable IPv4 address"
        )
    return resolved[0], f"resolution of node 0 hostname {facts.node0_hostname!r}"


def build_preamble(
    facts: NodeAddressFacts,
    *,
    master_port: int,
    base_env: Mapping[str, str],
    preferred_interface: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Preamble:
    """Compute the launch environment of one run on one node.

    Args:
        facts: this node's address facts (``health.network.gather_address_facts``).
        master_port: the run's rendezvous port (``derive_master_port``), 1..65535.
        base_env: the launching environment; variables with ``PASSTHROUGH_PREFIXES``
            are copied unchanged.
        preferred_interface: configured socket interface, overriding auto-detection.
        overrides: variables the gate sets explicitly; they win over everything,
            ``MASTER_ADDR``/``MASTER_PORT`` and the socket ifnames included.

    Returns:
        The preamble: ``GLOO_SOCKET_IFNAME``, ``NCCL_SOCKET_IFNAME``, ``MASTER_ADDR``,
        ``MASTER_PORT`` plus the passed-through variables.

    Raises:
        ValueError: if the port is out of range, or interface / address selection fails
            (``choose_interface``, ``choose_master_addr``).
    """
    if not 0 < master_port < 65536:
        raise ValueError(f"master_port must be in 1..65535, got {master_port}")
    interface, why_iface = choose_interface(facts, preferred_interface)
    master_addr, why_addr = choose_master_addr(facts, interface)
    env = {k: v for k, v in base_env.items() if k.startswith(PASSTHROUGH_PREFIXES)}
    env.update(
        {
            "GLOO_SOCKET_IFNAME": interface,
            "NCCL_SOCKET_IFNAME": interface,
            "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(master_port),
        }
    )
    for key, value in (overrides or {}).items():
        if key in MULTICAST_SAFETY_ENV and env.get(key) not in (None, value):
            logger.warning("preamble override changes %s=%s to %s", key, env.get(key), value)
        env[key] = value
    if env["MASTER_ADDR"] != master_addr and _is_loopback(env["MASTER_ADDR"]):
        raise ValueError(f"MASTER_ADDR override {env['MASTER_ADDR']!r} is loopback")
    return Preamble(
        env=env,
        interface=env["GLOO_SOCKET_IFNAME"],
        master_addr=env["MASTER_ADDR"],
        master_port=int(env["MASTER_PORT"]),
        reason=f"interface: {why_iface}; MASTER_ADDR: {why_addr}",
    )
