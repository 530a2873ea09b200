"""Frozen inputs and outputs of the semantic comparison (issue 19; pure).

A gate's timing verdict says whether X is faster; its semantic verdict says whether X
still trains the same thing. The controls A and B run the same configuration, so their
disagreement is the floor any candidate difference is judged against, as the timing
verdict judges a delta against the controls' drift (DESIGN.md section 3).

Statuses, in the order the comparison decides them:

* ``not checked``: a run printed no semantics record (external commands may not).
* ``not comparable``: the samples (or tokens) per optimizer step differ between the
  sides and the gate did not declare a batch change.
* ``changed``: dtype coverage differs, or a loss / gradient-norm / probe value of a
  candidate copy lies outside the tolerance (the first step and quantity are named).
* ``declared change``: the gate declared the batch change; the series are not compared
  (they train a different batch), dtypes are; timing is compared per sample.
* ``equal``: every compared value is bitwise equal to the controls'.
* ``within tolerance``: otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DECLARABLE_CHANGES",
    "MAX_FLOOR_PREFIX_STEPS",
    "SEMANTIC_STATUSES",
    "RunSemantics",
    "SemanticPolicy",
    "SemanticVerdict",
]

SEMANTIC_STATUSES = ("equal", "within tolerance", "changed", "not comparable", "declared change",
                     "not checked")
DECLARABLE_CHANGES = ("batch",)
"""Changes a gate may declare (``GateCreate.declare_changes``, ``--declare-change``)."""


def _int_or_none(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"semantics {key} must be an integer >= 1, got {value!r}")
    return value


def _floats(obj: Mapping[str, Any], key: str) -> tuple[float, ...]:
    values = obj.get(key) or []
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"semantics {key} must be a list of numbers")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"semantics {key} must hold finite numbers, got {v!r}")
        out.append(float(v))
    return tuple(out)


@dataclass(frozen=True)
class RunSemantics:
    """What one run trained (the stored ``runs.semantics`` of docs/record-contract.md)."""

    role: str
    """``A``, ``B`` or ``X``."""
    order: int
    """Position of the run in the gate's pattern."""
    samples_per_step: int | None = None
    """Global batch: local batch x gradient accumulation x data-parallel world."""
    tokens_per_step: int | None = None
    """Video tokens per optimizer step (samples x tokens per sample), if known."""
    batch: Mapping[str, Any] = field(default_factory=dict)
    """``local_batch_size``, ``grad_accum_steps``, ``world_size`` as printed."""
    compute_dtype: str | None = None
    """Working (compute) parameter dtype, e.g. ``bfloat16``; picks the reassociation
    allowance (:attr:`SemanticPolicy.min_rel_tol`)."""
    series_first_step: int = 0
    """Step index of the first entry of ``loss`` and ``grad_norm``."""
    loss: tuple[float, ...] = ()
    """Loss per optimizer step."""
    grad_norm: tuple[float, ...] = ()
    """Global pre-clip gradient L2 norm per optimizer step."""
    dtypes: Mapping[str, Any] | None = None
    """Dtype coverage (``param_dtypes``, ``state_dtypes``, ...), or None if not printed."""
    probe: Mapping[str, Any] | None = None
    """``{"step", "tensors": {name: {"sha256", "l2_norm", ...}}}`` or None."""

    @classmethod
    def from_stored(cls, role: str, order: int, obj: Mapping[str, Any]) -> RunSemantics:
        """Build from the stored form.

        Raises:
            ValueError: A batch value that is not an integer >= 1, or a series holding a
                non-number (naming the key).
        """
        samples = _int_or_none(obj, "samples_per_step") or _int_or_none(obj, "global_batch_size")
        precision = obj.get("precision") if isinstance(obj.get("precision"), Mapping) else {}
        first = obj.get("series_first_step") or 0
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise ValueError(f"semantics series_first_step must be an integer >= 0, got {first!r}")
        return cls(role=role, order=order, samples_per_step=samples,
                   tokens_per_step=_int_or_none(obj, "tokens_per_step"),
                   batch={k: obj.get(k) for k in ("local_batch_size", "grad_accum_steps", "world_size")},
                   compute_dtype=precision.get("param_dtype"), series_first_step=first,
                   loss=_floats(obj, "loss"), grad_norm=_floats(obj, "grad_norm"),
                   dtypes=obj.get("dtypes") if isinstance(obj.get("dtypes"), Mapping) else None,
                   probe=obj.get("probe") if isinstance(obj.get("probe"), Mapping) else None)

    def series(self, name: str) -> dict[int, float]:
        """``loss`` or ``grad_norm`` keyed by step index."""
        return {self.series_first_step + i: v for i, v in enumerate(getattr(self, name))}


MAX_FLOOR_PREFIX_STEPS = 100
"""Longest early prefix whose steps share a floor: past it the prefix stops being early and
re-creates the one-tolerance-over-the-window blindness the running floor removes."""


@dataclass(frozen=True)
class SemanticPolicy:
    """How far a candidate may differ from the controls and still train the same thing.

    Tolerance of a quantity at compared step k (relative to the control mean there):
    ``max(floor_multiplier x floor_k, min_rel_tol[compute dtype])``, where ``floor_k`` is
    the largest relative A-vs-B difference of that quantity over the compared steps up to
    k, or up to the end of the early prefix of ``floor_prefix_steps`` steps when k lies
    inside it (issue 24 point 8). The controls drift apart as training goes on: on 1xH200
    over the recipe's 60 s window (74 steps) one tolerance over all steps was 441% for
    the gradient norm (a floor of 147%), which blinded the comparison at step 0; a
    running floor keeps each step's tolerance at the disagreement seen so far.
    """

    floor_multiplier: float = 3.0
    """How many control floors a candidate may differ by (the controls' own spread is
    one sample of run-to-run nondeterminism; 3 leaves room for a second)."""
    min_rel_tol: Mapping[str, float] = field(default_factory=lambda: {
        "float32": 1e-4, "bfloat16": 4e-3, "float16": 1e-3})
    """Allowance for a change of summation order (a packed GEMM, another reduction split)
    when the controls are bitwise equal, relative, per compute dtype. float32: packing the
    QKV GEMMs of the tiny recipe moved loss and gradient norm by at most 1e-7 relative in
    6 steps (tests/integration/test_gate_local.py), 1e-4 leaves three orders of margin;
    bfloat16: one unit in the last place (2^-8 = 3.9e-3); on 2x H200 the full-width recipe's
    A vs B loss floor was 8.8e-5 and split QKV deviated 8.8e-5, a dropped block 2.2% at step 0
    (benchmarks/results/semantic_floor_h200x2_2026-12-01.txt)."""
    default_rel_tol: float = 1e-3
    """Allowance when the compute dtype is not known (harness logs)."""
    floor_prefix_steps: int = 5
    """Compared steps at the start that share one floor, the largest A-vs-B difference
    among them (1: every step's floor is the running maximum up to that step). Five
    steps: two runs of the same code often agree bit for bit at step 0 and part from
    step 1 (benchmarks/results/semantic_floor_h200x2_2026-12-01.txt), so a floor of step
    0 alone would be one draw of the controls' noise; a recipe (``[measure]
    semantic_floor_prefix_steps``) or a gate request may name another count, at most
    :data:`MAX_FLOOR_PREFIX_STEPS`."""

    def __post_init__(self) -> None:
        if (isinstance(self.floor_prefix_steps, bool) or not isinstance(self.floor_prefix_steps, int)
                or not 1 <= self.floor_prefix_steps <= MAX_FLOOR_PREFIX_STEPS):
            raise ValueError(f"floor_prefix_steps must be an integer in 1..{MAX_FLOOR_PREFIX_STEPS}, "
                             f"got {self.floor_prefix_steps!r}")
        if not (math.isfinite(self.floor_multiplier) and self.floor_multiplier >= 1.0):
            raise ValueError(f"floor_multiplier must be a finite number >= 1, got {self.floor_multiplier!r}")
        for name, tol in {**dict(self.min_rel_tol), "default": self.default_rel_tol}.items():
            if not (isinstance(tol, (int, float)) and 0.0 <= tol < 1.0):
                raise ValueError(f"min_rel_tol[{name}] must be in [0, 1), got {tol!r}")

    def allowance(self, compute_dtype: str | None) -> float:
        """The relative allowance for runs computing in ``compute_dtype``."""
        return float(self.min_rel_tol.get(compute_dtype or "", self.default_rel_tol))


@dataclass(frozen=True)
class SemanticVerdict:
    """The semantic result of one gate, with its evidence."""

    status: str
    """One of :data:`SEMANTIC_STATUSES`."""
    reason: str
    """One sentence: why, naming the first differing step and quantity when changed."""
    floor: Mapping[str, Any] = field(default_factory=dict)
    """The controls' disagreement: ``deterministic`` (bitwise equal), relative
    ``loss``/``grad_norm`` spread, ``probe_equal``, tolerances used."""
    findings: tuple[Mapping[str, Any], ...] = ()
    """Every difference found (``kind``: ``dtype``/``series``/``probe``/``batch``;
    ``quantity``, ``step``, values, tolerance)."""
    batch: Mapping[str, Any] = field(default_factory=dict)
    """Samples and tokens per step of each side, and whether a change was declared."""
    copies: tuple[Mapping[str, Any], ...] = ()
    """Per candidate copy: largest relative deviation per quantity, equal or not."""
    per_sample_timing: bool = False
    """True when the timing verdict compares time per sample (a declared batch change)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (stored as ``semantic_verdicts.numbers``)."""
        return {"status": self.status, "reason": self.reason, "floor": dict(self.floor),
                "findings": [dict(f) for f in self.findings], "batch": dict(self.batch),
                "copies": [dict(c) for c in self.copies], "per_sample_timing": self.per_sample_timing}
