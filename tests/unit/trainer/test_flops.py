"""FLOP formula pin (DESIGN.md section 2) and the FlopCounterMode audit."""

import json
import subprocess
import sys

import pytest

from trainer import flops_per_sample, load_recipe
from trainer.flops import audit_flops, block_param_counts

REFERENCE = 353_880_819_892_224


def test_full_recipe_matches_design_reference():
    recipe = load_recipe("ltx2-full")
    assert recipe.data.num_video_tokens == 4290
    assert recipe.model.hidden_dim == 4096
    assert flops_per_sample(recipe) == REFERENCE


def test_flops_scale_with_depth_and_reject_biases():
    full = load_recipe("ltx2-full")
    half = load_recipe("ltx2-full", ["model.num_layers=24"])
    assert flops_per_sample(half) * 2 == REFERENCE
    p_video, p_text_kv = block_param_counts(full)
    assert p_video == 6 * 4096**2 + 2 * 4096 * 16384  # weights only, no biases
    assert p_text_kv == 2 * 4096**2


def test_cli_prints_integer_json():
    out = subprocess.run([sys.executable, "-m", "trainer", "flops", "--recipe", "ltx2-full",
                          "--json"], capture_output=True, text=True, check=True)
    payload = json.loads(out.stdout)
    assert payload["flops_per_sample"] == REFERENCE
    assert isinstance(payload["flops_per_sample"], int)


@pytest.mark.parametrize("overrides", [[], ["model.packed_qkv=true", "model.singleton_timestep=false"]])
def test_formula_within_0p1_percent_of_flop_counter(overrides):
    audit = audit_flops(load_recipe("tiny", overrides))
    assert abs(audit["blocks_rel_error"]) < 1e-3
    assert audit["measured_blocks"] + audit["measured_outside_blocks"] == audit["measured_total"]
    # The layers outside the blocks cost something, and the formula leaves them out.
    assert audit["measured_outside_blocks"] > 0
