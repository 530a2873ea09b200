"""What a run trained, for the semantic gate: the ``AXBGATE_SEMANTICS`` payload.

A faster candidate is only a speedup if it trains the same thing (issue 19). This module
collects, on every rank, the facts that say what was trained, and rank 0 prints them once
after the timed loop (docs/record-contract.md):

* batch semantics: local batch x gradient accumulation x data-parallel world = global
  batch (samples per optimizer step) and tokens per step (global batch x video tokens);
* the loss and gradient-norm series of every step (warmup included; the same values as
  the ``AXBGATE_STEP`` records, kept together so the comparison needs no step table);
* dtype coverage: for every trainable parameter its registered (master) dtype and the
  dtype of each AdamW state tensor (``exp_avg``, ``exp_avg_sq``), counted by parameters
  and by elements, with the dtype the recipe declares (``parallel.master_dtype``);
* a probe at ``measure.semantic_probe_step``: SHA-256 of the full (gathered) root
  parameters and their pre-clip gradients (``proj_in``, ``proj_out``, the root
  ``scale_shift_table``: every block's backward flows into them, and their names are the
  same with packed or split projections), plus float summaries (L2 norm, sum, max |x|)
  for a tolerance comparison where bitwise equality is not expected.

Nothing here runs inside the measured window except at the probe step (default 0, a
warmup step). The comparison itself is the orchestrator's (``verdict/semantics.py``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import nn

from trainer.config import Recipe

PROBE_PREFIXES = ("proj_in.", "proj_out.", "scale_shift_table")
"""Root parameters (clean names) whose values and gradients the probe hashes."""
MAX_SERIES_STEPS = 10_000
"""Loss/gradient-norm entries printed at most (a record line is at most 1 MiB); longer
runs print the last ones, with ``series_first_step`` saying where they start."""
_MOMENTS = ("exp_avg", "exp_avg_sq")


def _clean(name: str) -> str:
    return name.replace("_checkpoint_wrapped_module.", "").replace("_orig_mod.", "")


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor on every rank (a collective for a DTensor shard)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def tensor_summary(t: torch.Tensor) -> dict[str, Any]:
    """Digest and float summaries of one tensor.

    Args:
        t: Any dense tensor (its bytes are hashed in its own dtype, C order).

    Returns:
        ``sha256`` (hex of the raw bytes), ``dtype``, ``shape``, ``numel``, ``l2_norm``,
        ``sum``, ``max_abs`` (float64 reductions of the values).
    """
    t = t.detach().contiguous().cpu()
    raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
    as64 = t.double()
    return {"sha256": hashlib.sha256(raw).hexdigest(), "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape), "numel": t.numel(),
            "l2_norm": float(torch.linalg.vector_norm(as64)) if t.numel() else 0.0,
            "sum": float(as64.sum()), "max_abs": float(as64.abs().max()) if t.numel() else 0.0}


def probe(model: nn.Module, step: int) -> dict[str, Any]:
    """Hash the probed root parameters and their gradients (call on EVERY rank: gathers).

    Args:
        model: The FSDP2 model after backward and before ``clip``/``optimizer.step``.
        step: The optimizer step index (0-based).

    Returns:
        ``{"step", "tensors": {"grad:NAME": summary, "param:NAME": summary}}``; a
        parameter without a gradient is listed with ``{"present": false}``.
    """
    tensors: dict[str, Any] = {}
    for name, param in model.named_parameters():
        clean = _clean(name)
        if not clean.startswith(PROBE_PREFIXES):
            continue
        tensors[f"param:{clean}"] = tensor_summary(_full(param))
        grad = param.grad
        tensors[f"grad:{clean}"] = {"present": False} if grad is None else tensor_summary(_full(grad))
    return {"step": int(step), "tensors": dict(sorted(tensors.items()))}


def _count(table: dict[str, dict[str, int]], dtype: str, numel: int) -> None:
    row = table.setdefault(dtype, {"params": 0, "numel": 0})
    row["params"] += 1
    row["numel"] += numel


def dtype_coverage(model: nn.Module, optimizer: torch.optim.Optimizer,
                   declared_master_dtype: str) -> dict[str, Any]:
    """Registered-parameter and AdamW-state dtypes over every trainable parameter.

    Counts are of this rank's view of the (sharded) parameters: ``numel`` is the full
    (global) element count of each parameter, so the numbers do not depend on the world
    size. Call after at least one optimizer step (AdamW creates its state lazily).

    Args:
        model: The FSDP2 model.
        optimizer: Its AdamW.
        declared_master_dtype: ``parallel.master_dtype`` of the recipe.

    Returns:
        ``num_trainable_params``, ``trainable_numel``, ``param_dtypes`` and
        ``state_dtypes`` (``{state: {dtype: {"params", "numel"}}}``, ``missing`` for a
        parameter without that state), ``not_in_optimizer`` (trainable parameters the
        optimizer does not update), ``declared_master_dtype`` and ``fp32_coverage``
        (fraction of trainable elements whose master and both moments are float32).
    """
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    params: dict[str, dict[str, int]] = {}
    states: dict[str, dict[str, dict[str, int]]] = {m: {} for m in _MOMENTS}
    count = numel_total = fp32_numel = outside = 0
    for param in model.parameters():
        if not param.requires_grad:
            continue
        numel = param.numel()
        count, numel_total = count + 1, numel_total + numel
        dtype = str(param.dtype).replace("torch.", "")
        _count(params, dtype, numel)
        if id(param) not in in_optimizer:
            outside += 1
        state = optimizer.state.get(param, {})
        all_fp32 = dtype == "float32"
        for moment in _MOMENTS:
            value = state.get(moment)
            mdtype = "missing" if value is None else str(value.dtype).replace("torch.", "")
            _count(states[moment], mdtype, numel)
            all_fp32 = all_fp32 and mdtype == "float32"
        fp32_numel += numel if all_fp32 else 0
    return {"num_trainable_params": count, "trainable_numel": numel_total,
            "param_dtypes": params, "state_dtypes": states, "not_in_optimizer": outside,
            "declared_master_dtype": declared_master_dtype,
            "fp32_coverage": fp32_numel / numel_total if numel_total else 0.0}


def payload(recipe: Recipe, world_size: int, loss: list[float], grad_norm: list[float],
            coverage: dict[str, Any], probe_result: dict[str, Any] | None) -> dict[str, Any]:
    """The ``AXBGATE_SEMANTICS`` record of one run (docs/record-contract.md).

    Args:
        recipe: The run's recipe (batch, accumulation, tokens, precision policy).
        world_size: Data-parallel ranks.
        loss: Rank-mean loss per optimizer step, step order, warmup included.
        grad_norm: Global pre-clip gradient L2 norm per step.
        coverage: :func:`dtype_coverage`.
        probe_result: :func:`probe` at the probe step, or None.

    Returns:
        The record payload (JSON-safe; non-finite values never reach it: such a run
        fails before).
    """
    t, p = recipe.train, recipe.parallel
    global_batch = t.local_batch_size * t.grad_accum_steps * world_size
    first = max(0, len(loss) - MAX_SERIES_STEPS)
    return {
        "local_batch_size": t.local_batch_size, "grad_accum_steps": t.grad_accum_steps,
        "world_size": world_size, "global_batch_size": global_batch,
        "samples_per_step": global_batch,
        "tokens_per_step": global_batch * recipe.data.num_video_tokens,
        "precision": {"param_dtype": p.param_dtype, "reduce_dtype": p.reduce_dtype,
                      "master_dtype": p.master_dtype},
        "series_first_step": first, "loss": loss[first:], "grad_norm": grad_norm[first:],
        "dtypes": coverage, "probe": probe_result,
    }
