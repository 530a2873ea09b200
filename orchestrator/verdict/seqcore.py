"""The arithmetic of the ``sequential`` policy, on arrays of gates at once.

One implementation serves the stored verdict of a gate (one gate: arrays of length 1,
``sequential.py``), the allocation's decision what to run next, and the simulation
benchmark (``benchmarks/verdict_noise.py``: thousands of simulated gates per call), so
the benchmark measures exactly the engine. Pure numpy/scipy.

Notation (natural-log units unless named ``_pct``): a gate's runs in order, position 0
first; the leading conditioning run(s) are measured but left out; the other runs are the
*used* runs. A run may be *excluded* (an outlier measured again). At a look the
*included* runs are the used runs not excluded; y_j their log medians, t_j their
positions. Least squares (Montgomery, Design and Analysis of Experiments, ch. 10):

    y_j = mu + effect [run j is X] (+ beta (t_j - mean t), from TREND_MIN_RUNS included runs)
          (+ gamma [run j in the upper of two run states], when two states are found)

with Var(effect) = sigma^2 v, v = [(D'D)^-1]_XX, and the residual sum of squares on
n - p degrees of freedom. The rest of a look, in order:

1. Outlier (``SequentialPolicy.outlier_level`` / ``outlier_gap``): the included run with
   the largest externally studentised residual r_j = e_j / (s_(j) sqrt(1 - h_jj)),
   s_(j)^2 = (RSS - e_j^2 / (1 - h_jj)) / (n - p - 1) (Cook & Weisberg 1982, sec. 2.2.2),
   is an outlier when r_j exceeds t_{n-p-1}(1 - level / (2 n)), its detrended value lies
   outside the range of every other included run (trend fitted without it), and its gap
   to the nearest one is at least ``outlier_gap`` s_(j). An outlier is excluded and the
   look decides nothing; the allocation measures its role again.
2. Two run states (``state_separation``): the detrended log medians are split at the
   cut that maximises the gap over the pooled within-group sigma (both groups >= 2 runs,
   sigma floored); when that separation is at least ``state_separation`` and the split
   is not the candidate/control split itself, the upper group's indicator enters the fit.
   The effect is then estimated within states (a clock state drawn per run no longer
   looks like the candidate).
3. Sigma (``calibration.py`` rules): the residual spread pooled with a consistent history
   (two-sided F check; at most ``history_weight`` history dof per own dof, or
   ``early_history_dof`` at the early look), floored by the runs' own median errors.
4. Interval: effect +- c se, c the look's boundary (``boundaries.py``) as a t quantile.
5. Split guard (``split_alpha``): an accept (reject) whose |effect| exceeds
   ``split_effect_sigmas`` sigma is held back when m, the fewest runs that must change
   side for the candidates to lie below (above) every control (conditioning runs count as
   controls), is small enough that two run states of share p, drawn independently per
   run, line up at least that well with probability max_p P(M <= m) > split_alpha. A
   consistent history whose sigma is below |effect| / ``history_gap_sigmas`` lifts it.
"""


from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from orchestrator.verdict.boundaries import NO_BOUNDARY
from orchestrator.verdict.design import CANDIDATE
from orchestrator.verdict.policy import SequentialPolicy
from orchestrator.verdict.seqfit import schedule
from orchestrator.verdict.seqlook import (
    ACCEPT,
    INCONCLUSIVE,
    NEUTRAL,
    REJECT,
    VERDICT_NAMES,
    LookArrays,
    LookInput,
    look,
)

__all__ = ["ACCEPT", "INCONCLUSIVE", "NEUTRAL", "REJECT", "VERDICT_NAMES", "LookArrays",
           "WalkResult", "mde_pct", "schedule", "walk"]

@dataclass
class WalkResult:
    """Where each of T gates stands after walking its looks."""

    state: np.ndarray
    """0 decided, 1 extend (more runs wanted), 2 exhausted (budget used, undecided)."""
    code: np.ndarray
    """Verdict code at the end (INCONCLUSIVE while extending)."""
    num_runs: np.ndarray
    """Runs up to the deciding (or last) look, conditioning and excluded runs included."""
    roles: np.ndarray
    """Role code of every position the walk used or wants (T, N); -1 beyond."""
    excluded: np.ndarray
    """Excluded (outlier) runs (T, N)."""
    next_roles: list[tuple[int, ...]]
    """Per gate, the role codes wanted next (empty unless extending)."""
    last: LookArrays | None
    """The deciding (or last evaluated) look of every gate."""
    look_index: np.ndarray
    """0-based index of that look (number of included used runs = 3 + 2 k)."""
    num_looks: np.ndarray
    """Looks evaluated, the deciding one included."""
    states_used: np.ndarray
    """True when any look of the gate fitted two run states."""
    split_blocked: np.ndarray
    """True when any look held an accept/reject back (split guard)."""
    outlier_t: list[list[tuple[int, float, float]]]
    """Per gate: (position, studentised residual, critical value) of each excluded run."""


class _Walk:
    """The state of T gates during :func:`walk` (one instance per call)."""

    def __init__(self, policy: SequentialPolicy, kind: str, plans: np.ndarray,
                 plan_lengths: np.ndarray, log_medians: np.ndarray, rel_se: np.ndarray,
                 effect_log: float, history_ss: np.ndarray | None, history_dof: int,
                 available: np.ndarray | None, insert_replacements: bool) -> None:
        T, N = log_medians.shape
        self.policy, self.kind, self.T, self.N = policy, kind, T, N
        self.plans, self.plan_lengths = plans, np.asarray(plan_lengths)
        self.log_medians, self.rel_se, self.effect_log = log_medians, rel_se, effect_log
        self.history_ss, self.history_dof = history_ss, history_dof
        self.insert = insert_replacements
        self.nc = policy.num_conditioning_runs
        self.first = self.nc + 3
        if N < self.first:
            raise ValueError(f"a sequential gate needs at least {self.first} runs")
        self.avail = np.minimum(np.full(T, N) if available is None else np.asarray(available), N)
        self.roles = np.full((T, N), -1)
        self.roles[:, :self.first] = plans[:, :self.first]
        self.excluded = np.zeros((T, N), bool)
        self.n_done = np.full(T, self.first)
        self.plan_ptr = np.full(T, self.first)
        self.replaced = np.zeros(T, dtype=int)
        self.result = WalkResult(
            state=np.full(T, -1), code=np.full(T, INCONCLUSIVE), num_runs=np.zeros(T, dtype=int),
            roles=self.roles, excluded=self.excluded, next_roles=[()] * T, last=None,
            look_index=np.zeros(T, dtype=int), num_looks=np.zeros(T, dtype=int),
            states_used=np.zeros(T, bool), split_blocked=np.zeros(T, bool),
            outlier_t=[[] for _ in range(T)])
        self._schedules()

    def _schedules(self) -> None:
        """Boundaries per distinct planned pattern (gates share them)."""
        T = self.T
        self.z = np.full((T, 64), NO_BOUNDARY)
        self.early = np.zeros((T, 64), bool)
        self.last_z = np.full(T, NO_BOUNDARY)
        groups: dict[tuple[int, ...], list[int]] = {}
        for t in range(T):
            groups.setdefault(tuple(int(c) for c in self.plans[t, :self.plan_lengths[t]]),
                              []).append(t)
        hd = self.history_dof if self.history_ss is not None else 0
        for key, members in groups.items():
            sch = schedule(key, self.nc, hd, self.policy)
            rows = np.array(members)
            self.z[rows, :len(sch.z)] = sch.z
            self.early[rows, :len(sch.early)] = sch.early
            finite = [z for z in sch.z if z != NO_BOUNDARY]
            self.last_z[rows] = finite[-1] if finite else NO_BOUNDARY

    def _look_input(self, idx: np.ndarray) -> tuple[LookInput, np.ndarray, np.ndarray]:
        """The included runs of the open gates ``idx``, compacted to the left."""
        nc = self.nc
        width = int(self.n_done[idx].max()) - nc
        sl = slice(nc, nc + width)
        r = self.roles[idx, sl]
        done = np.arange(width)[None, :] < (self.n_done[idx] - nc)[:, None]
        inc = (r >= 0) & ~self.excluded[idx, sl] & done
        order = np.argsort(~inc, axis=1, kind="stable")
        codes = np.take_along_axis(np.where(inc, r, -1), order, 1)
        mask = codes >= 0
        positions = np.take_along_axis(np.broadcast_to(np.arange(nc, nc + width, dtype=float),
                                                       r.shape), order, 1)
        vals = self.log_medians[idx, sl] + self.effect_log * (r == CANDIDATE)
        k = np.clip((mask.sum(1) - 3) // 2, 0, 63)
        left = self.plan_lengths[idx] - self.plan_ptr[idx]
        n = len(idx)
        li = LookInput(
            codes=codes, positions=positions, mask=mask,
            y=np.where(mask, np.take_along_axis(vals, order, 1), 0.0),
            rel_se=np.where(mask, np.take_along_axis(self.rel_se[idx, sl], order, 1), 0.0),
            cond_y=self.log_medians[idx, nc - 1] if nc > 0 else np.zeros(n),
            cond_pos=np.full(n, float(nc - 1)), cond_valid=np.full(n, nc > 0),
            z=self.z[idx, k], last_z=self.last_z[idx], early=self.early[idx, k],
            can_replace=(self.replaced[idx] < self.policy.max_replacements) & (left >= 2)
            & (self.n_done[idx] < self.N),
            history_ss=self.history_ss[idx] if self.history_ss is not None else None,
            history_dof=self.history_dof)
        return li, k, left

    def step(self, idx: np.ndarray) -> np.ndarray:
        """One look of the open gates ``idx``; returns the ones still open."""
        res = self.result
        li, k, left = self._look_input(idx)
        la = look(self.policy, self.kind, li)
        res.num_looks[idx] += 1
        res.states_used[idx] |= la.states
        res.split_blocked[idx] |= la.split_blocked
        decided = la.code != INCONCLUSIVE
        exhausted = ~decided & ~la.outlier & (left < 2)
        la.code = np.where(exhausted, _final_codes(la, self.kind, self.policy), la.code)
        stop = decided | exhausted
        if res.last is None:
            res.last = LookArrays(**{f: np.zeros(self.T, dtype=v.dtype)
                                     for f, v in la.__dict__.items()})
        for f, v in la.__dict__.items():
            getattr(res.last, f)[idx] = v
        res.look_index[idx] = k
        res.num_runs[idx] = self.n_done[idx]
        res.state[idx[stop]] = np.where(decided[stop], 0, 2)
        res.code[idx[stop]] = la.code[stop]
        still = [int(idx[i]) for i in np.where(~stop)[0] if self._extend(int(idx[i]), la, int(i))]
        return np.array(still, dtype=int)

    def _extend(self, t: int, la: LookArrays, i: int) -> bool:
        """Append what gate t runs next; False when it has to wait for those runs."""
        if la.outlier[i]:
            pos = int(la.outlier_pos[i])
            self.excluded[t, pos] = True
            self.result.outlier_t[t].append((pos, float(la.outlier_t[i]),
                                             float(la.outlier_critical[i])))
        if la.outlier[i] and self.insert:
            want = (int(self.roles[t, pos]),)
            self.replaced[t] += 1
        else:
            want = tuple(int(c) for c in self.plans[t, self.plan_ptr[t]:self.plan_ptr[t] + 2])
            self.plan_ptr[t] += 2
        start = int(self.n_done[t])
        if start + len(want) > self.avail[t]:
            got = max(0, int(self.avail[t]) - start)
            self.roles[t, start:start + got] = want[:got]
            self.result.state[t] = 1
            self.result.next_roles[t] = want[got:]
            return False
        self.roles[t, start:start + len(want)] = want
        self.n_done[t] = start + len(want)
        return True


def walk(policy: SequentialPolicy, kind: str, plans: np.ndarray, plan_lengths: np.ndarray,
         log_medians: np.ndarray, rel_se: np.ndarray, *, effect_log: float = 0.0,
         history_ss: np.ndarray | None = None, history_dof: int = 0,
         available: np.ndarray | None = None, insert_replacements: bool = True) -> WalkResult:
    """Walk the looks of T gates, deciding, excluding outliers and extending as the policy says.

    Runs are consumed position by position: the first ``num_conditioning_runs + 3``
    planned roles, then after each look either the role of an excluded outlier (measured
    again; not with ``insert_replacements=False``, where the plan simply continues) or the
    next planned pair. Position j's value is ``log_medians[t, j]`` plus ``effect_log`` when
    the walk puts a candidate there (simulation; 0 when the medians are the gate's own).

    Args:
        policy: The sequential policy.
        kind: ``candidate`` or ``regate``.
        plans: Planned role codes (T, P), -1 padding.
        plan_lengths: Planned runs of each gate (T,).
        log_medians: Log run medians by position (T, N), N >= what the walk may use.
        rel_se: Median standard error / median by position (T, N), 0 when unknown.
        effect_log: Added to candidate positions (simulation of a true effect).
        history_ss: Per-gate log sum of squares of the selected history (T,), or None.
        history_dof: Its degrees of freedom (the same for every gate).
        available: Runs measured so far per gate (T,); a gate that needs more stops with
            state extend. None: all N.
        insert_replacements: Measure an excluded run's role again (the allocation) or not
            (a pattern given as it is).

    Returns:
        The :class:`WalkResult`.

    Raises:
        ValueError: Fewer positions than the first look needs.
    """
    w = _Walk(policy, kind, plans, plan_lengths, log_medians, rel_se, effect_log, history_ss,
              history_dof, available, insert_replacements)
    short = w.avail < w.first
    w.result.state[short] = 1
    for t in np.where(short)[0]:
        w.result.next_roles[t] = tuple(int(c) for c in plans[t, w.avail[t]:w.first])
    open_ = np.where(~short)[0]
    while len(open_):
        open_ = w.step(open_)
    return w.result


def _final_codes(la: LookArrays, kind: str, policy: SequentialPolicy) -> np.ndarray:
    """Budget used up: neutral / pass when the MDE is at most max_mde_pct, else inconclusive."""
    return np.where(mde_pct(la.mde_log, kind, policy) <= policy.max_mde_pct, NEUTRAL, INCONCLUSIVE)


def mde_pct(mde_log: np.ndarray, kind: str, policy: SequentialPolicy) -> np.ndarray:
    """Minimum detectable effect, percent of the control step time (capped at 1e6).

    Candidate: accept needs D + c se < ln(1 - min_effect), so the detectable speedup is
    1 - exp(ln(1 - m) - mde_log). Re-gate: a change beyond exp(mde_log + ln(1 + tol)) - 1.
    """
    if kind == "candidate":
        log = mde_log - math.log1p(-policy.min_effect_pct / 100.0)
        return -np.expm1(-log) * 100.0
    log = np.minimum(mde_log + math.log1p(policy.tolerance_pct / 100.0), 14.0)
    return np.minimum(np.expm1(log) * 100.0, 1e6)
