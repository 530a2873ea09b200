"""The A/A gate measured on 1xH200 at the recipe's 60 s window (ltx2-bench-h200, 77 compared
steps, bf16 compute; benchmarks/results/gate_cost_h200x1_2026-12-01, ``fixed-window60``):
the stored semantics of its A, X (the same code) and B run logs, read by the real parser."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

WINDOW60_RUNS = (Path(__file__).resolve().parents[1] / "benchmarks" / "results"
                 / "gate_cost_h200x1_2026-12-01" / "fixed-window60.runs.tgz")


def window60_semantics(out: Path) -> list[tuple[str, int, dict[str, Any]]]:
    """``(role, order, stored semantics)`` of the A, X and B runs, pattern order.

    Args:
        out: An empty folder to unpack the run logs into (never the working tree).
    """
    from orchestrator.domain.measure import measure_run
    from orchestrator.domain.records import parse

    with tarfile.open(WINDOW60_RUNS) as tar:
        tar.extractall(out, filter="data")
    return [(role, order, measure_run(parse((out / f"{order:02d}-{role}.log").read_text())).fields["semantics"])
            for order, role in enumerate("AXB")]
