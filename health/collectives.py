"""Collective probes run inside every rank: correctness and sustained bandwidth.

Bus bandwidth follows the nccl-tests convention (nccl-tests ``doc/PERFORMANCE.md``):
``algbw = size / time`` and

- all-reduce: ``busbw = algbw * 2(n-1)/n``;
- all-gather and reduce-scatter: ``busbw = algbw * (n-1)/n``,

where ``size`` is the whole buffer in bytes (the all-reduce buffer, the all-gather
output, the reduce-scatter input) and ``n`` the ranks in the group. GB/s here is
1e9 bytes/s. ``time`` is the slowest rank's mean per iteration: every rank times the
loop of ``timed_iters`` back-to-back operations (CUDA events on GPU, wall clock on
CPU), divides by the count, and the maximum over ranks is used (DESIGN.md 4.5).
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests bus-bandwidth factor.

    Args:
        op: ``all_reduce``, ``all_gather`` or ``reduce_scatter``.
        world_size: ranks in the group (n).

    Returns:
        ``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for the other two (nccl-tests
        ``doc/PERFORMANCE.md``); 0 for one rank.

    Raises:
        ValueError: for an unknown op or ``world_size < 1``.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    n = world_size
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    raise ValueError(f"unknown collective {op!r}; known {OPS}")


def busbw_gbps(op: str, size_bytes: int, seconds: float, world_size: int) -> float:
    """Bus bandwidth in GB/s (1e9 B/s) per nccl-tests.

    Args:
        op: collective name (see ``bus_factor``).
        size_bytes: whole buffer size, bytes.
        seconds: time of one operation (slowest-rank mean), s.
        world_size: ranks in the group.

    Returns:
        ``size_bytes / seconds * bus_factor(op, world_size) / 1e9``.

    Raises:
        ValueError: if ``seconds`` is not positive.
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    return size_bytes / seconds * bus_factor(op, world_size) / 1e9


@dataclasses.dataclass(frozen=True)
class CorrectnessResult:
    """Scalar all-reduce of ``rank + 1`` on every rank (DESIGN.md 4.4)."""

    world_size: int
    expected: int
    """n(n+1)/2."""
    observed: tuple[int, ...]
    """The sum each rank saw, index = rank."""
    duration_s: float
    """Slowest rank's wall time of the first collective, s (includes lazy init)."""

    @property
    def ok(self) -> bool:
        """Every rank saw the exact expected sum."""
        return len(self.observed) == self.world_size and all(
            v == self.expected for v in self.observed
        )


@dataclasses.dataclass(frozen=True)
class BandwidthResult:
    """One sustained collective measurement over one group of ranks."""

    op: str
    backend: str
    dtype: str
    size_bytes: int
    """Whole buffer (nccl-tests ``size``), bytes."""
    group: tuple[int, ...]
    """Global ranks in the group."""
    warmup_iters: int
    timed_iters: int
    timer: str
    """``cuda_events`` or ``wall``."""
    per_rank_mean_s: tuple[float, ...]
    """Each rank's mean seconds per operation, group order."""
    p50_ms: float
    """Median over iterations of the slowest rank's per-iteration time, ms."""
    p95_ms: float

    @property
    def world_size(self) -> int:
        """Ranks in the group."""
        return len(self.group)

    @property
    def slowest_rank_mean_s(self) -> float:
        """Max over ranks of the mean time per operation, s."""
        return max(self.per_rank_mean_s)

    @property
    def algbw_gbps(self) -> float:
        """size / slowest-rank mean, GB/s."""
        return self.size_bytes / self.slowest_rank_mean_s / 1e9

    @property
    def busbw_gbps(self) -> float:
        """nccl-tests bus bandwidth, GB/s (``busbw_gbps``)."""
        return busbw_gbps(self.op, self.size_bytes, self.slowest_rank_mean_s, self.world_size)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy including the derived bandwidths."""
        out = dataclasses.asdict(self)
        out.update(
            slowest_rank_mean_s=self.slowest_rank_mean_s,
            algbw_gbps=self.algbw_gbps,
            busbw_gbps=self.busbw_gbps,
        )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BandwidthResult:
        """Inverse of ``to_dict`` (derived keys ignored).

        Args:
            data: a ``to_dict`` mapping.

        Returns:
            The result.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["group"] = tuple(kw["group"])
        kw["per_rank_mean_s"] = tuple(kw["per_rank_mean_s"])
        return cls(**kw)


def check_correctness(device: torch.device, group: Any = None) -> CorrectnessResult:
    """All-reduce ``rank + 1`` (int64) and gather what every rank saw.

    Args:
        device: this rank's device (``cpu`` for gloo, ``cuda:<local rank>`` for NCCL).
        group: process group (default world).

    Returns:
        The result; ``ok`` is False when any rank saw a wrong sum.
    """
    import torch  # noqa: PLC0415 - keep this module importable without torch (judge)
    import torch.distributed as dist  # noqa: PLC0415

    rank = dist.get_rank(group)
    n = dist.get_world_size(group)
    t0 = time.perf_counter()
    value = torch.tensor([rank + 1], dtype=torch.int64, device=device)
    dist.all_reduce(value, group=group)
    observed_local = int(value.item())
    elapsed = time.perf_counter() - t0
    both = torch.tensor([observed_local, int(elapsed * 1e9)], dtype=torch.int64, device=device)
    gathered = [torch.empty_like(both) for _ in range(n)]
    dist.all_gather(gathered, both, group=group)
    rows = [g.tolist() for g in gathered]
    return CorrectnessResult(
        world_size=n,
        expected=n * (n + 1) // 2,
        observed=tuple(int(r[0]) for r in rows),
        duration_s=max(r[1] for r in rows) / 1e9,
    )


def _launch(op: str, out: torch.Tensor, inp: torch.Tensor, group: Any) -> None:
    import torch.distributed as dist  # noqa: PLC0415

    if op == "all_reduce":
        dist.all_reduce(inp, group=group)
    elif op == "all_gather":
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        fn(out, inp, group=group)
    else:
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        fn(out, inp, group=group)


def measure_bandwidth(
    op: str,
    *,
    num_elements: int,
    dtype: torch.dtype,
    device: torch.device,
    warmup_iters: int,
    timed_iters: int,
    group: Any = None,
    group_ranks: Sequence[int] | None = None,
) -> BandwidthResult:
    """Time a sustained collective and return the slowest-rank numbers.

    Every rank of ``group`` must call this with the same arguments.

    Args:
        op: ``all_reduce``, ``all_gather`` or ``reduce_scatter``.
        num_elements: whole-buffer elements (rounded down to a multiple of the group
            size for the sharded ops).
        dtype: element type (bf16 by default in the criteria).
        device: this rank's device.
        warmup_iters: untimed operations first.
        timed_iters: timed operations.
        group: process group (default world).
        group_ranks: global ranks of ``group``, stored with the result.

    Returns:
        The measurement (per-rank means, slowest-rank p50/p95).

    Raises:
        ValueError: for an unknown op or too few elements for the group.
    """
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    bus_factor(op, 1)
    n = dist.get_world_size(group)
    count = num_elements - num_elements % n
    if count <= 0:
        raise ValueError(f"num_elements {num_elements} < group size {n}")
    shard = count // n
    big = torch.ones(count, dtype=dtype, device=device)
    small = torch.ones(shard, dtype=dtype, device=device)
    if op == "all_reduce":
        out, inp = big, big
    elif op == "all_gather":
        out, inp = big, small
    else:
        out, inp = small, big
    for _ in range(warmup_iters):
        _launch(op, out, inp, group)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(timed_iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(timed_iters)]
        for i in range(timed_iters):
            starts[i].record()
            _launch(op, out, inp, group)
            ends[i].record()
        torch.cuda.synchronize(device)
        per_iter_s = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]
        mean_s = starts[0].elapsed_time(ends[-1]) / 1e3 / timed_iters
    else:
        dist.barrier(group=group)
        per_iter_s = []
        t_loop = time.perf_counter()
        for _ in range(timed_iters):
            t0 = time.perf_counter()
            _launch(op, out, inp, group)
            per_iter_s.append(time.perf_counter() - t0)
        mean_s = (time.perf_counter() - t_loop) / timed_iters
    # Slowest rank per iteration (MAX) and every rank's mean (all_gather).
    stats = torch.tensor(per_iter_s, dtype=torch.float64, device=device)
    dist.all_reduce(stats, op=dist.ReduceOp.MAX, group=group)
    mean_t = torch.tensor([mean_s], dtype=torch.float64, device=device)
    means = [torch.empty_like(mean_t) for _ in range(n)]
    dist.all_gather(means, mean_t, group=group)
    slowest_iter_ms = sorted(v * 1e3 for v in stats.tolist())
    p95_index = min(len(slowest_iter_ms) - 1, int(round(0.95 * (len(slowest_iter_ms) - 1))))
    del big, small, out, inp
    return BandwidthResult(
        op=op,
        backend=dist.get_backend(group),
        dtype=str(dtype).removeprefix("torch."),
        size_bytes=count * torch.tensor([], dtype=dtype).element_size(),
        group=tuple(group_ranks) if group_ranks is not None else tuple(range(n)),
        warmup_iters=warmup_iters,
        timed_iters=timed_iters,
        timer="cuda_events" if cuda else "wall",
        per_rank_mean_s=tuple(float(m.item()) for m in means),
        p50_ms=statistics.median(slowest_iter_ms),
        p95_ms=slowest_iter_ms[p95_index],
    )


def localization_groups(world_size: int, ranks_per_node: int) -> list[list[tuple[int, ...]]]:
    """Rounds of disjoint rank groups that localize a slow link or tray.

    Args:
        world_size: ranks in the allocation.
        ranks_per_node: ranks per node (tray).

    Returns:
        Rounds; within a round groups are disjoint so they run at once. Round 1 pairs
        (0,1),(2,3),...; round 2 pairs (1,2),(3,4),...,(n-1,0) when n > 2; with more
        than one node a final round holds one group per tray.
    """
    rounds: list[list[tuple[int, ...]]] = []
    if world_size >= 2:
        rounds.append([(i, i + 1) for i in range(0, world_size - 1, 2)])
    if world_size > 2:
        rounds.append([(i, (i + 1) % world_size) for i in range(1, world_size, 2)])
    if 1 < ranks_per_node < world_size:
        rounds.append(
            [tuple(range(s, s + ranks_per_node)) for s in range(0, world_size, ranks_per_node)]
        )
    return rounds


def localize(
    op: str,
    *,
    rounds: Sequence[Sequence[tuple[int, ...]]],
    num_elements: int,
    dtype: torch.dtype,
    device: torch.device,
    warmup_iters: int,
    timed_iters: int,
) -> list[BandwidthResult]:
    """Time ``op`` on every localization group; every rank must call this.

    Args:
        op: collective name.
        rounds: ``localization_groups`` output.
        num_elements: whole-buffer elements per group.
        dtype: element type.
        device: this rank's device.
        warmup_iters: untimed operations per group.
        timed_iters: timed operations per group.

    Returns:
        The results of the groups this rank belonged to (one per round at most).
    """
    import torch.distributed as dist  # noqa: PLC0415

    rank = dist.get_rank()
    results = []
    for groups in rounds:
        handles = [dist.new_group(list(g)) for g in groups]
        for g, handle in zip(groups, handles, strict=True):
            if rank in g:
                results.append(
                    measure_bandwidth(
                        op,
                        num_elements=num_elements,
                        dtype=dtype,
                        device=device,
                        warmup_iters=warmup_iters,
                        timed_iters=timed_iters,
                        group=handle,
                        group_ranks=g,
                    )
                )
        dist.barrier()
    return results
