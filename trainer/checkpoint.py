"""Checkpoints: Diffusers-keyed safetensors load/export, deterministic init, DCP resume.

Native parameter names equal the Diffusers ``LTX2VideoTransformer3DModel`` keys
except the packed projections: ``attn1.to_qkv`` is the row-wise concatenation of
``attn1.to_q``, ``to_k``, ``to_v`` and ``attn2.to_kv`` that of ``attn2.to_k``,
``to_v`` (weights and biases). Load concatenates and export splits with
``torch.cat`` / ``torch.split``, so a round trip is bit-exact.

Initialisation is defined on the Diffusers keys (each key drawn from its own
seeded generator) and then mapped onto the native parameters, so the packed and
split models start from identical weights for any world size.
"""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import torch
from torch import nn

logger = logging.getLogger(__name__)

_PACKED = {"attn1.to_qkv": ("attn1.to_q", "attn1.to_k", "attn1.to_v"),
           "attn2.to_kv": ("attn2.to_k", "attn2.to_v")}
_WRAPPER_PARTS = ("_orig_mod.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.")


def clean_name(name: str) -> str:
    """Strip compile / activation-checkpoint wrapper prefixes from a parameter name."""
    for part in _WRAPPER_PARTS:
        name = name.replace(part, "")
    return name


def diffusers_parts(native: str) -> list[str]:
    """Diffusers keys whose row-wise concatenation is one native parameter.

    Args:
        native: Clean native name, e.g. ``transformer_blocks.0.attn1.to_qkv.weight``.

    Returns:
        The Diffusers keys in concatenation order (one key when not packed).
    """
    for packed, parts in _PACKED.items():
        marker = f".{packed}."
        if marker in native:
            head, tail = native.split(marker)
            return [f"{head}.{p}.{tail}" for p in parts]
    return [native]


def _init_value(key: str, shape: torch.Size, std: float, seed: int,
                device: torch.device) -> torch.Tensor:
    """Deterministic float32 init of one Diffusers key.

    Linear weights ~ N(0, std); biases 0; RMSNorm weights 1; scale_shift tables
    ~ N(0, 1) / sqrt(D) (Diffusers' table init).
    """
    if key.endswith(".bias"):
        return torch.zeros(shape, device=device)
    if "norm_q" in key or "norm_k" in key:
        return torch.ones(shape, device=device)
    gen = torch.Generator(device=device)
    gen.manual_seed(zlib.crc32(f"{seed}/{key}".encode()))
    out = torch.randn(shape, generator=gen, device=device)
    return out / shape[-1] ** 0.5 if key.endswith("scale_shift_table") else out * std


def _split_shapes(native: str, shape: torch.Size) -> list[torch.Size]:
    parts = diffusers_parts(native)
    rows = shape[0] // len(parts)
    return [torch.Size([rows, *shape[1:]]) for _ in parts]


@torch.no_grad()
def _assign(param: torch.Tensor, full: torch.Tensor) -> None:
    """Copy a full tensor into a parameter, keeping only the local shard of a DTensor."""
    from torch.distributed.tensor import DTensor

    if isinstance(param, DTensor):
        from torch.distributed.tensor import distribute_tensor

        local = distribute_tensor(full.to(param.device), param.device_mesh, param.placements,
                                  src_data_rank=None).to_local()
        param.to_local().copy_(local)
    else:
        param.copy_(full)


@torch.no_grad()
def init_weights(model: nn.Module, std: float, seed: int) -> None:
    """Deterministically initialise every parameter (plain or FSDP2-sharded).

    Args:
        model: The transformer; parameters may be DTensor shards.
        std: Std of linear weights.
        seed: Init seed; the result does not depend on world size or packing.
    """
    for name, param in model.named_parameters():
        native = clean_name(name)
        device = param.device
        shapes = _split_shapes(native, param.shape)
        full = torch.cat([_init_value(k, s, std, seed, device)
                          for k, s in zip(diffusers_parts(native), shapes)])
        _assign(param, full)


def native_to_diffusers(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Split packed projections into Diffusers keys.

    Args:
        state: Full (unsharded) native state dict.

    Returns:
        Diffusers-keyed state dict (contiguous tensors, same dtypes).
    """
    out = {}
    for name, tensor in state.items():
        native = clean_name(name)
        parts = diffusers_parts(native)
        for key, piece in zip(parts, tensor.chunk(len(parts), dim=0)):
            out[key] = piece.contiguous()
    return out


def diffusers_to_native(state: dict[str, torch.Tensor],
                        native_names: list[str]) -> dict[str, torch.Tensor]:
    """Concatenate Diffusers keys into the native (possibly packed) layout.

    Args:
        state: Diffusers-keyed full state dict.
        native_names: Clean native parameter names of the target model.

    Returns:
        Native-keyed full state dict.

    Raises:
        ValueError: Keys are missing or unexpected.
    """
    out, used = {}, set()
    for native in native_names:
        parts = diffusers_parts(native)
        missing = [p for p in parts if p not in state]
        if missing:
            raise ValueError(f"checkpoint is missing keys {missing}")
        out[native] = torch.cat([state[p] for p in parts]) if len(parts) > 1 else state[parts[0]]
        used.update(parts)
    extra = sorted(set(state) - used)
    if extra:
        raise ValueError(f"checkpoint has unexpected keys {extra[:5]} (+{max(0, len(extra) - 5)})")
    return out


def export_safetensors(model: nn.Module, path: str | Path) -> None:
    """Write the full model in Diffusers keys (collective; rank 0 writes).

    Args:
        model: The (FSDP2) model; every rank must call this.
        path: Output ``.safetensors`` file.
    """
    import torch.distributed as dist
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    if not dist.is_initialized() or dist.get_rank() == 0:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        save_file(native_to_diffusers(state), str(path))
        logger.info("exported %d tensors to %s", len(state), path)
    if dist.is_initialized():
        dist.barrier()


def load_safetensors(model: nn.Module, path: str | Path) -> None:
    """Load Diffusers-keyed weights into the (FSDP2) model (every rank reads the file).

    Args:
        model: The model; parameters may be DTensor shards.
        path: A ``.safetensors`` file with Diffusers keys.
    """
    from safetensors.torch import load_file

    state = load_file(str(path))
    names = [clean_name(n) for n, _ in model.named_parameters()]
    native = diffusers_to_native(state, names)
    params = dict(model.named_parameters())
    for name, param in params.items():
        _assign(param, native[clean_name(name)].to(torch.float32))
    logger.info("loaded %d tensors from %s", len(state), path)


def save_dcp(model: nn.Module, optimizer: torch.optim.Optimizer, step: int,
             path: str | Path) -> None:
    """Save model, optimizer (incl. fused-AdamW ``step`` tensors) and step with DCP."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd, "step": torch.tensor(step)},
             checkpoint_id=str(path))


def load_dcp(model: nn.Module, optimizer: torch.optim.Optimizer, path: str | Path) -> int:
    """Resume model and optimizer from DCP; returns the saved step count.

    The fused/capturable AdamW ``step`` state is a float32 tensor on the
    parameter's device; DCP loads it in place into the optimizer's own state
    (materialised by ``get_state_dict``), so its shape, dtype and device are kept.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd, "step": torch.tensor(0)}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    return int(state["step"])
