"""The semantic verdict as the API, the pages and the CLI show it (issue 19)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ConfigDict

from orchestrator.domain.api_model import PublicModel

__all__ = ["SemanticVerdictPublic"]


class SemanticVerdictPublic(PublicModel):
    """The semantic comparison of a gate (issue 19) and the decision it combines into."""

    model_config = ConfigDict(from_attributes=True)

    status: str
    """equal, within tolerance, changed, not comparable, declared change or not checked."""
    timing_verdict: str | None = None
    """The primary timing verdict it was combined with."""
    decision: str | None = None
    """Timing and semantics combined (``reject (semantics)``, ``not comparable``, or the
    timing verdict)."""
    numbers: dict[str, Any] = {}
    """Evidence: ``reason``, ``floor`` (the controls' disagreement and the tolerances),
    ``findings`` (first differing step and quantity, dtype coverage), ``batch``, ``copies``."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
