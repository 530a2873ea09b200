"""Live progress of a gate for its page (polled while the gate is not finished)."""

from __future__ import annotations

from orchestrator.domain.api_model import PublicModel

__all__ = ["GateLivePublic", "RunLivePublic"]


class RunLivePublic(PublicModel):
    """One run of a gate as it progresses."""

    id: int
    order: int
    role: str | None
    label: str
    """``A0``, ``X1``, ... (role and position in the pattern)."""
    status: str
    num_steps: int
    """Step records stored so far."""
    num_steps_expected: int
    """Warmup plus measured steps the run takes under the gate's measurement rule (the fewest
    while a steady warmup has not settled; a time window at the step time seen so far)."""
    num_steps_expected_max: int | None = None
    """The most steps it may take (a steady warmup up to ``max_warmup_steps``)."""
    position: str | None = None
    """``run 5 of 6 planned, at most 14`` (1-based)."""
    num_warmup_steps: int
    median_step_s: float | None
    """Run median over the measured steps, seconds (once the run ended)."""
    mean_step_s: float | None
    """Mean of the step times stored so far, seconds."""
    eta_s: float | None
    """Seconds until this run ends: remaining steps x the mean step time (plus the mean
    launch overhead of finished runs for a pending run); 0 when ended, None when unknown."""
    steps_s: list[float] = []
    """Slowest-rank step times so far, seconds (the first ``max_steps`` of them)."""


class GateLivePublic(PublicModel):
    """Status, per-run step counts and an ETA of one gate."""

    id: int
    status: str
    status_reason: str | None
    active: bool
    """The gate is queued, submitted or running (the page keeps polling)."""
    num_steps_done: int
    num_steps_planned: int
    """Steps of the runs planned so far (a sequential gate may add runs)."""
    num_runs_planned: int = 0
    """Runs the gate holds now (a sequential gate adds pairs while undecided)."""
    max_runs: int = 0
    """Most runs the gate may take (the sequential policy's ``max_runs``, or the pattern plus
    its ``X B`` extensions)."""
    position: str | None = None
    """The running run's ``run 5 of 6 planned, at most 14``, None when none runs."""
    measurement: str = ""
    """The gate's measurement rule in words (``run_plan.MeasurementRule.describe``)."""
    eta_s: float | None
    """Seconds until the planned runs end, None while no step time is known."""
    eta_max_s: float | None = None
    """Seconds until the gate ends at the latest (every run of its budget), None while no
    step time is known."""
    midpoint_s: float | None = None
    """Control midpoint of the primary verdict, seconds (decision band of the plot)."""
    threshold_pct: float | None = None
    """Threshold of the primary verdict, percent (half-width of the decision band)."""
    runs: list[RunLivePublic]
