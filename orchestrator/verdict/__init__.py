"""Pure verdict engine: run statistics, gate arithmetic and timing verdicts.

No I/O, database, web framework, torch or clock (enforced by
tests/unit/verdict/test_verdict_purity.py). Vocabulary and rules: DESIGN.md
sections 1-3. Typical use::

    policy = get_policy("drift", max_drift_pct=2.0)
    verdict = judge(measurement, policy, history=history)
    verdict.to_dict()

Sequential gates (the default policy): the allocation runs ``next_roles(None, policy)``,
then, after each look, ``next_roles(measurement, policy, history=history)`` until it is
empty; the stored verdict is ``judge(measurement, policy, history=history)``.
Offline re-judging: ``verdict_from_json(obj)``.
"""

from orchestrator.verdict.builder import (
    history_from_pairs,
    judge_policies,
    mfu_numerator,
    plan_next_roles,
    summary_from_fields,
    verdict_kind,
)
from orchestrator.verdict.explain import plain_sentence
from orchestrator.verdict.model import (
    CANDIDATE_VERDICTS,
    GATE_KINDS,
    REGATE_VERDICTS,
    ControlHistory,
    GateMeasurement,
    RunSummary,
)
from orchestrator.verdict.offline import verdict_from_json
from orchestrator.verdict.policy import DriftPolicy, Policy, RatioCIPolicy, SequentialPolicy
from orchestrator.verdict.precision import median_interval_halfwidth_pct
from orchestrator.verdict.registry import (
    DEFAULT_POLICY_NAME,
    POLICY_NAMES,
    get_policy,
    judge,
    measurement_from_pattern,
    next_roles,
    verdict_from_medians,
)
from orchestrator.verdict.result import (
    BracketDetail,
    SequentialDetail,
    StatisticalDetail,
    Verdict,
)
from orchestrator.verdict.runstats import RunStatistics, build_run_summary, run_statistics
from orchestrator.verdict.sequential import history_entry, initial_roles

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
    "SequentialDetail",
    "SequentialPolicy",
    "StatisticalDetail",
    "Verdict",
    "build_run_summary",
    "get_policy",
    "history_entry",
    "history_from_pairs",
    "initial_roles",
    "judge",
    "judge_policies",
    "measurement_from_pattern",
    "median_interval_halfwidth_pct",
    "mfu_numerator",
    "next_roles",
    "plain_sentence",
    "plan_next_roles",
    "run_statistics",
    "summary_from_fields",
    "verdict_from_json",
    "verdict_from_medians",
    "verdict_kind",
]
