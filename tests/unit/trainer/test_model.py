"""Model pieces: split RoPE, RoPE tables, timestep shapes."""

import torch

from trainer import load_recipe
from trainer.checkpoint import init_weights
from trainer.model import LTX2VideoTransformer, apply_split_rope, rope_cos_sin


def test_split_rope_rotates_half_dims_and_keeps_norm():
    x = torch.randn(2, 4, 5, 8, dtype=torch.float64)
    angle = torch.randn(1, 4, 5, 4, dtype=torch.float64)
    out = apply_split_rope(x, angle.cos(), angle.sin())
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-6)  # fp32 math
    # pair (i, i + K/2) rotates as a complex number by the angle
    z = torch.complex(x[..., :4], x[..., 4:]) * torch.exp(1j * angle)
    torch.testing.assert_close(out, torch.cat([z.real, z.imag], -1), rtol=1e-5, atol=1e-6)


def test_rope_tables_shape_and_padding():
    recipe = load_recipe("ltx2-full")
    cos, sin = rope_cos_sin(recipe.model, recipe.data, torch.device("cpu"))
    assert cos.shape == (1, 32, 4290, 64) and cos.dtype == torch.float32
    # D/2 = 2048 angles, 3 * (4096 // 6) = 2046 real ones: 2 front-padded (cos 1, sin 0)
    flat_cos = cos[0].transpose(0, 1).reshape(4290, -1)
    flat_sin = sin[0].transpose(0, 1).reshape(4290, -1)
    assert torch.all(flat_cos[:, :2] == 1) and torch.all(flat_sin[:, :2] == 0)
    assert not torch.allclose(flat_cos[0], flat_cos[-1])


def test_singleton_and_per_token_timestep_agree():
    recipe = load_recipe("tiny")
    outs = []
    for singleton in (True, False):
        r = load_recipe("tiny", [f"model.singleton_timestep={str(singleton).lower()}"])
        model = LTX2VideoTransformer(r.model, r.data)
        init_weights(model, 0.02, 0)
        torch.manual_seed(0)
        n = recipe.data.num_video_tokens
        x = torch.randn(2, n, r.model.in_channels)
        text = torch.randn(2, r.data.num_text_tokens, r.model.caption_channels)
        outs.append(model(x, text, torch.tensor([0.2, 0.7])))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    assert outs[0].shape == (2, recipe.data.num_video_tokens, recipe.model.out_channels)


def test_param_count_at_full_size():
    recipe = load_recipe("ltx2-full")
    with torch.device("meta"):
        model = LTX2VideoTransformer(recipe.model, recipe.data)
    num = sum(p.numel() for p in model.parameters())
    assert 13.0e9 < num < 13.1e9
