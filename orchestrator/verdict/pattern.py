"""Gate arithmetic shared by every policy: brackets, midpoint, drift, delta, MFU.

Source: DESIGN.md sections 1 and 3. Definitions for patterns longer than A X B
(A X B X A, A X B X A X B, A X X B, ...):

* Bracket of a candidate copy X_i: the nearest control before it (L_i) and the
  nearest control after it (R_i) in pattern order; a copy after the last control
  (a sequential gate that stopped after a ``C X`` pair) has R_i = L_i. Bracket midpoint
  m_i = (L_i + R_i) / 2; copy delta d_i = X_i - m_i.
* Gate midpoint M = mean over copies of m_i. For A X B this is (A + B) / 2.
  In A X B X A it is (A1 + 2 B + A2) / 4: a control between two copies counts
  for both, which cancels a drift that is linear in time.
* Candidate step time C = mean over copies of X_i; delta = C - M
  (= mean of the copy deltas), in ms and as a percentage of M.
* Drift = (max - min over ALL control medians) / M. For A X B this is
  abs(A - B) / midpoint. With more controls the range can only grow, so the
  drift rule becomes stricter, never looser, as controls are added.
* Sign conflict: at least one copy delta < 0 and at least one > 0.
* Log contrast (statistical policy): D = mean_i [ln X_i - (ln L_i + ln R_i) / 2],
  a linear combination sum_j w_j ln t_j of the runs' log medians; under
  independent run-to-run noise of variance s^2 its variance is s^2 sum_j w_j^2
  (1.5 s^2 for A X B, 0.875 s^2 for A X B X A).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.verdict.model import GateMeasurement, RunSummary
from orchestrator.verdict.result import BracketDetail


@dataclass(frozen=True)
class GateNumbers:
    """Numbers every policy reports (see the module docstring for definitions)."""

    midpoint_s: float
    candidate_s: float
    drift_pct: float
    delta_ms: float
    delta_pct: float
    brackets: tuple[BracketDetail, ...]
    sign_conflict: bool
    log_contrast: float
    """D, natural log of the candidate/control ratio estimate."""
    contrast_sum_sq_weights: float
    """sum_j w_j^2 of the log contrast (variance factor)."""
    control_log_medians: tuple[float, ...]
    """ln of every control median, pattern order."""


def _brackets(runs: tuple[RunSummary, ...]) -> list[tuple[RunSummary, RunSummary, RunSummary]]:
    out = []
    for i, run in enumerate(runs):
        if run.role != "X":
            continue
        left = next(r for r in reversed(runs[:i]) if r.is_control)
        right = next((r for r in runs[i + 1 :] if r.is_control), left)
        out.append((left, run, right))
    return out


def compute_gate_numbers(measurement: GateMeasurement) -> GateNumbers:
    """Compute midpoint, drift, delta, brackets and the log contrast.

    Args:
        measurement: A gate whose runs all succeeded.

    Returns:
        The gate's :class:`GateNumbers`.
    """
    runs = measurement.runs
    triples = _brackets(runs)
    details = []
    weights: dict[int, float] = {}
    num_copies = len(triples)
    for left, cand, right in triples:
        mid = (left.median_step_s + right.median_step_s) / 2.0
        delta_s = cand.median_step_s - mid
        details.append(
            BracketDetail(
                candidate_order=cand.order,
                candidate_s=cand.median_step_s,
                left_order=left.order,
                right_order=right.order,
                left_s=left.median_step_s,
                right_s=right.median_step_s,
                midpoint_s=mid,
                drift_pct=abs(left.median_step_s - right.median_step_s) / mid * 100.0,
                delta_ms=delta_s * 1000.0,
                delta_pct=delta_s / mid * 100.0,
            )
        )
        weights[cand.order] = weights.get(cand.order, 0.0) + 1.0 / num_copies
        for ctrl in (left, right):
            weights[ctrl.order] = weights.get(ctrl.order, 0.0) - 0.5 / num_copies
    midpoint = math.fsum(d.midpoint_s for d in details) / num_copies
    candidate = math.fsum(d.candidate_s for d in details) / num_copies
    controls = [run.median_step_s for run in runs if run.is_control]
    by_order = {run.order: run for run in runs}
    log_contrast = math.fsum(w * math.log(by_order[o].median_step_s) for o, w in weights.items())
    deltas = [d.delta_pct for d in details]
    return GateNumbers(
        midpoint_s=midpoint,
        candidate_s=candidate,
        drift_pct=(max(controls) - min(controls)) / midpoint * 100.0,
        delta_ms=(candidate - midpoint) * 1000.0,
        delta_pct=(candidate - midpoint) / midpoint * 100.0,
        brackets=tuple(details),
        sign_conflict=any(d < 0 for d in deltas) and any(d > 0 for d in deltas),
        log_contrast=log_contrast,
        contrast_sum_sq_weights=math.fsum(w * w for w in weights.values()),
        control_log_medians=tuple(math.log(c) for c in controls),
    )


@dataclass(frozen=True)
class Efficiency:
    """MFU and throughput of both sides (DESIGN.md sections 1 and 3)."""

    mfu_candidate_pct: float | None
    mfu_control_pct: float | None
    mfu_points: float | None
    throughput_candidate: float
    throughput_control: float
    throughput_scope: str


def _world_size(runs: list[RunSummary]) -> int | None:
    sizes = {run.world_size for run in runs}
    if None in sizes or len(sizes) != 1:
        return None
    return sizes.pop()


def compute_efficiency(measurement: GateMeasurement, numbers: GateNumbers) -> Efficiency:
    """MFU and throughput; the control is evaluated at the midpoint step time.

    MFU% = numerator x local batch x grad accum / step seconds (DESIGN.md
    section 1); MFU points = MFU(candidate) - MFU(midpoint) (section 3).
    Throughput, samples/s = local batch x grad accum x world size / step seconds,
    assuming data parallelism over all ranks (the bundled FSDP2 trainer); when a
    side's runs do not all record the same world size it is per rank.

    Args:
        measurement: The gate.
        numbers: Its :func:`compute_gate_numbers` result.

    Returns:
        The :class:`Efficiency` numbers.
    """
    ctrl_samples = measurement.control_local_batch_size * measurement.control_grad_accum_steps
    cand_samples = measurement.candidate_local_batch_size * measurement.candidate_grad_accum_steps
    ctrl_world = _world_size([r for r in measurement.runs if r.is_control])
    cand_world = _world_size([r for r in measurement.runs if not r.is_control])
    if ctrl_world is not None and cand_world is not None:
        scope = "allocation"
    else:
        scope, ctrl_world, cand_world = "rank", 1, 1
    mfu_cand = mfu_ctrl = points = None
    numerator = measurement.mfu_numerator_pct_s
    if numerator is not None:
        mfu_cand = numerator * cand_samples / numbers.candidate_s
        mfu_ctrl = numerator * ctrl_samples / numbers.midpoint_s
        points = mfu_cand - mfu_ctrl
    return Efficiency(
        mfu_candidate_pct=mfu_cand,
        mfu_control_pct=mfu_ctrl,
        mfu_points=points,
        throughput_candidate=cand_samples * cand_world / numbers.candidate_s,
        throughput_control=ctrl_samples * ctrl_world / numbers.midpoint_s,
        throughput_scope=scope,
    )


@dataclass(frozen=True)
class Decision:
    """A policy's verdict, its one-sentence reason and the margin it used."""

    verdict: str
    reason: str
    threshold_pct: float
