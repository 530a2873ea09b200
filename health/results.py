"""Everything one health gate measured, in one frozen value that ``judge`` consumes.

Rank processes write plain JSON (``rank.RankState``); ``collect_results`` turns the
ranks' files (or, under Slurm, rank 0's in-memory state) into ``GateResults``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from health.collectives import BandwidthResult, CorrectnessResult
from health.inventory import NodeFacts
from health.load import LoadResult
from health.network import NetworkResult
from health.timeouts import HangRecord, RankExit

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StageError:
    """A stage that raised instead of finishing."""

    stage: str
    rank: int
    host: str
    message: str
    traceback: str = ""


@dataclasses.dataclass(frozen=True)
class GateResults:
    """All measurements of one gate (no judgement)."""

    world_size: int
    num_nodes: int
    backend: str
    nodes: tuple[NodeFacts, ...] = ()
    network: tuple[NetworkResult, ...] = ()
    stage_seconds: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Rank 0's wall time per finished stage, s."""
    correctness: CorrectnessResult | None = None
    bandwidth: tuple[BandwidthResult, ...] = ()
    localize: tuple[BandwidthResult, ...] = ()
    links: tuple[Mapping[str, Any], ...] = ()
    """Directed node links measured by ``health.links`` (multi-node only)."""
    loads: tuple[LoadResult, ...] = ()
    hangs: tuple[HangRecord, ...] = ()
    errors: tuple[StageError, ...] = ()
    rank_exits: tuple[RankExit, ...] = ()
    timed_out: bool = False
    """The launcher's overall deadline expired (a hang no rank reported itself)."""


def collect_results(
    states: Sequence[Mapping[str, Any] | None],
    *,
    world_size: int,
    num_nodes: int,
    backend: str,
    network: Sequence[NetworkResult] = (),
    rank_exits: Sequence[RankExit] = (),
    timed_out: bool = False,
    deadline_s: float = 0.0,
) -> GateResults:
    """Merge rank states into the gate's results.

    Rank 0's state carries everything gathered across ranks (node facts, load
    results, localization); the others add only what rank 0 lacks: their own
    hangs and errors, and their node facts when the gather never happened.

    Args:
        states: per-rank ``RankState`` mappings (None for a rank that wrote nothing).
        world_size: ranks in the gate.
        num_nodes: nodes in the gate.
        backend: ``gloo`` or ``nccl``.
        network: the network stage result per node known here.
        rank_exits: how the local rank processes ended (launcher mode).
        timed_out: the launcher's overall deadline expired.
        deadline_s: that overall deadline, s (stored in supervisor hang records).

    Returns:
        The merged results.
    """
    live = [s for s in states if s]
    head = next((s for s in live if s.get("rank") == 0), live[0] if live else {})
    nodes_raw = head.get("nodes") or [s["node"] for s in live if s.get("node")]
    nodes = tuple(NodeFacts.from_dict(n) for n in nodes_raw)
    hangs = [HangRecord(**s["hang"]) for s in live if s.get("hang")]
    errors = [StageError(**s["error"]) for s in live if s.get("error")]
    reported = {h.rank for h in hangs} | {e.rank for e in errors}
    for ex in rank_exits:
        if ex.rank in reported:
            continue
        state = states[ex.rank] if ex.rank < len(states) else None
        stage = (state or {}).get("current_stage") or "unknown"
        host = (state or {}).get("host") or ""
        if timed_out and ex.terminated:
            hangs.append(HangRecord(stage, ex.rank, host, deadline_s, ex.stack_dump, "supervisor"))
        elif ex.returncode not in (0, None) and not ex.terminated:
            errors.append(StageError(stage, ex.rank, host, f"rank exited {ex.returncode}"))
    corr = head.get("correctness")
    return GateResults(
        world_size=world_size,
        num_nodes=num_nodes,
        backend=backend,
        nodes=nodes,
        network=tuple(network),
        stage_seconds=dict(head.get("stage_seconds") or {}),
        correctness=None
        if corr is None
        else CorrectnessResult(
            corr["world_size"], corr["expected"], tuple(corr["observed"]), corr["duration_s"]
        ),
        bandwidth=tuple(BandwidthResult.from_dict(b) for b in head.get("bandwidth") or ()),
        localize=tuple(BandwidthResult.from_dict(b) for b in head.get("localize") or ()),
        links=tuple(head.get("links") or ()),
        loads=tuple(LoadResult.from_dict(x) for x in head.get("loads") or ()),
        hangs=tuple(hangs),
        errors=tuple(errors),
        rank_exits=tuple(rank_exits),
        timed_out=timed_out,
    )
