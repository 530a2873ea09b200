"""A tried alternative to the sequential policy's outlier rule (issue 23), not the default.

The default rule (``orchestrator/verdict/seqlook.py::_outliers``) flags the run with the
largest externally studentised residual when it exceeds the Bonferroni t critical value AND
its detrended value lies outside the range of every other run with a gap of at least
``outlier_gap`` s_(j). Two things cost power at a 1% effect with outlier runs:

* a +1.5% outlier on a candidate run lands among the controls (-1% + 1.5%), so it is never
  "outside the range" of the other runs in value space, and the gate ends neutral;
* two +3% outliers mask each other (each inflates the other's s_(j)).

The variant here measures "apart" and the gap in residual space (each run minus its role's
fit without the suspect run), against a robust scale (1.4826 x the median absolute residual
of the other runs, floored like sigma), and also flags when |residual| / robust scale exceeds
``--robust-critical``. It is patched into the engine for this process only, then
``benchmarks/verdict_noise.py`` runs with the remaining arguments, so its table is the same
suite's. Usage (repository root):

    .venv/bin/python benchmarks/outlier_rule_variant.py --robust-critical 8 --robust-gap 3 \
        -- --trials 4000 --families outlier_1.5,outliers_2,outlier,bimodal_rare,bimodal_sticky \
        --sigmas 0.1,0.25 --history none,same --policies sequential
    (``--rule default`` runs the unpatched engine on the same cells)
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

import numpy as np

from orchestrator.verdict import seqlook
from orchestrator.verdict.design import CANDIDATE
from orchestrator.verdict.seqfit import TREND_MIN_RUNS, design_columns, fit, t_isf


def robust_outliers(critical: float, gap_scales: float):
    """The variant rule with the given robust critical value and gap (in robust scales)."""

    def _outliers(policy, li, base, floor, centred):
        _, _, rss, dof, resid, lev, _ = base
        T = li.y.shape[0]
        rows = np.arange(T)
        if policy.max_replacements <= 0:
            return np.zeros(T, bool), np.full(T, -1), np.zeros(T), np.full(T, np.inf)
        n_inc = li.mask.sum(1)
        d1 = dof - 1
        one_minus_h = np.maximum(1.0 - lev, 1e-12)
        with np.errstate(divide="ignore", invalid="ignore"):
            s2 = (rss[:, None] - resid**2 / one_minus_h) / np.maximum(d1, 1)[:, None]
            s2 = np.maximum(s2, floor[:, None] ** 2)
            t_i = np.where(li.mask, np.abs(resid) / np.sqrt(s2 * one_minus_h), 0.0)
        j = np.argmax(t_i, axis=1)
        out_t = t_i[rows, j]
        out_crit = np.where(d1 >= 3, t_isf(policy.outlier_level / (2.0 * np.maximum(n_inc, 1)),
                                            d1), np.inf)
        keep = li.mask.copy()
        keep[rows, j] = False
        ck = fit(design_columns(li.codes, li.positions, keep), li.y, keep)[0]
        centre = np.where(keep, li.positions, 0.0).sum(1) / np.maximum(keep.sum(1), 1)
        trend = np.where((keep.sum(1) >= TREND_MIN_RUNS)[:, None],
                         ck[:, 2:3] * (li.positions - centre[:, None]), 0.0)
        r = li.y - (ck[:, :1] + ck[:, 1:2] * (li.codes == CANDIDATE) + trend)
        dj = r[rows, j]
        others = np.where(keep, r, np.nan)
        with np.errstate(all="ignore"):
            scale = np.maximum(1.4826 * np.nanmedian(np.abs(others), 1), floor)
            apart = (dj > np.nanmax(others, 1)) | (dj < np.nanmin(others, 1))
            gap = np.nanmin(np.abs(others - dj[:, None]), 1)
        rob_t = np.abs(dj) / scale
        flag = li.can_replace & (n_inc >= 5) & apart & (gap >= gap_scales * scale) & \
            ((out_t > out_crit) | (rob_t > critical))
        return (flag, np.where(flag, li.positions[rows, j].astype(int), -1),
                np.where(flag, np.maximum(out_t, rob_t), out_t), out_crit)

    return _outliers


def main() -> None:
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rule", choices=("robust", "default"), default="robust")
    p.add_argument("--robust-critical", type=float, default=8.0)
    p.add_argument("--robust-gap", type=float, default=3.0)
    args = p.parse_args(own)
    print(f"# outlier_rule_variant: rule={args.rule} robust_critical={args.robust_critical} "
          f"robust_gap={args.robust_gap}")
    if args.rule == "robust":
        seqlook._outliers = robust_outliers(args.robust_critical, args.robust_gap)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.argv = [os.path.join(here, "verdict_noise.py")] + rest
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
