"""Pure verdict engine: run statistics, gate arithmetic and timing verdicts.

No I/O, database, web framework, torch or clock (enforced by
tests/unit/verdict/test_verdict_purity.py). Vocabulary and rules: DESIGN.md
sections 1-3. Typical use::

    policy = get_policy("drift", max_drift_pct=2.0)
    verdict = judge(measurement, policy, history=history)
    verdict.to_dict()
"""

from orchestrator.verdict.builder import (
    history_from_pairs,
    judge_policies,
    mfu_numerator,
    verdict_kind,
)
from orchestrator.verdict.explain import plain_sentence
from orchestrator.verdict.model import (
    CANDIDATE_VERDICTS,
    GATE_KINDS,
    REGATE_VERDICTS,
    BracketDetail,
    ControlHistory,
    GateMeasurement,
    RunSummary,
    StatisticalDetail,
    Verdict,
)
from orchestrator.verdict.policy import DriftPolicy, Policy, RatioCIPolicy
from orchestrator.verdict.precision import median_interval_halfwidth_pct
from orchestrator.verdict.registry import (
    DEFAULT_POLICY_NAME,
    POLICY_NAMES,
    get_policy,
    judge,
    measurement_from_pattern,
    verdict_from_medians,
)
from orchestrator.verdict.runstats import RunStatistics, run_statistics

__all__ = [
    "CANDIDATE_VERDICTS",
    "DEFAULT_POLICY_NAME",
    "GATE_KINDS",
    "POLICY_NAMES",
    "REGATE_VERDICTS",
    "BracketDetail",
    "ControlHistory",
    "DriftPolicy",
    "GateMeasurement",
    "Policy",
    "RatioCIPolicy",
    "RunStatistics",
    "RunSummary",
    "StatisticalDetail",
    "Verdict",
    "get_policy",
    "history_from_pairs",
    "judge",
    "judge_policies",
    "measurement_from_pattern",
    "median_interval_halfwidth_pct",
    "mfu_numerator",
    "plain_sentence",
    "run_statistics",
    "verdict_from_medians",
    "verdict_kind",
]
