"""The pure semantic comparison (issue 19): floor from the controls, tolerance, statuses,
the combined decision and per-sample timing."""

from __future__ import annotations

import copy

import pytest

from orchestrator.verdict import RunSummary
from orchestrator.verdict.semantic_model import SemanticPolicy
from orchestrator.verdict.semantics import combine_decision, judge_semantics, per_sample_runs
from tests.semantic_window60 import window60_semantics

LOSS = [2.0285074710845947, 1.9806207418441772, 1.938999891281128, 1.903390884399414]
NORM = [0.875636875629425, 0.7741574645042419, 0.6735563278198242, 0.5869686603546143]


def _sem(loss=LOSS, norm=NORM, samples=4, dtype="float32", digest="ab" * 32, l2=0.5, compute="float32"):
    table = {dtype: {"params": 65, "numel": 173776}}
    return {"source": "AXBGATE_SEMANTICS", "local_batch_size": samples // 2, "grad_accum_steps": 1,
            "world_size": 2, "global_batch_size": samples, "samples_per_step": samples,
            "tokens_per_step": samples * 32, "precision": {"param_dtype": compute},
            "series_first_step": 0, "loss": list(loss), "grad_norm": list(norm),
            "dtypes": {"param_dtypes": table, "state_dtypes": {"exp_avg": table, "exp_avg_sq": table},
                       "not_in_optimizer": 0},
            "probe": {"step": 0, "tensors": {"grad:proj_in.weight": {"sha256": digest, "l2_norm": l2}}}}


def _gate(x, a=None, b=None):
    return [("A", 0, a or _sem()), ("X", 1, x), ("B", 2, b or _sem())]


def test_identical_runs_are_equal_and_the_floor_is_zero():
    v = judge_semantics(_gate(_sem()))
    assert v.status == "equal"
    assert v.floor["deterministic"] is True and v.floor["loss_rel"] == 0.0
    assert v.floor["loss_tolerance_rel"] == 1e-4 and v.floor["num_steps_compared"] == 4
    assert v.copies[0]["equal"] is True and combine_decision("accept", v.status) == "accept"


def test_reassociation_noise_is_within_tolerance():
    loss = [v * (1 + 6e-8) for v in LOSS]
    v = judge_semantics(_gate(_sem(loss=loss, digest="cd" * 32, l2=0.5 * (1 + 1e-7))))
    assert v.status == "within tolerance"
    assert v.copies[0]["max_loss_deviation_rel"] == pytest.approx(6e-8, rel=1e-3)


def test_changed_names_the_first_step_and_quantity():
    norm = list(NORM)
    norm[2] *= 1.03
    loss = list(LOSS)
    loss[3] *= 1.01
    v = judge_semantics(_gate(_sem(loss=loss, norm=norm)))
    assert v.status == "changed"
    first = v.findings[0]
    assert (first["quantity"], first["step"], first["run_order"]) == ("grad_norm", 2, 1)
    assert first["deviation_rel"] == pytest.approx(0.03)
    assert v.reason.startswith("grad_norm at step 2 differs by 0.03")
    assert combine_decision("accept", v.status) == "reject (semantics)"
    assert combine_decision("neutral", v.status) == "neutral"


def test_nondeterministic_controls_set_the_floor_with_the_multiplier():
    b = _sem(loss=[v * (1 + 1e-3) for v in LOSS])
    inside = judge_semantics(_gate(_sem(loss=[v * (1 + 2e-3) for v in LOSS]), b=b))
    assert inside.status == "within tolerance"
    assert inside.floor["loss_rel"] == pytest.approx(1e-3, rel=1e-3)
    assert inside.floor["loss_tolerance_rel"] == pytest.approx(3e-3, rel=1e-3)
    outside = judge_semantics(_gate(_sem(loss=[v * (1 + 3e-3) for v in LOSS]), b=b),
                              policy=SemanticPolicy(floor_multiplier=1.5))
    assert outside.status == "changed" and outside.findings[0]["step"] == 0
    assert outside.floor["deterministic"] is False


def test_dtype_coverage_change_is_changed_even_with_equal_series():
    v = judge_semantics(_gate(_sem(dtype="bfloat16")))
    assert v.status == "changed"
    assert [f["quantity"] for f in v.findings] == [
        "dtype coverage of registered parameters", "dtype coverage of AdamW exp_avg",
        "dtype coverage of AdamW exp_avg_sq"]
    assert v.findings[0]["control"] == {"float32": 1.0} and v.findings[0]["candidate"] == {"bfloat16": 1.0}


def test_batch_change_is_not_comparable_unless_declared():
    x = _sem(loss=[v * 1.1 for v in LOSS], samples=2)
    v = judge_semantics(_gate(x))
    assert v.status == "not comparable" and combine_decision("accept", v.status) == "not comparable"
    assert "samples per step 4 (control) vs 2 (candidate)" in v.reason
    declared = judge_semantics(_gate(x), declared_changes=["batch"])
    assert declared.status == "declared change" and declared.per_sample_timing
    assert combine_decision("accept", declared.status) == "accept"
    both = judge_semantics(_gate(_sem(samples=2, dtype="bfloat16")), declared_changes=["batch"])
    assert both.status == "changed"


def test_missing_or_malformed_semantics():
    assert judge_semantics(_gate(None)).status == "not checked"  # type: ignore[arg-type]
    bad = copy.deepcopy(_sem())
    bad["loss"] = ["x"]
    with pytest.raises(ValueError, match="loss"):
        judge_semantics(_gate(bad))
    with pytest.raises(ValueError, match="floor_multiplier"):
        SemanticPolicy(floor_multiplier=0.5)


def test_bf16_compute_gets_the_bf16_allowance():
    v = judge_semantics(_gate(_sem(loss=[x * (1 + 2e-3) for x in LOSS], compute="bfloat16"),
                             a=_sem(compute="bfloat16"), b=_sem(compute="bfloat16")))
    assert v.status == "within tolerance" and v.floor["min_rel_tol"] == 4e-3


def test_per_sample_runs_scale_the_candidate_to_the_control_batch():
    runs = [RunSummary("A", 0, 0.2, local_batch_size=2, grad_accum_steps=1, world_size=2),
            RunSummary("X", 1, 0.15, local_batch_size=1, grad_accum_steps=1, world_size=2, median_se_s=0.001),
            RunSummary("B", 2, 0.2, local_batch_size=2, grad_accum_steps=1, world_size=2)]
    out = per_sample_runs(runs)
    assert out[0] == runs[0] and out[2] == runs[2]
    assert out[1].median_step_s == pytest.approx(0.3) and out[1].median_se_s == pytest.approx(0.002)
    assert out[1].local_batch_size == 2



@pytest.fixture(scope="module")
def window60(tmp_path_factory):
    """The real A/A gate of 77 steps (tests/semantic_window60.py)."""
    return window60_semantics(tmp_path_factory.mktemp("window60"))

def test_aa_gate_over_a_long_window_is_not_flagged(window60):
    v = judge_semantics(window60)
    assert v.status == "within tolerance", v.reason
    assert v.floor["num_steps_compared"] == 77 and v.floor["deterministic"] is False
    # The controls part as training goes on: one tolerance over the window was 263%.
    assert v.floor["grad_norm_tolerance_rel"] == pytest.approx(2.6319, rel=1e-4)
    assert v.floor["grad_norm_first_step_tolerance_rel"] == 4e-3  # the bf16 allowance at step 0
    assert v.floor["floor_prefix_steps"] == 5


def test_long_window_catches_a_step0_grad_norm_deviation_a_single_tolerance_missed(window60):
    (a, x, b) = window60
    sem = copy.deepcopy(x[2])
    sem["grad_norm"][0] *= 1.10  # 10% off at step 0 (a dropped term), then the same as the A/A copy
    gate = [a, ("X", 1, sem), b]
    v = judge_semantics(gate)
    assert v.status == "changed"
    first = v.findings[0]
    assert (first["quantity"], first["step"], first["run_order"]) == ("grad_norm", 0, 1)
    assert first["deviation_rel"] == pytest.approx(0.10, rel=1e-3)
    assert first["tolerance_rel"] == 4e-3
    assert v.reason.startswith("grad_norm at step 0 differs by 0.1")
    # One floor over the whole window (the old rule: every step in the prefix) is blind to it.
    blind = judge_semantics(gate, policy=SemanticPolicy(floor_prefix_steps=77))
    assert blind.status == "within tolerance"
    assert blind.floor["grad_norm_first_step_tolerance_rel"] == pytest.approx(2.6319, rel=1e-4)


def test_the_floor_prefix_shares_the_largest_early_floor():
    b_loss = list(LOSS)
    b_loss[2] *= 1 + 1e-3  # the controls differ at step 2 only
    x_loss = list(LOSS)
    x_loss[0] *= 1 + 1e-3  # the candidate at step 0, by the same amount
    gate = _gate(_sem(loss=x_loss), b=_sem(loss=b_loss))
    assert judge_semantics(gate, policy=SemanticPolicy(floor_prefix_steps=3)).status == "within tolerance"
    strict = judge_semantics(gate, policy=SemanticPolicy(floor_prefix_steps=1))
    assert strict.status == "changed" and strict.findings[0]["step"] == 0
    assert strict.findings[0]["tolerance_rel"] == 1e-4


@pytest.mark.parametrize("bad", [0, 101, 2.5, True])
def test_floor_prefix_steps_is_bounded(bad):
    with pytest.raises(ValueError, match="floor_prefix_steps must be an integer in 1..100"):
        SemanticPolicy(floor_prefix_steps=bad)
