"""Apply activation checkpointing, regional compile and FSDP2 (DESIGN.md section 8).

Order follows torchtitan: AC wraps each block, then each (wrapped) block is
compiled on its own (regional compile; the FSDP-wrapped root is never compiled),
then ``fully_shard`` is applied per block or per group of ``modules_per_group``
consecutive blocks, and finally to the root (patchify, caption projection,
timestep MLP and output head).

Registered (master) parameters stay float32 DTensor shards; the
``MixedPrecisionPolicy`` all-gathers them as ``param_dtype`` working copies and
reduce-scatters gradients in ``reduce_dtype``.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from trainer.config import ParallelConfig

logger = logging.getLogger(__name__)

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def apply_ac(model: nn.Module, attention_backend: str = "auto", compiled: bool = False) -> None:
    """Wrap every block in full (non-reentrant) activation checkpointing.

    The recompute runs during backward, outside the model forward's SDPA backend
    context, so the same backend is entered for it too (``context_fn``); otherwise SDPA
    may pick another kernel and the recomputed tensors no longer match the saved ones
    (``CheckpointError: Recomputed values ... have different metadata``).

    Args:
        model: The transformer; ``transformer_blocks`` entries are replaced.
        attention_backend: ``ModelConfig.attention_backend`` of the recipe.
        compiled: The blocks will be compiled; Inductor accepts only dispatch modes from
            ``context_fn``, so the backend context is left to the compiled graph then.
    """
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    from trainer.model import sdpa_context

    def contexts():
        return sdpa_context(attention_backend), sdpa_context(attention_backend)

    extra = {} if compiled else {"context_fn": contexts}
    blocks = model.transformer_blocks
    for i, block in enumerate(list(blocks)):
        blocks[i] = checkpoint_wrapper(block, preserve_rng_state=False, **extra)


def apply_compile(model: nn.Module) -> None:
    """Compile each block separately (regional compile).

    Every block has the same structure, so Dynamo compiles the first and reuses
    the code for the rest.

    Args:
        model: The transformer; ``transformer_blocks`` entries are replaced by
            ``OptimizedModule`` wrappers (state-dict names strip ``_orig_mod``).
    """
    blocks = model.transformer_blocks
    for i, block in enumerate(list(blocks)):
        blocks[i] = torch.compile(block, fullgraph=True)


def apply_fsdp(model: nn.Module, cfg: ParallelConfig, mesh) -> None:
    """Shard blocks (or groups of blocks) and then the root with FSDP2.

    Args:
        model: The transformer (blocks possibly wrapped).
        cfg: Parallel config (group size, dtypes, reshard policy).
        mesh: 1-D data-parallel ``DeviceMesh``.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # Block inputs arrive in the compute dtype already (the root casts them), except the
    # RoPE tables, which stay float32 as in the reference unless the model config says
    # otherwise; FSDP's input cast would round them to param_dtype.
    mp = MixedPrecisionPolicy(param_dtype=_DTYPES[cfg.param_dtype],
                              reduce_dtype=_DTYPES[cfg.reduce_dtype],
                              cast_forward_inputs=False)
    blocks = list(model.transformer_blocks)
    group = cfg.modules_per_group
    for start in range(0, len(blocks), group):
        units = blocks[start:start + group]
        last = start + group >= len(blocks)
        # The last unit is gathered again at once by backward: keeping it avoids a
        # free/re-gather pair (torchtitan does the same).
        reshard = cfg.reshard_after_forward and not last
        fully_shard(units if len(units) > 1 else units[0], mesh=mesh,
                    reshard_after_forward=reshard, mp_policy=mp)
    # Root: inputs are cast by the model itself (sigma must stay float32).
    root_mp = MixedPrecisionPolicy(param_dtype=_DTYPES[cfg.param_dtype],
                                   reduce_dtype=_DTYPES[cfg.reduce_dtype],
                                   cast_forward_inputs=False)
    fully_shard(model, mesh=mesh, reshard_after_forward=cfg.reshard_after_forward,
                mp_policy=root_mp)


def parallelize(model: nn.Module, cfg: ParallelConfig, mesh) -> nn.Module:
    """AC, then regional compile, then FSDP2; returns the same (now sharded) model."""
    if cfg.activation_checkpointing == "full":
        apply_ac(model, getattr(getattr(model, "cfg", None), "attention_backend", "auto"),
                 compiled=cfg.compile)
    if cfg.compile:
        apply_compile(model)
    apply_fsdp(model, cfg, mesh)
    logger.info("parallelized: ac=%s compile=%s group=%d reshard_after_forward=%s "
                "param=%s reduce=%s", cfg.activation_checkpointing, cfg.compile,
                cfg.modules_per_group, cfg.reshard_after_forward, cfg.param_dtype,
                cfg.reduce_dtype)
    return model
