"""SQL only: keyword-only functions that ``flush()`` and never ``commit()``."""

from orchestrator.store import (
    allocations,
    artifacts,
    decisions,
    gates,
    ledger,
    repos,
    runs,
    semantic_verdicts,
    tokens,
    verdicts,
    webhooks,
)

__all__ = [
    "allocations", "artifacts", "decisions", "gates", "ledger", "repos", "runs", "semantic_verdicts",
    "tokens", "verdicts", "webhooks",
]
