"""The disagreement text and the plain sentence come from the actual verdicts (issue 25).

Every verdict here is judged by the real engine (``judge_policies``) on run medians."""

from __future__ import annotations

from orchestrator.usecases.verdict_briefs import disagreement_text
from orchestrator.schemas.verdicts import VerdictBriefPublic
from orchestrator.verdict import RunSummary, judge_policies, plain_sentence

# A sequential gate whose conditioning control ran 16 % slow: the sequential policy leaves it
# out and accepts, the drift rule sees a 16.1 % control range and cannot decide.
_SLOW_FIRST = [1.16, 1.0, 0.95, 1.001, 0.951, 0.999, 0.949, 1.0]


def _runs(pattern: str, medians: list[float]) -> list[RunSummary]:
    return [RunSummary(role=r, order=i, median_step_s=m)
            for i, (r, m) in enumerate(zip(pattern.split(), medians, strict=True))]


def _verdicts(pattern, medians, policy):
    out = judge_policies(_runs(pattern, medians), kind="candidate", policy=policy)
    return [{"policy": v.policy, "verdict": v.verdict, "is_primary": i == 0,
             "numbers": v.to_dict()} for i, v in enumerate(out)]


def test_disagreement_names_each_policy_with_its_numbers_and_never_blames_drift_wrongly():
    verdicts = _verdicts("A A X B X A X B", _SLOW_FIRST, "sequential")
    assert [(v["policy"], v["verdict"]) for v in verdicts] == [
        ("sequential", "accept"), ("drift", "inconclusive"), ("ratio-ci", "inconclusive")]
    text = disagreement_text(verdicts)
    assert text.startswith("Policies disagree on the same runs: sequential (primary) said accept "
                           "(delta -5.00 %, interval [-5.40, -4.60] %); drift said inconclusive "
                           "(delta -5.00 %, control drift 16.10 % above its 2 % limit)")
    assert "The primary policy (sequential) decides: accept." in text
    assert "drift found the controls too far apart to decide (they moved by 16.10 %)" in text
    # drift did not accept: its no-effect accept rate is not the caution here
    assert "20%" not in text


def test_disagreement_cites_the_drift_rules_false_accept_rate_only_when_drift_accepted():
    # DESIGN.md's first worked example: drift accepts, the interval policies cannot decide
    verdicts = _verdicts("A X B", [0.4284051351, 0.4148231971, 0.4264598510], "sequential")
    by_policy = {v["policy"]: v["verdict"] for v in verdicts}
    assert by_policy == {"sequential": "inconclusive", "drift": "accept", "ratio-ci": "inconclusive"}
    text = disagreement_text(verdicts)
    assert "drift said accept (delta -2.95 %, band +/-0.46 % set by the control drift)" in text
    assert "The primary policy (sequential) decides: inconclusive." in text
    assert "with no true effect it accepts about 20% of candidates on a single A X B" in text


def test_disagreement_from_briefs_and_none_when_all_agree():
    verdicts = _verdicts("A A X B X A X B", _SLOW_FIRST, "sequential")
    briefs = [VerdictBriefPublic.from_numbers(policy=v["policy"], verdict=v["verdict"],
                                              is_primary=v["is_primary"], numbers=v["numbers"])
              for v in verdicts]
    text = disagreement_text(briefs)
    assert "sequential (primary) said accept (delta -5.00 %, interval [-5.40, -4.60] %)" in text
    assert "drift said inconclusive (delta -5.00 %, control drift 16.10 %)" in text
    same = [v for v in verdicts if v["verdict"] == "inconclusive"]
    assert disagreement_text(same) == ""
    assert disagreement_text(verdicts[:1]) == ""


def test_plain_sentence_never_says_a_large_drift_makes_axbgate_accept():
    seq, drift, _ = _verdicts("A A X B X A X B", _SLOW_FIRST, "sequential")
    sentence = plain_sentence(seq["numbers"])
    assert sentence.startswith("The candidate's median step was 5.0% shorter than the controls' "
                               "midpoint (1 s); its 99.6% interval [-5.40%, -4.60%] given "
                               "run-to-run noise of 0.10% (sigma) lies below 0%, so axbgate "
                               "accepts the candidate")
    assert ("the controls ranged over 16.10% (slowest minus fastest); the conditioning run, left "
            "out of the estimate, was +16.00% off the next control") in sentence
    assert "differed by 16" not in sentence
    drift_sentence = plain_sentence(drift["numbers"])
    assert "more than the 2% the drift rule allows" in drift_sentence
    assert "so this gate cannot decide" in drift_sentence and "accepts" not in drift_sentence


def test_plain_sentence_of_the_drift_rule_names_its_band():
    drift = _verdicts("A X B", [0.4284051351, 0.4148231971, 0.4264598510], "drift")[0]
    assert plain_sentence(drift["numbers"]) == (
        "The candidate's median step was 3.0% shorter than the controls' midpoint (0.4274 s); "
        "the two controls differed by 0.46% (the delta must exceed 0.46%), so axbgate accepts "
        "the candidate.")
