"""Recipe loading, overrides and validation errors."""

import subprocess
import sys

import pytest

from trainer import Recipe, list_recipes, load_recipe


def test_bundled_recipes_validate():
    names = list_recipes()
    assert {"tiny", "ltx2-full", "ltx2-bench-h200"} <= set(names)
    for name in names:
        recipe = load_recipe(name)
        assert isinstance(recipe, Recipe)
        assert recipe.name == name


def test_defaults_are_measurement_contract():
    recipe = load_recipe("ltx2-full")
    assert (recipe.measure.warmup_steps, recipe.measure.measured_steps) == (10, 20)
    assert recipe.model.num_layers == 48


def test_overrides_apply_and_parse_types():
    recipe = load_recipe("tiny", ["measure.warmup_steps=2", "measure.measured_steps=3",
                                  "train.local_batch_size=2", "parallel.compile=true",
                                  "train.lr=0.5", 'model.attention_backend="eager"',
                                  "checkpoint.save_dcp=/tmp/x"])
    assert recipe.measure.warmup_steps == 2 and recipe.measure.measured_steps == 3
    assert recipe.parallel.compile is True
    assert recipe.train.lr == 0.5
    assert recipe.model.attention_backend == "eager"
    assert recipe.checkpoint.save_dcp == "/tmp/x"


@pytest.mark.parametrize("override, field", [
    ("train.local_batch_sise=2", "train.local_batch_sise"),
    ("train.local_batch_size=0", "train.local_batch_size"),
    ("model.attention_backend=fast", "model.attention_backend"),
    ("parallel.compile=maybe", "parallel.compile"),
    ("bogus.key=1", "bogus"),
    ("data.num_frames=80", "data"),
])
def test_invalid_fields_are_named(override, field):
    with pytest.raises(ValueError) as err:
        load_recipe("tiny", [override])
    assert field in str(err.value)


def test_malformed_override_and_unknown_recipe():
    with pytest.raises(ValueError, match="section.key=value"):
        load_recipe("tiny", ["train.lr"])
    with pytest.raises(ValueError, match="unknown recipe"):
        load_recipe("no-such-recipe")


def test_path_recipe(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text("[train]\nlocal_batch_size = 3\n[model]\nnum_layers = 2\n")
    recipe = load_recipe(str(path))
    assert recipe.name == "mine" and recipe.train.local_batch_size == 3
    path.write_text("[train]\nunknown = 1\n")
    with pytest.raises(ValueError, match="train.unknown"):
        load_recipe(path)


def test_model_dump_round_trips():
    recipe = load_recipe("tiny", ["train.seed=7"])
    assert Recipe.model_validate(recipe.model_dump()) == recipe


def test_public_api_does_not_import_torch():
    code = ("import sys, trainer; trainer.load_recipe('ltx2-full', ['train.seed=1']);"
            "trainer.flops_per_sample(trainer.load_recipe('tiny'));"
            "assert 'torch' not in sys.modules; assert 'orchestrator' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_recipes_time_window_can_be_unset_by_override():
    # cpu-demo measures a 3 s window; a gate that asks for a step count passes "none"
    assert load_recipe("cpu-demo").measure.measured_seconds == 3.0
    recipe = load_recipe("cpu-demo", ["measure.measured_seconds=none", "measure.measured_steps=3"])
    assert recipe.measure.measured_seconds is None and recipe.measure.measured_steps == 3
    # "none" stays a plain string where it is a value (activation checkpointing off)
    recipe = load_recipe("cpu-demo", ["parallel.activation_checkpointing=none"])
    assert recipe.parallel.activation_checkpointing == "none"
    with pytest.raises(ValueError, match="measure.measured_seconds"):
        load_recipe("cpu-demo", ["measure.measured_seconds=soon"])
