"""verdict_from_json: the offline re-judging helper behind --history / --batch."""

from __future__ import annotations

import json

import pytest

from orchestrator.verdict import (
    ControlHistory,
    get_policy,
    judge,
    measurement_from_pattern,
    verdict_from_json,
)

# conditioning A, then A X B X A X B with X 1% faster: accepted at look 3 (8 runs)
GATE = {"pattern": "AAXBXAXB", "medians_s": [0.996, 1.0, 0.99, 1.002, 0.989, 0.9985, 0.9905, 1.001]}
PAIRS = [[1.0, 1.0028], [1.0, 0.9972]] * 10


def test_defaults_to_the_sequential_policy_and_matches_judge() -> None:
    out = verdict_from_json({**GATE, "history": PAIRS, "id": "g-7"})
    ref = judge(measurement_from_pattern(GATE["pattern"], GATE["medians_s"]),
                get_policy("sequential"),
                history=ControlHistory(pairs=PAIRS)).to_dict()
    assert out == {"id": "g-7", **ref}
    assert out["policy"] == "sequential" and out["verdict"] == "accept"
    json.dumps(out, allow_nan=False)


def test_drift_policy_reproduces_the_design_worked_example() -> None:
    out = verdict_from_json({"pattern": "AXB", "policy": "drift",
                             "medians_s": [0.4284051351, 0.4148231971, 0.4264598510]})
    assert out["verdict"] == "accept"
    assert out["delta_pct"] == pytest.approx(-2.950009, abs=1e-6)


def test_history_object_with_gate_ids_and_per_run_spread() -> None:
    out = verdict_from_json({
        **GATE, "params": {"max_runs": 10}, "kind": "candidate",
        "history": {"pairs": PAIRS, "gate_ids": list(range(20))},
        "median_se_s": [0.001] * 7 + [None], "num_measured_steps": [20] * 8,
        "multimodal": [False, False, True] + [False] * 5,
    })
    assert out["history_gate_ids_used"] == [str(i) for i in range(20)]
    assert out["num_multimodal_runs"] == 1 and out["params"]["max_runs"] == 10
    assert out["sigma_floor_pct"] == pytest.approx(0.1, rel=0.01)


def test_failed_run_in_json() -> None:
    out = verdict_from_json({"pattern": "AXB", "medians_s": [1.0, None, 1.0],
                             "failed": [False, True, False]})
    assert out["verdict"] == "failed"


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ([1, 2], "JSON object"),
        ({**GATE, "colour": "red"}, "unknown key"),
        ({"medians_s": [1.0, 1.0, 1.0]}, "pattern"),
        ({"pattern": "AXB", "medians_s": [1.0, 1.0]}, "medians_s"),
        ({"pattern": "AXB", "medians_s": [1.0, -1.0, 1.0]}, r"run 1 \(X\).*median_step_s"),
        ({"pattern": "AXQ", "medians_s": [1.0, 1.0, 1.0]}, "role"),
        ({"pattern": "XAB", "medians_s": [1.0, 1.0, 1.0]}, "control before it"),
        ({**GATE, "policy": "coin-flip"}, "unknown policy"),
        ({**GATE, "params": {"max_run": 3}}, "max_run"),
        ({**GATE, "params": [1]}, "params"),
        ({**GATE, "history": [[1.0]]}, "history"),
        ({**GATE, "history": {"pairs": PAIRS, "ids": []}}, "history has unknown key"),
        ({**GATE, "median_se_s": [0.1]}, "median_se_s"),
        ({**GATE, "median_se_s": [0.1, 0.1, -0.1, 0.1]}, "median_se_s"),
        ({**GATE, "kind": "bisect"}, "kind"),
    ],
)
def test_errors_name_the_field(obj, match) -> None:
    with pytest.raises(ValueError, match=match):
        verdict_from_json(obj)
