"""Packed QKV/KV <-> split Diffusers keys, deterministic init, model equivalence."""

import pytest
import torch

from trainer import load_recipe
from trainer.checkpoint import (
    clean_name,
    diffusers_parts,
    diffusers_to_native,
    init_weights,
    native_to_diffusers,
)
from trainer.data import synthetic_sample
from trainer.model import LTX2VideoTransformer, flow_matching_loss


def _model(packed: bool) -> LTX2VideoTransformer:
    recipe = load_recipe("tiny", [f"model.packed_qkv={str(packed).lower()}"])
    model = LTX2VideoTransformer(recipe.model, recipe.data)
    init_weights(model, 0.02, 0)
    return model


def test_diffusers_parts():
    assert diffusers_parts("transformer_blocks.3.attn1.to_qkv.weight") == [
        "transformer_blocks.3.attn1.to_q.weight", "transformer_blocks.3.attn1.to_k.weight",
        "transformer_blocks.3.attn1.to_v.weight"]
    assert diffusers_parts("transformer_blocks.0.attn2.to_kv.bias") == [
        "transformer_blocks.0.attn2.to_k.bias", "transformer_blocks.0.attn2.to_v.bias"]
    assert diffusers_parts("transformer_blocks.0.attn2.to_q.weight") == [
        "transformer_blocks.0.attn2.to_q.weight"]
    assert clean_name("transformer_blocks.1._checkpoint_wrapped_module._orig_mod.ff.net.2.bias") \
        == "transformer_blocks.1.ff.net.2.bias"


def test_split_model_uses_diffusers_keys():
    keys = set(_model(False).state_dict())
    for key in ("proj_in.weight", "caption_projection.linear_1.weight",
                "time_embed.emb.timestep_embedder.linear_1.weight", "time_embed.linear.weight",
                "scale_shift_table", "proj_out.bias", "transformer_blocks.0.scale_shift_table",
                "transformer_blocks.0.attn1.to_q.weight", "transformer_blocks.0.attn1.norm_q.weight",
                "transformer_blocks.0.attn1.to_out.0.weight", "transformer_blocks.0.attn2.to_k.bias",
                "transformer_blocks.0.ff.net.0.proj.weight", "transformer_blocks.0.ff.net.2.weight"):
        assert key in keys, key


def test_packed_round_trip_is_bit_exact():
    packed = _model(True)
    with torch.no_grad():
        for p in packed.parameters():
            p.add_(torch.randn_like(p))  # non-trivial biases and norms too
    native = packed.state_dict()
    split = native_to_diffusers(native)
    assert not any("to_qkv" in k or "to_kv" in k for k in split)
    assert set(split) == set(_model(False).state_dict())
    back = diffusers_to_native(split, list(native))
    assert set(back) == set(native)
    for key, value in native.items():
        assert torch.equal(back[key], value), key


def test_packed_and_split_init_and_loss_match():
    packed, split = _model(True), _model(False)
    sp = native_to_diffusers(packed.state_dict())
    for key, value in split.state_dict().items():
        assert torch.equal(sp[key], value), key
    recipe = load_recipe("tiny")
    sample = synthetic_sample(recipe, 0, 0, torch.device("cpu"))
    batch = {k: v.unsqueeze(0) for k, v in sample.items()}
    torch.testing.assert_close(flow_matching_loss(packed, batch), flow_matching_loss(split, batch),
                               rtol=1e-6, atol=1e-7)


def test_missing_and_extra_keys_raise():
    native = _model(False).state_dict()
    split = native_to_diffusers(native)
    broken = dict(split)
    broken.pop("proj_in.weight")
    with pytest.raises(ValueError, match="missing"):
        diffusers_to_native(broken, list(native))
    with pytest.raises(ValueError, match="unexpected"):
        diffusers_to_native({**split, "extra.weight": torch.zeros(1)}, list(native))
