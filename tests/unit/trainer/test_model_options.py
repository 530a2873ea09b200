"""Model and data options of issue 27: text mask, per-token timesteps, RoPE precision."""

from __future__ import annotations

import pytest
import torch

from trainer import load_recipe
from trainer.checkpoint import init_weights
from trainer.data import RepeatedBatches, synthetic_sample
from trainer.model import LTX2VideoTransformer, flow_matching_loss, rope_cos_sin

CPU = torch.device("cpu")


def _model(overrides: list[str] | None = None):
    recipe = load_recipe("tiny", overrides or [])
    model = LTX2VideoTransformer(recipe.model, recipe.data)
    init_weights(model, 0.02, 0)
    return recipe, model


def _batch(recipe, bsz: int = 2) -> dict[str, torch.Tensor]:
    samples = [synthetic_sample(recipe, 0, i, CPU) for i in range(bsz)]
    return {k: torch.stack([s[k] for s in samples]) for k in samples[0]}


def test_rope_precision_option():
    recipe = load_recipe("ltx2-bench-h200")
    assert recipe.model.rope_dtype == "float32" and not recipe.model.rope_tables_in_compute_dtype
    new = rope_cos_sin(recipe.model, recipe.data, CPU)
    old = rope_cos_sin(recipe.model.model_copy(update={"rope_dtype": "float64"}), recipe.data, CPU)
    assert all(t.dtype == torch.float32 for t in (*new, *old))
    diff = max(float((a - b).abs().max()) for a, b in zip(new, old))
    assert 1e-4 < diff < 2e-3


def test_rope_tables_stay_float32_under_bf16_unless_asked():
    recipe, model = _model(["parallel.param_dtype=bfloat16"])
    batch = _batch(recipe)
    outs = {}
    for rounded in (False, True):
        r = load_recipe("tiny", [f"model.rope_tables_in_compute_dtype={str(rounded).lower()}"])
        m = LTX2VideoTransformer(r.model, r.data)
        m.load_state_dict(model.state_dict())
        m.to(torch.bfloat16)
        with torch.no_grad():
            outs[rounded] = m(batch["latents"], batch["text"], batch["sigma"]).float()
    assert not torch.equal(outs[False], outs[True])  # bf16 tables round the rotation
    with torch.no_grad():  # in float32 the option is a no-op
        a = model(batch["latents"], batch["text"], batch["sigma"])
        model.cfg = model.cfg.model_copy(update={"rope_tables_in_compute_dtype": True})
        b = model(batch["latents"], batch["text"], batch["sigma"])
    assert torch.equal(a, b)


def test_per_token_sigma_needs_per_token_timesteps():
    recipe, model = _model()
    batch = _batch(recipe)
    n = recipe.data.num_video_tokens
    with pytest.raises(ValueError, match="singleton_timestep = false"):
        model(batch["latents"], batch["text"], batch["sigma"][:, None].expand(-1, n))
    with pytest.raises(ValueError, match=r"sigma must be \[B\] or \[B, N\]"):
        model(batch["latents"], batch["text"], batch["sigma"][:, None])
    recipe, model = _model(["model.singleton_timestep=false"])
    with torch.no_grad():
        per_sample = model(batch["latents"], batch["text"], batch["sigma"])
        per_token = model(batch["latents"], batch["text"], batch["sigma"][:, None].expand(-1, n))
        first_clean = batch["sigma"][:, None].expand(-1, n).clone()
        first_clean[:, :16] = 0
        conditioned = model(batch["latents"], batch["text"], first_clean)
    assert torch.equal(per_sample, per_token)
    assert not torch.allclose(conditioned, per_token)


def test_first_frame_conditioning_samples():
    base = load_recipe("tiny", ["model.singleton_timestep=false"])
    cond = load_recipe("tiny", ["model.singleton_timestep=false",
                                "data.first_frame_conditioning_p=1.0"])
    a, b = synthetic_sample(base, 0, 3, CPU), synthetic_sample(cond, 0, 3, CPU)
    for key in ("latents", "noise", "text"):
        assert torch.equal(a[key], b[key])  # the option draws after everything else
    first = base.data.latent_height * base.data.latent_width
    n = base.data.num_video_tokens
    assert b["sigma"].shape == b["loss_mask"].shape == (n,)
    assert torch.all(b["sigma"][:first] == 0) and torch.all(b["sigma"][first:] == a["sigma"])
    assert torch.all(b["loss_mask"][:first] == 0) and torch.all(b["loss_mask"][first:] == 1)
    _, model = _model(["model.singleton_timestep=false"])
    batch = {k: v[None] for k, v in b.items()}
    loss = flow_matching_loss(model, batch)
    moved = dict(batch, noise=batch["noise"].clone())
    moved["noise"][:, :first] += 5.0  # the clean tokens' target only: not in the loss
    assert torch.allclose(flow_matching_loss(model, moved), loss, rtol=1e-6, atol=0)
    assert "loss_mask" not in a and a["sigma"].shape == ()


def test_text_mask_from_recipe_and_all_ones_pool():
    padded = load_recipe("tiny", ["data.num_text_valid_tokens=5"])
    sample = synthetic_sample(padded, 0, 0, CPU)
    assert sample["text_mask"].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    pool = RepeatedBatches(padded, 0, CPU).pool
    assert pool[0][0]["text_mask"].shape == (2, 8)
    full = load_recipe("tiny", ["data.num_text_valid_tokens=8"])
    assert "text_mask" not in RepeatedBatches(full, 0, CPU).pool[0][0]  # all ones: no mask
    assert "text_mask" not in RepeatedBatches(load_recipe("tiny"), 0, CPU).pool[0][0]
    _, model = _model()
    batch = _batch(padded)
    with torch.no_grad():
        masked = model(batch["latents"], batch["text"], batch["sigma"], batch["text_mask"])
        trimmed = model(batch["latents"], batch["text"][:, :5], batch["sigma"])
    torch.testing.assert_close(masked, trimmed, rtol=1e-5, atol=1e-6)


def test_option_validation():
    with pytest.raises(ValueError, match="set model.singleton_timestep = false"):
        load_recipe("tiny", ["data.first_frame_conditioning_p=0.5"])
    with pytest.raises(ValueError, match="must be at most data.num_text_tokens"):
        load_recipe("tiny", ["data.num_text_valid_tokens=9"])
    assert load_recipe("tiny", ["data.num_text_valid_tokens=none"]).data.num_text_valid_tokens \
        is None
    with pytest.raises(ValueError, match="model.rope_dtype"):
        load_recipe("tiny", ["model.rope_dtype=float16"])
    with pytest.raises(ValueError, match="checkpoint.export_dtype"):
        load_recipe("tiny", ["checkpoint.export_dtype=int8"])
