"""Recipe-level measurement defaults (orchestrator/usecases/measure_defaults.py, issue 14)."""

import pytest

from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.usecases.measure_defaults import apply_recipe_measure_defaults


def _rule(gate: GateCreate) -> tuple:
    return (gate.warmup_mode, gate.warmup_steps, gate.max_warmup_steps, gate.measured_steps,
            gate.measured_seconds)


def test_a_request_that_names_no_rule_takes_the_recipes():
    gate = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "ltx2-bench-h200"}))
    assert _rule(gate) == ("steady", 2, 20, 20, 60.0)
    gate = apply_recipe_measure_defaults(GateCreate(workload={"recipe": "tiny"}))
    assert _rule(gate) == ("fixed", 2, 50, 4, None)


def test_naming_any_field_of_a_group_keeps_the_request_defaults_for_that_group():
    campaign = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, warmup_steps=10, measured_steps=20))
    assert _rule(campaign) == ("fixed", 10, 50, 20, None)
    window_only = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, measured_seconds=20))
    assert _rule(window_only) == ("steady", 2, 20, 20, 20.0)
    warmup_only = apply_recipe_measure_defaults(GateCreate(
        workload={"recipe": "ltx2-bench-h200"}, warmup_mode="fixed"))
    assert _rule(warmup_only) == ("fixed", 10, 50, 20, 60.0)


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
