"""What a team may record as a gate's decision (DESIGN.md section 1, decision): any timing
verdict, or ``rerun``. The one list that the use case checks and the CLI's help names."""

from __future__ import annotations

__all__ = ["DECISIONS"]

DECISIONS = ("accept", "reject", "neutral", "inconclusive", "pass", "regression", "improvement",
             "rerun")
"""Decisions :func:`orchestrator.usecases.gates.record_decision` accepts."""
