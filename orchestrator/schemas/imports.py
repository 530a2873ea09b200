"""Pydantic models at the boundary (API bodies, CLI ``--json`` output).

Names follow the FastAPI template: ``*Create`` for input, ``*Public`` for output.
ORM objects never leave the use-case layer; these do.
"""

from __future__ import annotations

from pydantic import ConfigDict

from orchestrator.domain.api_model import PublicModel

__all__ = ["RunImportPublic"]


class RunImportPublic(PublicModel):
    """What ``axbgate import-log`` / ``POST /runs/import`` reports for one log."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """The file that was imported."""
    log_sha256: str
    """SHA-256 of the raw bytes of the log (same as ``sha256sum``)."""
    size_bytes: int
    """Size of the log in bytes."""
    stored_path: str
    """Where the kept copy of the log lives (content-addressed)."""
    dialect: str | None
    """``axbgate``, ``bf16``, ``mixed`` or ``None`` (no records)."""
    already_imported: bool = False
    """The same bytes were imported before; the earlier rows are returned unchanged."""
    run_id: int | None = None
    """The stored run, if the log held run records."""
    status: str | None = None
    """``succeeded`` or ``failed`` (failed runs are stored, not measured)."""
    error: str | None = None
    """Why the run failed."""
    median_step_s: float | None = None
    """Run median recomputed from the per-step slowest-rank times, seconds."""
    log_median_step_s: float | None = None
    """The median the log printed itself, seconds."""
    median_mismatch: bool = False
    """True when the two medians disagree (more than 1e-9 relative)."""
    warmup_steps: int | None = None
    """Warmup steps discarded."""
    measured_steps: int | None = None
    """Steps whose median is reported."""
    num_steps: int = 0
    """Per-step times found in the log, warmup included."""
    mfu_pct: float | None = None
    """MFU the log reported, percent."""
    allocation_id: int | None = None
    """The stored allocation, if the log held health records."""
    health_verdict: str | None = None
    """``healthy`` / ``degraded`` / ``failed`` from the log's allocation record."""
    num_health_checks: int = 0
    """Health-check rows stored."""
    step_series: str | None = None
    """Where the per-step series came from: ``slowest_rank`` (a timing record's list or
    every step's slowest-rank time) or ``rank0`` (only rank 0's own step times were in
    the log, e.g. a harness log of ``BF16_STEP`` lines without ``BF16_TIMING``)."""
    notes: list[str] = []
    """How the log was read (e.g. that its series is rank 0's time, not the slowest rank's;
    that the harness's fixed step counts were used)."""
