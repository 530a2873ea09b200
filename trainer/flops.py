"""Model FLOPs per sample for the LTX-2 video transformer (DESIGN.md section 2).

Convention: FLOPs exclude recompute (activation checkpointing, flash-attention
backward) and count attention backward as twice forward. Per block and sample::

    6 * N_video * P_video + 6 * N_text * P_text_kv
      + 12 * N_video**2 * d + 12 * N_video * N_text * d

P_video: weights of the block linears applied to video tokens (self-attention
Q, K, V, O; cross-attention Q, O; FFN up and down). P_text_kv: weights of the
cross-attention K and V projections (applied to text tokens). Biases, norms,
modulation and the embedding/head layers outside the blocks are not counted.
Reference: 48 blocks, d=4096, N_video=4290 (81x480x832), N_text=1024 gives
353,880,819,892,224 FLOPs per sample.

This module imports no torch at import time; :func:`audit_flops` imports it lazily.
"""

from __future__ import annotations

from typing import Any

from trainer.config import Recipe


def block_param_counts(recipe: Recipe) -> tuple[int, int]:
    """Weight counts of one block that enter the FLOP formula.

    Args:
        recipe: The recipe.

    Returns:
        ``(P_video, P_text_kv)`` in parameters (weights only, no biases).
    """
    d = recipe.model.hidden_dim
    f = recipe.model.ffn_dim
    p_video = 4 * d * d + 2 * d * d + 2 * d * f
    p_text_kv = 2 * d * d
    return p_video, p_text_kv


def flops_per_sample(recipe: Recipe) -> int:
    """Model FLOPs (forward + backward) of one sample, DESIGN.md section 2.

    Args:
        recipe: The recipe (model sizes and data shape).

    Returns:
        FLOPs per sample (int, exact).
    """
    d = recipe.model.hidden_dim
    n_video = recipe.data.num_video_tokens
    n_text = recipe.data.num_text_tokens
    p_video, p_text_kv = block_param_counts(recipe)
    per_block = (
        6 * n_video * p_video
        + 6 * n_text * p_text_kv
        + 12 * n_video * n_video * d
        + 12 * n_video * n_text * d
    )
    return recipe.model.num_layers * per_block


def audit_flops(recipe: Recipe) -> dict[str, Any]:
    """Measure executed FLOPs of one forward+backward with ``FlopCounterMode``.

    Runs one sample on CPU in float32 with eager (matmul + softmax) attention and
    no activation checkpointing, so every counted FLOP is a model FLOP. Two
    passes reconcile the numbers: (1) the whole model with the flow-matching loss
    (``measured_total``); (2) the block stack alone, fed leaf inputs that require
    grad as they do inside the model (``measured_blocks``, what the formula
    covers). Their difference is the patchify, caption projection, timestep MLP
    and output head (``measured_outside_blocks``), which the DESIGN convention
    leaves out. (FlopCounterMode's per-module split is not used: it attributes
    backward matmuls of tensors shared by all blocks, such as the projected text,
    to the wrong module.)

    Args:
        recipe: The recipe; the model and data sections are used, with
            ``attention_backend`` forced to ``eager`` and batch 1.

    Returns:
        Mapping with ``flops_per_sample`` (formula), ``measured_total``,
        ``measured_blocks``, ``measured_outside_blocks`` (FLOPs) and
        ``blocks_rel_error`` (measured_blocks / formula - 1).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from trainer.checkpoint import init_weights
    from trainer.data import synthetic_sample
    from trainer.model import LTX2VideoTransformer, flow_matching_loss

    model_cfg = recipe.model.model_copy(update={"attention_backend": "eager"})
    model = LTX2VideoTransformer(model_cfg, recipe.data)
    init_weights(model, recipe.train.init_std, recipe.train.seed)
    sample = synthetic_sample(recipe, rank=0, index=0, device=torch.device("cpu"))
    batch = {k: v.unsqueeze(0) for k, v in sample.items()}
    counter = FlopCounterMode(display=False)
    with counter:
        flow_matching_loss(model, batch).backward()
    total = int(counter.get_total_flops())

    d, n, t = model_cfg.hidden_dim, recipe.data.num_video_tokens, recipe.data.num_text_tokens
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, n, d, generator=gen, requires_grad=True)
    text = torch.randn(1, t, d, generator=gen, requires_grad=True)
    rows = 1 if model_cfg.singleton_timestep else n
    temb = torch.randn(1, rows, 6 * d, generator=gen, requires_grad=True)
    cos, sin = model.rope(torch.device("cpu"))
    counter = FlopCounterMode(display=False)
    with counter:
        h = x
        for block in model.transformer_blocks:
            h = block(h, text, temb, cos, sin)
        h.backward(torch.randn(h.shape, generator=gen))
    blocks = int(counter.get_total_flops())
    formula = flops_per_sample(recipe)
    return {
        "flops_per_sample": formula,
        "measured_total": total,
        "measured_blocks": blocks,
        "measured_outside_blocks": total - blocks,
        "blocks_rel_error": blocks / formula - 1.0,
    }
