"""Use case helper: attach every policy's verdict to ledger rows (one query per page)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.schemas.verdicts import VerdictBriefPublic
from orchestrator.schemas.views import GateSummaryPublic

__all__ = ["attach_verdicts"]


def attach_verdicts(*, session: Session, summaries: Iterable[GateSummaryPublic]) -> None:
    """Fill ``verdicts`` (primary first) and ``policies_disagree`` of each summary in place.

    Args:
        session: Open session.
        summaries: Rows of one page; their verdicts are loaded with one query.
    """
    rows = list(summaries)
    found = store.verdicts.verdicts_of_gates(session=session, gate_ids=[s.id for s in rows])
    for summary in rows:
        briefs = [VerdictBriefPublic.from_numbers(policy=p, verdict=v, is_primary=primary,
                                                  numbers=numbers)
                  for p, v, primary, numbers in found.get(summary.id, [])]
        summary.verdicts = briefs
        primary = next((b for b in briefs if b.is_primary), None)
        summary.policies_disagree = primary is not None and any(
            b.verdict != primary.verdict for b in briefs if not b.is_primary)
