"""Frozen output dataclasses of the verdict engine: the verdict and its details.

Every number carries its unit in its name or docstring; ``Verdict.to_dict`` is the one
JSON shape stored by the ledger and printed by the CLI (only str, int, float, bool,
None, list and dict).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BracketDetail:
    """One candidate copy and the two controls that bracket it."""

    candidate_order: int
    """Pattern position of the candidate copy."""
    candidate_s: float
    """Run median of the copy, seconds."""
    left_order: int
    """Pattern position of the nearest control before the copy."""
    right_order: int
    """Pattern position of the nearest control after the copy."""
    left_s: float
    """Run median of the left control, seconds."""
    right_s: float
    """Run median of the right control, seconds."""
    midpoint_s: float
    """(left + right) / 2, seconds."""
    drift_pct: float
    """abs(left - right) / midpoint x 100, percent."""
    delta_ms: float
    """(candidate - midpoint) x 1000, milliseconds; negative is faster."""
    delta_pct: float
    """(candidate - midpoint) / midpoint x 100, percent."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict of the fields."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class StatisticalDetail:
    """Interval and calibration numbers of the ``ratio-ci`` policy."""

    ratio_pct: float
    """Estimated candidate/control step-time ratio minus 1, percent."""
    ci_low_pct: float
    """Lower bound of the two-sided interval of the ratio minus 1, percent."""
    ci_high_pct: float
    """Upper bound of the two-sided interval of the ratio minus 1, percent."""
    confidence: float
    """Two-sided coverage of the interval (e.g. 0.98)."""
    mde_pct: float
    """Minimum detectable effect: smallest true speedup (candidate) or change
    (regate), percent of control step time, found with probability ``mde_power``."""
    mde_power: float
    """Power used for ``mde_pct``."""
    run_sigma_pct: float
    """Estimated run-to-run standard deviation of log run medians x 100 (about percent)."""
    dof: int
    """Degrees of freedom of ``run_sigma_pct`` (gate pairs + history pairs)."""
    num_gate_control_pairs: int
    """Degrees of freedom from this gate's own controls (number of controls - 1)."""
    num_history_pairs: int
    """Degrees of freedom from the ledger's control history."""
    num_history_gates: int
    """Number of earlier gates whose controls were used."""
    calibration: str
    """``gate``, ``gate+history`` or ``floor``: where the run-to-run spread came from."""
    sigma_floor_pct: float = 0.0
    """Floor under ``run_sigma_pct``, percent: the runs' own median standard errors
    (root mean square, relative) or the policy's ``min_sigma_pct``, whichever is larger."""
    not_enough_control_pairs: bool = False
    """True when the interval is too wide to mean anything: the effect detectable with
    ``mde_power`` exceeds a factor 2 of the control step time (MDE > 100%). UIs print
    "not enough control pairs" instead of the interval's percentages."""
    num_history_gates_available: int = 0
    """History entries passed in (before the ``max_history_gates`` limit)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict of the fields."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class SequentialDetail:
    """Looks, boundary, calibration checks and run budget of the ``sequential`` policy."""

    sequential_state: str
    """``decided`` (a boundary was crossed), ``extend`` (undecided and the budget allows
    another X + control pair) or ``exhausted`` (undecided, budget used up)."""
    next_roles: tuple[str, ...]
    """Roles the allocation should run next (empty unless ``extend``)."""
    num_looks: int
    """Looks evaluated, up to and including the deciding (or last) look."""
    num_looks_planned: int
    """Looks of the planned pattern at ``max_runs``."""
    max_runs: int
    """Run budget of the gate, conditioning runs included."""
    num_runs_used: int
    """Runs up to the deciding (or last) look, conditioning runs included."""
    num_runs_planned: int
    """Runs of the planned pattern (<= max_runs, or the gate's own length if longer)."""
    planned_pattern: str
    """Roles of the planned pattern, e.g. ``AAXBXAXBXA``."""
    num_conditioning_runs: int
    """Leading control runs excluded from the estimate (first-run effect)."""
    first_run_offset_pct: float | None
    """Conditioning run minus the next control run, percent of the latter (the
    measured first-run effect); None without a conditioning run."""
    z_boundary: float | None
    """Group-sequential boundary of the deciding (or last) look, standard-normal scale;
    None when that look spends no error (too few degrees of freedom planned)."""
    critical_value: float | None
    """The interval's multiplier on the Student t scale at ``dof`` (the boundary's
    nominal level; the final look's level at a look that spends no error); None when
    sigma has no degrees of freedom."""
    alpha_spent: float
    """One-sided error spent up to this look, per side (false accept, false reject)."""
    information_fraction: float
    """Variance of the final planned estimate / variance of this look's estimate."""
    history_check: str
    """``none`` (no history), ``consistent`` (kept, weighted: it adds
    ``num_history_pairs`` dof, 0 while the gate has too few own dof), ``dropped`` (gate
    noisier than history, or history noisier than the gate, at the check levels), or
    ``unchecked`` (the gate has no own degrees of freedom)."""
    history_check_f: float | None
    """Variance ratio gate / history of the consistency check; None when not run."""
    history_check_critical: float | None
    """Critical value of that F ratio: the upper one, or the lower one when the history
    was dropped as noisier than the gate; None when not run."""
    num_history_gates_dropped: int
    """History entries left out by the consistency check."""
    num_history_pairs_dropped: int
    """Degrees of freedom left out by the consistency check."""
    history_gate_ids_used: tuple[str, ...]
    """``ControlHistory.gate_ids`` of the entries used (empty when ids were not given)."""
    num_multimodal_runs: int
    """Runs (of those used) whose measured steps are multimodal."""
    multimodal_orders: tuple[int, ...]
    """Pattern positions of those runs."""
    design: str = "alternate"
    """Run order of the plan (``design.py``): ``mirror`` or ``alternate``."""
    design_seed: int | None = None
    """Seed of the randomised run order (None: the pattern was judged as given)."""
    excluded_orders: tuple[int, ...] = ()
    """Runs left out as outliers (each measured again), pattern positions."""
    excluded_reasons: tuple[str, ...] = ()
    """Why, one sentence per excluded run."""
    two_state_fit: bool = False
    """True when a look found the runs in two states and fitted the state as a covariate."""
    split_guard_held: bool = False
    """True when a look held an accept/reject back because the candidate/control split
    could have been two run states lining up by chance."""
    early_look: bool = False
    """True when the deciding (or last) look was the early look a consistent history opens."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict of the fields (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Verdict:
    """A timing verdict and every number it was computed from (DESIGN.md section 3).

    Numbers are None when the verdict is ``failed``. MFU fields are None when
    the gate gives no MFU numerator.
    """

    policy: str
    """Policy name, e.g. ``drift``."""
    policy_version: str
    """Version of the policy's rules; bumped whenever a rule changes."""
    params: Mapping[str, Any]
    """The policy's parameters as used."""
    kind: str
    """``candidate`` or ``regate``."""
    verdict: str
    """accept/neutral/reject/inconclusive (candidate), pass/regression/improvement
    (regate), or failed."""
    reason: str
    """One sentence saying why, with the deciding numbers."""
    pattern: str
    """Roles in pattern order, e.g. ``AXB``."""
    num_runs: int
    """Runs in the gate (GPU-time cost)."""
    midpoint_s: float | None = None
    """Control midpoint, seconds: mean of the brackets' (left + right) / 2."""
    candidate_s: float | None = None
    """Mean of the candidate copies' run medians, seconds."""
    drift_pct: float | None = None
    """(max - min of all control medians) / midpoint x 100, percent."""
    delta_ms: float | None = None
    """(candidate - midpoint) x 1000, milliseconds; negative is faster."""
    delta_pct: float | None = None
    """(candidate - midpoint) / midpoint x 100, percent."""
    threshold_pct: float | None = None
    """The margin the delta or the interval was compared with, percent."""
    sign_conflict: bool = False
    """True when candidate copies' deltas have opposite signs."""
    brackets: tuple[BracketDetail, ...] = ()
    """One entry per candidate copy, in pattern order."""
    mfu_candidate_pct: float | None = None
    """MFU of the candidate at ``candidate_s``, percent."""
    mfu_control_pct: float | None = None
    """MFU of the control at ``midpoint_s``, percent (DESIGN.md section 3)."""
    mfu_points: float | None = None
    """mfu_candidate_pct - mfu_control_pct, percentage points."""
    throughput_candidate: float | None = None
    """Samples per second of the candidate at ``candidate_s``."""
    throughput_control: float | None = None
    """Samples per second of the control at ``midpoint_s``."""
    throughput_scope: str | None = None
    """``allocation`` (x world size) or ``rank`` (world size not recorded)."""
    statistics: StatisticalDetail | None = None
    """Interval details, set by the ``ratio-ci`` and ``sequential`` policies."""
    sequential: SequentialDetail | None = None
    """Looks, boundary and budget, set by the ``sequential`` policy."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Policy-specific numbers not covered above."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (only str, int, float, bool, None, list, dict).

        Returns:
            All fields; ``brackets`` as a list of dicts, ``copy_deltas_pct`` as
            the list of per-copy delta percentages, and the statistical and
            sequential details flattened into the top level when present.
        """
        out: dict[str, Any] = {
            "policy": self.policy,
            "policy_version": self.policy_version,
            "params": dict(self.params),
            "kind": self.kind,
            "verdict": self.verdict,
            "reason": self.reason,
            "pattern": self.pattern,
            "num_runs": self.num_runs,
            "midpoint_s": self.midpoint_s,
            "candidate_s": self.candidate_s,
            "drift_pct": self.drift_pct,
            "delta_ms": self.delta_ms,
            "delta_pct": self.delta_pct,
            "threshold_pct": self.threshold_pct,
            "sign_conflict": self.sign_conflict,
            "num_candidate_copies": len(self.brackets),
            "copy_deltas_pct": [b.delta_pct for b in self.brackets],
            "brackets": [b.to_dict() for b in self.brackets],
            "mfu_candidate_pct": self.mfu_candidate_pct,
            "mfu_control_pct": self.mfu_control_pct,
            "mfu_points": self.mfu_points,
            "throughput_candidate": self.throughput_candidate,
            "throughput_control": self.throughput_control,
            "throughput_scope": self.throughput_scope,
        }
        if self.statistics is not None:
            out.update(self.statistics.to_dict())
        if self.sequential is not None:
            out.update(self.sequential.to_dict())
        out.update(dict(self.extra))
        return out
