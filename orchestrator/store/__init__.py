"""SQL only: keyword-only functions that ``flush()`` and never ``commit()``."""

from orchestrator.store import allocations, artifacts, decisions, gates, ledger, runs, tokens, verdicts

__all__ = ["allocations", "artifacts", "decisions", "gates", "ledger", "runs", "tokens", "verdicts"]
