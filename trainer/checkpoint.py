"""Checkpoints: Diffusers-layout safetensors load/export, deterministic init, DCP resume.

Native parameter names equal the Diffusers ``LTX2VideoTransformer3DModel`` keys
except the packed projections: ``attn1.to_qkv`` is the row-wise concatenation of
``attn1.to_q``, ``to_k``, ``to_v`` and ``attn2.to_kv`` that of ``attn2.to_k``,
``to_v`` (weights and biases). Load assembles and export splits them by rows, so a
round trip is bit-exact; export writes each tensor back in the dtype it was loaded
in. A Diffusers checkpoint also holds the audio branch and the audio-video
cross-attention (``trainer.diffusers_layout``); the video-only model skips them.

Loading is rank-local: each rank reads only the rows of its FSDP2 shard from the
memory-mapped files (``trainer.checkpoint_files``), so host memory per rank is its
shard plus a bounded window of file pages, not the whole checkpoint
(``benchmarks/checkpoint_rss.py``).

Initialisation is defined on the Diffusers keys (each key drawn from its own
seeded generator) and then mapped onto the native parameters, so the packed and
split models start from identical weights for any world size.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from trainer.checkpoint_files import (
    DEFAULT_BUDGET_BYTES,
    SliceReader,
    list_tensors,
    resolve_files,
    save_shard,
)
from trainer.diffusers_layout import (
    INDEX_NAME,
    WEIGHTS_NAME,
    block_index,
    is_audio_video_key,
    plan_shards,
    shard_file_name,
    video_key_shapes,
    write_index,
)

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
        state: Diffusers-keyed full state dict; audio and audio-video keys are ignored.
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
    extra = sorted(k for k in set(state) - used if not is_audio_video_key(k))
    if extra:
        raise ValueError(f"checkpoint has unexpected keys {extra[:5]} (+{max(0, len(extra) - 5)})")
    return out


_TORCH_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What :func:`load_safetensors` read on this rank."""

    num_tensors: int
    """Diffusers video tensors the model took (all ranks together read each fully)."""
    bytes_read: int
    """Bytes of tensor data this rank read: about its shard in the file's dtype."""
    num_skipped: int
    """Audio and audio-video tensors left unread."""
    skipped_bytes: int
    """Their total size in the file, bytes."""
    file_dtypes: dict[str, int]
    """safetensors dtype -> number of video tensors in it."""
    num_files: int
    """Weight files of the checkpoint."""
    num_opens: int
    """File opens of this rank (reopens that bound the mapped pages included)."""


def _local_rows(param: torch.Tensor) -> tuple[torch.Tensor, int, int] | None:
    """This rank's rows of a parameter: ``(local tensor, first row, one past the last)``.

    FSDP2 shards dim 0 like ``torch.chunk`` over the 1-D data-parallel mesh: rank r
    holds rows ``[r * ceil(R / W), ...)`` (fewer, or none, at the end). None for any
    other placement (the caller reads the whole tensor then).
    """
    from torch.distributed.tensor import DTensor, Shard

    if not isinstance(param, DTensor):
        return param.data, 0, param.shape[0]
    local = param.to_local()
    mesh = param.device_mesh
    if mesh.ndim != 1 or tuple(param.placements) != (Shard(0),):
        return None
    rows, world = param.shape[0], mesh.size()
    chunk = -(-rows // world)
    start = min(mesh.get_local_rank() * chunk, rows)
    stop = start + local.shape[0]
    assert stop <= rows and local.shape[0] == max(0, min(chunk, rows - start)), (rows, world)
    return local, start, stop


def _check_keys(params: list[tuple[str, torch.Tensor]], tensors: dict, where: str) -> None:
    """Raise a ValueError naming missing, mis-shaped or unexpected checkpoint keys."""
    needed: dict[str, tuple[int, ...]] = {}
    for native, param in params:
        parts = diffusers_parts(native)
        for key, shape in zip(parts, _split_shapes(native, param.shape)):
            needed[key] = tuple(shape)
    missing = [k for k in needed if k not in tensors]
    extra = [k for k in tensors if k not in needed and not is_audio_video_key(k)]
    blocks = {b for b in map(block_index, tensors) if b is not None}
    num_layers = 1 + max((b for b in map(block_index, needed) if b is not None), default=-1)
    if blocks and max(blocks) + 1 != num_layers:
        raise ValueError(f"checkpoint {where} has {max(blocks) + 1} transformer blocks, the "
                         f"recipe's model.num_layers = {num_layers}")
    if missing:
        raise ValueError(f"checkpoint {where} is missing {len(missing)} keys the model needs, "
                         f"e.g. {missing[:5]}")
    if extra:
        raise ValueError(f"checkpoint {where} has {len(extra)} unexpected keys, e.g. {extra[:5]} "
                         "(neither this video-only LTX-2.0 model nor audio/audio-video tensors)")
    for key, shape in needed.items():
        info = tensors[key]
        if info.shape != shape:
            raise ValueError(f"checkpoint {where}: {key} has shape {list(info.shape)}, the "
                             f"recipe's model needs {list(shape)} (check model.num_heads, "
                             "head_dim, ffn_mult, in/out/caption channels)")
        if info.dtype not in _TORCH_DTYPES:
            raise ValueError(f"checkpoint {where}: {key} is {info.dtype}; floating-point "
                             f"tensors ({', '.join(_TORCH_DTYPES)}) are supported")


@torch.no_grad()
def load_safetensors(model: nn.Module, path: str | Path, *,
                     budget_bytes: int = DEFAULT_BUDGET_BYTES) -> LoadReport:
    """Load Diffusers-layout weights into the (FSDP2) model, each rank reading its shard only.

    Packed ``to_qkv``/``to_kv`` shards are assembled from the row ranges of the split
    keys they cover. Audio and audio-video tensors are skipped with a warning naming
    how many and their size. Values are copied into the registered dtype (a bf16 file
    into float32 masters is exact).

    Args:
        model: The model; parameters may be DTensor shards (materialised, any device).
        path: A ``.safetensors`` file, a ``*.safetensors.index.json`` or a folder as
            Diffusers ``save_pretrained`` writes it (single file or sharded).
        budget_bytes: File pages kept mapped before a reopen (host memory above the
            destination shards), bytes.

    Returns:
        This rank's :class:`LoadReport`.

    Raises:
        ValueError: Unreadable checkpoint; missing, unexpected or mis-shaped keys; a
            different block count; a non-floating dtype (each named).
    """
    files, index = resolve_files(path)
    where = str(index or files[0])
    tensors = list_tensors(files)
    params = [(clean_name(n), p) for n, p in model.named_parameters()]
    _check_keys(params, tensors, where)
    skipped = [info.nbytes for key, info in tensors.items() if is_audio_video_key(key)]
    if skipped:
        logger.warning("checkpoint %s: skipped %d audio/audio-video tensors (%.4g GB): the "
                       "bundled trainer is the video-only LTX-2 model", where, len(skipped),
                       sum(skipped) / 1e9)
    order = {f: i for i, f in enumerate(files)}
    jobs = []  # (file order, key, first source row, one past the last, destination rows)
    whole = []
    for native, param in params:
        parts = diffusers_parts(native)
        target = _local_rows(param)
        if target is None:
            whole.append((native, param, parts))
            continue
        local, start, stop = target
        rows = param.shape[0] // len(parts)
        for i, key in enumerate(parts):
            lo, hi = max(start, i * rows), min(stop, (i + 1) * rows)
            if lo < hi:
                jobs.append((order[tensors[key].file], key, lo - i * rows, hi - i * rows,
                             local[lo - start:hi - start]))
    jobs.sort(key=lambda job: job[0])
    with SliceReader(budget_bytes) as reader:
        for _, key, lo, hi, dest in jobs:
            for a, b in reader.chunks(tensors[key], lo, hi):
                dest[a - lo:b - lo].copy_(reader.rows(tensors[key], key, a, b))
        for native, param, parts in whole:
            full = torch.cat([reader.rows(tensors[k], k, 0, tensors[k].shape[0]).clone()
                              for k in parts])
            _assign(param, full.to(param.dtype))
    video = [tensors[k].dtype for native, _ in params for k in diffusers_parts(native)]
    report = LoadReport(num_tensors=len(video), bytes_read=reader.bytes_read,
                        num_skipped=len(skipped), skipped_bytes=sum(skipped),
                        file_dtypes={d: video.count(d) for d in sorted(set(video))},
                        num_files=len(files), num_opens=reader.num_opens)
    logger.info("loaded %d tensors from %s (%d files, dtypes %s): %.4g GB read on this rank",
                report.num_tensors, where, report.num_files, report.file_dtypes,
                report.bytes_read / 1e9)
    return report


def _export_dtypes(params: list[tuple[str, torch.Tensor]], dtype: str,
                   like: str | Path | None) -> dict[str, torch.dtype]:
    """Export dtype per Diffusers key (see :func:`export_safetensors`)."""
    source: dict[str, str] = {}
    if dtype == "auto" and like:
        source = {k: info.dtype for k, info in list_tensors(resolve_files(like)[0]).items()}
    out = {}
    for native, param in params:
        for key in diffusers_parts(native):
            if dtype != "auto":
                out[key] = getattr(torch, dtype)
            elif source.get(key) in _TORCH_DTYPES:
                out[key] = getattr(torch, _TORCH_DTYPES[source[key]])
            else:
                out[key] = param.dtype
    return out


@torch.no_grad()
def export_safetensors(model: nn.Module, path: str | Path, *, dtype: str = "auto",
                       like: str | Path | None = None, max_shard_bytes: int = 10**10) -> None:
    """Write the model's video tensors in the Diffusers layout (collective; rank 0 writes).

    Parameters are gathered one at a time (``full_tensor``) and rank 0 holds at most one
    shard plus one gathered parameter in host memory. Files are written to a temporary
    name and renamed.

    Args:
        model: The (FSDP2) model; every rank must call this.
        path: ``*.safetensors``: one file. Otherwise a folder: ``diffusion_pytorch_model.safetensors``
            when everything fits one shard, else numbered shards and
            ``diffusion_pytorch_model.safetensors.index.json``; older weight files of
            that name pattern in the folder are removed, as ``save_pretrained`` does.
        dtype: ``auto`` (each tensor in its dtype in ``like``, else the registered
            dtype), ``float32`` or ``bfloat16``.
        like: The checkpoint the model was loaded from (``checkpoint.load_safetensors``).
        max_shard_bytes: Largest shard of a folder export, bytes.
    """
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    params = [(clean_name(n), p) for n, p in model.named_parameters()]
    dtypes = _export_dtypes(params, dtype, like)
    sizes = []
    for native, param in params:
        for key, shape in zip(diffusers_parts(native), _split_shapes(native, param.shape)):
            sizes.append((key, shape.numel() * dtypes[key].itemsize))
    cfg = getattr(model, "cfg", None)
    if cfg is not None:  # shards in the split model's key order: packing does not move them
        rank = {k: i for i, k in enumerate(video_key_shapes(cfg))}
        sizes.sort(key=lambda item: rank.get(item[0], len(rank)))
    out = Path(path)
    single = out.name.endswith(".safetensors")
    folder = out.parent if single else out
    shards = [[k for k, _ in sizes]] if single else plan_shards(sizes, max_shard_bytes)
    names = ([out.name] if single else [WEIGHTS_NAME] if len(shards) == 1
             else [shard_file_name(i, len(shards)) for i in range(len(shards))])
    if rank0:
        folder.mkdir(parents=True, exist_ok=True)
    buffer: dict[str, torch.Tensor] = {}
    done = 0
    for native, param in params:
        full = param.full_tensor() if isinstance(param, DTensor) else param.detach()
        if not rank0:
            continue
        full = full.cpu()
        parts = diffusers_parts(native)
        for key, piece in zip(parts, full.chunk(len(parts), dim=0)):
            buffer[key] = piece.to(dtypes[key], copy=True).contiguous()
        while done < len(shards) and all(k in buffer for k in shards[done]):
            save_shard({k: buffer.pop(k) for k in shards[done]}, folder / names[done])
            done += 1
    if rank0:
        if len(names) > 1:
            weight_map = {k: names[i] for i, keys in enumerate(shards) for k in keys}
            write_index(folder, weight_map, sum(n for _, n in sizes))
        if not single:
            stale = [f for f in folder.glob("diffusion_pytorch_model*.safetensors*")
                     if f.name not in names and not (len(names) > 1 and f.name == INDEX_NAME)]
            for f in stale:
                f.unlink()
        logger.info("exported %d tensors (%.4g GB) to %s in %d file(s)", len(sizes),
                    sum(n for _, n in sizes) / 1e9, out, len(names))
    if dist.is_initialized():
        dist.barrier()


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
