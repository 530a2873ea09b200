"""Per-node link check: which tray of a multi-node allocation has a slow socket link.

An all-reduce across nodes only shows that SOME link is slow. Here the first rank of each
node (its "leader") sends a buffer to its neighbours on the node ring in both directions,
one directed link at a time, so a tray whose sending (egress) or receiving (ingress) side
is slow shows up as every one of its outgoing, or incoming, links being slow:

- a directed link ``a -> b`` is slow when its rate is below ``fail_ratio`` x the fastest
  link's rate AND below ``floor_gbps`` (so scheduling jitter on a fast link, a few ms on
  a 4 MiB transfer, never reads as a slow tray);
- a node is named when ALL its outgoing links are slow (egress) while some link is not;
  failing that, when all its incoming links are slow (ingress).

With two nodes ``a -> b`` slow and ``b -> a`` fast reads as ``a``'s egress (it could also
be ``b``'s ingress: with two nodes nothing tells them apart; with three or more it does).

Rates are Gbit/s = 8 x bytes / seconds / 1e9, from the fastest of ``iters`` timed
transfers (what the link can do; a slow link is slow every time); each transfer is timed
at the sender from the send to a one-element reply.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

__all__ = ["LINK_BYTES", "judge_links", "link_pairs", "measure_links"]

LINK_BYTES = 4 * 1024 * 1024
"""Bytes per timed transfer (4 MiB: ~3 ms at 10 Gbit/s, ~0.7 s at 50 Mbit/s)."""


def link_pairs(num_nodes: int) -> list[tuple[int, int]]:
    """Directed node links measured: each node to its ring neighbours, both ways.

    Returns:
        ``[(src_node, dst_node), ...]`` without duplicates; empty for one node.
    """
    pairs: list[tuple[int, int]] = []
    for a in range(num_nodes):
        b = (a + 1) % num_nodes
        for pair in ((a, b), (b, a)):
            if a != b and pair not in pairs:
                pairs.append(pair)
    return pairs


def measure_links(*, rank: int, ranks_per_node: int, num_nodes: int, hosts: Sequence[str],
                  device: Any = None, nbytes: int = LINK_BYTES, iters: int = 3) -> list[dict[str, Any]]:
    """Time every directed link of :func:`link_pairs`; every rank must call this.

    Args:
        rank: This rank (node-major numbering: node ``n``'s leader is ``n x ranks_per_node``).
        ranks_per_node: Ranks per node.
        num_nodes: Nodes.
        hosts: Host name of each node, node order.
        device: Where the buffers live: the rank's device (CUDA under NCCL, so the GPU
            fabric is what is timed), CPU by default (gloo).
        nbytes: Bytes per transfer.
        iters: Timed transfers per link (after one untimed).

    Returns:
        On a sending leader, one ``{"src", "dst", "bytes", "seconds", "gbps"}`` per link it
        sent on; elsewhere empty.
    """
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    device = device if device is not None else torch.device("cpu")
    buf = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    ack = torch.zeros(1, dtype=torch.uint8, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    out = []
    for src, dst in link_pairs(num_nodes):
        s, d = src * ranks_per_node, dst * ranks_per_node
        if rank == s:
            times = []
            for i in range(iters + 1):
                t0 = time.perf_counter()
                dist.send(buf, d)
                dist.recv(ack, d)
                sync(device)  # NCCL returns before the transfer ends
                if i:
                    times.append(time.perf_counter() - t0)
            sec = min(times)
            out.append({"src": hosts[src], "dst": hosts[dst], "bytes": nbytes, "seconds": sec,
                        "gbps": 8 * nbytes / sec / 1e9})
        elif rank == d:
            for _ in range(iters + 1):
                dist.recv(buf, s)
                dist.send(ack, s)
        dist.barrier()
    return out


def judge_links(links: Sequence[dict[str, Any]], fail_ratio: float = 0.25, floor_gbps: float = 1.0
                ) -> tuple[bool, list[str], str, dict[str, Any]]:
    """Find the slow node(s) from measured directed links (pure).

    Args:
        links: :func:`measure_links` output of every leader.
        fail_ratio: A link slower than this fraction of the fastest ...
        floor_gbps: ... and slower than this many Gbit/s is slow.

    Returns:
        (ok, slow node names, one-line message, measured dict for the check record).
    """
    rates = {(x["src"], x["dst"]): float(x["gbps"]) for x in links}
    measured: dict[str, Any] = {"gbps_by_link": {f"{a}->{b}": round(v, 4) for (a, b), v in rates.items()}}
    if not rates:
        return True, [], "single node: no links between nodes", measured
    fastest = max(rates.values())
    limit = min(fail_ratio * fastest, floor_gbps)
    slow = {k for k, v in rates.items() if v < limit}
    measured["fail_below_gbps"] = round(limit, 4)
    if not slow:
        return True, [], f"{len(rates)} links, slowest {min(rates.values()):.3g} Gbit/s", measured
    nodes = sorted({n for pair in rates for n in pair})
    egress = [n for n in nodes if (outs := [k for k in rates if k[0] == n]) and set(outs) <= slow]
    ingress = [n for n in nodes if (ins := [k for k in rates if k[1] == n]) and set(ins) <= slow]
    named, side = (egress, "sending") if egress else (ingress, "receiving")
    detail = ", ".join(f"{a}->{b} {rates[(a, b)]:.3g} Gbit/s" for a, b in sorted(slow))
    if not named:
        return False, [], (f"slow links ({detail}; fastest {fastest:.3g} Gbit/s) but no single "
                           "node explains them"), measured
    return False, named, (f"slow tray {', '.join(named)} ({side} side): {detail}, below "
                          f"{limit:.3g} Gbit/s (fastest link {fastest:.3g} Gbit/s)"), measured
