"""Recipe-level measurement defaults (orchestrator/usecases/measure_defaults.py, issue 14)."""

import pytest

from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.usecases.measure_defaults import apply_recipe_measure_defaults


def _rule(gate: GateCreate) -> tuple:
    return (gate.warmup_mode, gate.warmup_steps, gate.max_warmup_steps, gate.measured_steps,
            gate.measured_seconds)


def test_a_request_that_names_no_rule_takes_the_recipes():
    # ltx2-bench-h200 names a warmup but no window (issue 23): the cost model's window
    gate = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "ltx2-bench-h200"}))
    assert _rule(gate) == ("steady", 2, 20, 20, None) and gate.auto_window is True
    assert gate.options().auto_window and gate.options().max_window_s == 60.0
    demo = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "cpu-demo"}))
    assert demo.measured_seconds == 3.0 and not demo.auto_window  # its recipe names 3 s
    gate = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "tiny"}))
    assert _rule(gate) == ("fixed", 2, 50, 4, None)


def test_naming_any_field_of_a_group_keeps_the_request_defaults_for_that_group():
    campaign = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, warmup_steps=10, measured_steps=20))
    assert _rule(campaign) == ("fixed", 10, 50, 20, None)
    window_only = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, measured_seconds=20))
    # a requested window is honoured: at least 3 steps, not the request default of 20
    assert _rule(window_only) == ("steady", 2, 20, 3, 20.0) and not window_only.auto_window
    warmup_only = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, warmup_mode="fixed"))
    assert _rule(warmup_only) == ("fixed", 10, 50, 20, None) and warmup_only.auto_window
    both = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, measured_seconds=8, measured_steps=12))
    assert _rule(both) == ("steady", 2, 20, 12, 8.0)


def test_auto_window_is_refused_where_the_cost_model_cannot_choose():
    with pytest.raises(ValidationFailed) as err:
        apply_recipe_measure_defaults(GateCreate(workload={"recipe": "tiny"}, policy="drift",
                                                 auto_window=True))
    assert err.value.field == "auto_window" and "conditioning run" in str(err.value)
    with pytest.raises(ValueError, match="auto_window"):
        GateCreate(workload={"recipe": "tiny"}, auto_window=True, measured_steps=5)
    forced = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "cpu-demo"},
                                                      auto_window=True))
    assert forced.auto_window and forced.measured_seconds is None  # the recipe's 3 s not taken
    off = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "ltx2-bench-h200"},
                                                   auto_window=False))
    assert not off.auto_window and off.measured_steps == 20


def test_an_external_command_keeps_the_request_defaults():
    gate = GateCreate(workload={"command": ["python", "bench.py"]})
    assert apply_recipe_measure_defaults(gate) is gate
    assert _rule(gate) == ("fixed", 10, 50, 20, None)


def test_a_rule_the_recipe_makes_inconsistent_names_the_field_and_the_recipe(tmp_path):
    recipe = tmp_path / "bad-measure.toml"
    recipe.write_text('[measure]\nwarmup_mode = "steady"\nwarmup_steps = 30\nmax_warmup_steps = 20\n')
    with pytest.raises(ValidationFailed) as err:
        apply_recipe_measure_defaults(GateCreate(workload={"recipe": str(recipe)}))
    assert err.value.field == "warmup_steps"
    assert "max_warmup_steps must be at least warmup_steps" in str(err.value)
    assert "bad-measure.toml" in str(err.value)


def test_an_unknown_recipe_is_the_recipes_error():
    with pytest.raises(ValidationFailed) as err:
        apply_recipe_measure_defaults(GateCreate(workload={"recipe": "no-such-recipe"}))
    assert err.value.field == "workload.recipe" and "unknown recipe 'no-such-recipe'" in str(err.value)
