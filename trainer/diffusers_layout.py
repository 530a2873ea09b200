"""The Diffusers ``LTX2VideoTransformer3DModel`` checkpoint layout (names, shapes, files).

A checkpoint as Diffusers 0.42 ``save_pretrained`` writes it holds the whole
audio-video LTX-2.0 model: the video branch this trainer implements (1,215 tensors,
13,041,520,768 parameters at full size) and the audio and audio-video tensors
(2,295 at full size) that a video-only model never reads. This module names both
sets and the files they live in; ``tests/unit/trainer/test_diffusers_parity.py``
checks every name and shape against Diffusers itself, full size included.

Files (Diffusers / huggingface_hub conventions): one ``diffusion_pytorch_model.safetensors``,
or shards ``diffusion_pytorch_model-00001-of-00003.safetensors`` plus
``diffusion_pytorch_model.safetensors.index.json`` (``{"metadata": {"total_size": bytes},
"weight_map": {key: file}}``), and a ``config.json`` with the constructor arguments.

Importing this module does not import torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config import ModelConfig

WEIGHTS_NAME = "diffusion_pytorch_model.safetensors"
"""Single-file weights name of a Diffusers model folder."""
INDEX_NAME = "diffusion_pytorch_model.safetensors.index.json"
"""Index of a sharded Diffusers model folder."""
CONFIG_NAME = "config.json"
"""Constructor arguments of a Diffusers model folder."""
DIFFUSERS_VERSION = "0.42.1"
"""The Diffusers release whose layout this module follows (and the parity test runs)."""

DTYPE_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
               "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
"""Bytes per element of the safetensors dtype names."""
_AV_ROOT_PREFIXES = ("audio_", "av_cross_attn_")
_AV_BLOCK_PREFIXES = ("audio_", "video_to_audio_", "video_a2v_")


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioDims:
    """Sizes of the LTX-2.0 audio branch (Diffusers ``LTX2VideoTransformer3DModel`` defaults)."""

    num_heads: int = 32
    """Audio attention heads (``audio_num_attention_heads``)."""
    head_dim: int = 64
    """Channels per audio head (``audio_attention_head_dim``)."""
    in_channels: int = 128
    """Audio latent channels (``audio_in_channels``)."""
    out_channels: int = 128
    """Audio output channels (``audio_out_channels``)."""
    cross_attention_dim: int = 2048
    """Width of the audio prompt stream (``audio_cross_attention_dim``)."""

    @property
    def hidden_dim(self) -> int:
        """Audio width (2048 at full size)."""
        return self.num_heads * self.head_dim

    @classmethod
    def for_model(cls, model: ModelConfig) -> AudioDims:
        """Audio sizes in LTX-2.0's proportion to a video model: as many heads, half the
        head dim, the latent channels of the video; the full-size model gives the defaults."""
        return cls(num_heads=model.num_heads, head_dim=max(1, model.head_dim // 2),
                   in_channels=model.in_channels, out_channels=model.out_channels,
                   cross_attention_dim=model.num_heads * max(1, model.head_dim // 2))


def is_audio_video_key(key: str) -> bool:
    """Whether a Diffusers key belongs to the audio branch or the audio-video cross-attention.

    Root tensors ``audio_*`` and ``av_cross_attn_*``; block tensors
    ``transformer_blocks.N.audio_*`` (audio self/prompt attention, audio-to-video
    attention, audio FFN and tables), ``video_to_audio_*`` and
    ``video_a2v_cross_attn_scale_shift_table``. A video-only model (Diffusers'
    ``isolate_modalities=True``) reads none of them.

    Args:
        key: A Diffusers state-dict key.

    Returns:
        True for an audio or audio-video tensor.
    """
    if key.startswith("transformer_blocks."):
        parts = key.split(".", 2)
        return len(parts) == 3 and parts[2].startswith(_AV_BLOCK_PREFIXES)
    return key.startswith(_AV_ROOT_PREFIXES)


def block_index(key: str) -> int | None:
    """The block number of a ``transformer_blocks.N.`` key, else None."""
    parts = key.split(".", 2)
    if parts[0] == "transformer_blocks" and len(parts) > 1 and parts[1].isdigit():
        return int(parts[1])
    return None


def _linear(out: dict[str, tuple[int, ...]], name: str, dim_out: int, dim_in: int) -> None:
    out[f"{name}.weight"] = (dim_out, dim_in)
    out[f"{name}.bias"] = (dim_out,)


def _attention(out: dict[str, tuple[int, ...]], name: str, query_dim: int, kv_dim: int,
               inner: int) -> None:
    for proj, dim_in in (("to_q", query_dim), ("to_k", kv_dim), ("to_v", kv_dim)):
        _linear(out, f"{name}.{proj}", inner, dim_in)
    out[f"{name}.norm_q.weight"] = (inner,)
    out[f"{name}.norm_k.weight"] = (inner,)
    _linear(out, f"{name}.to_out.0", query_dim, inner)


def _adaln(out: dict[str, tuple[int, ...]], name: str, dim: int, freq_dim: int,
           num_mod: int) -> None:
    _linear(out, f"{name}.emb.timestep_embedder.linear_1", dim, freq_dim)
    _linear(out, f"{name}.emb.timestep_embedder.linear_2", dim, dim)
    _linear(out, f"{name}.linear", num_mod * dim, dim)


def audio_video_key_shapes(model: ModelConfig,
                           audio: AudioDims | None = None) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the audio and audio-video tensors of an LTX-2.0 checkpoint.

    Follows ``LTX2VideoTransformer3DModel.__init__`` with the LTX-2.0 options
    (no gated attention, no prompt modulation, prompt embeddings on).

    Args:
        model: The video model config (width, depth, caption and timestep widths).
        audio: The audio branch sizes (None: :meth:`AudioDims.for_model`).

    Returns:
        ``{key: shape}`` in the order Diffusers registers them (2,295 keys at full size).
    """
    audio = audio or AudioDims.for_model(model)
    d, a, ac = model.hidden_dim, audio.hidden_dim, audio.cross_attention_dim
    freq = model.timestep_embed_dim
    out: dict[str, tuple[int, ...]] = {}
    _linear(out, "audio_proj_in", a, audio.in_channels)
    _linear(out, "audio_caption_projection.linear_1", a, model.caption_channels)
    _linear(out, "audio_caption_projection.linear_2", a, a)
    _adaln(out, "audio_time_embed", a, freq, 6)
    _adaln(out, "av_cross_attn_video_scale_shift", d, freq, 4)
    _adaln(out, "av_cross_attn_audio_scale_shift", a, freq, 4)
    _adaln(out, "av_cross_attn_video_a2v_gate", d, freq, 1)
    _adaln(out, "av_cross_attn_audio_v2a_gate", a, freq, 1)
    out["audio_scale_shift_table"] = (2, a)
    for i in range(model.num_layers):
        b = f"transformer_blocks.{i}"
        _attention(out, f"{b}.audio_attn1", a, a, a)
        _attention(out, f"{b}.audio_attn2", a, ac, a)
        _attention(out, f"{b}.audio_to_video_attn", d, a, a)
        _attention(out, f"{b}.video_to_audio_attn", a, d, a)
        _linear(out, f"{b}.audio_ff.net.0.proj", 4 * a, a)
        _linear(out, f"{b}.audio_ff.net.2", a, 4 * a)
        out[f"{b}.audio_scale_shift_table"] = (6, a)
        out[f"{b}.video_a2v_cross_attn_scale_shift_table"] = (5, d)
        out[f"{b}.audio_a2v_cross_attn_scale_shift_table"] = (5, a)
    _linear(out, "audio_proj_out", audio.out_channels, a)
    return out


def video_key_shapes(model: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the video-branch tensors (split Q/K/V, as Diffusers stores them).

    Built from this trainer's own model on the meta device, so it is by construction
    what :func:`trainer.checkpoint.load_safetensors` expects (1,215 keys at full size).

    Args:
        model: The model config (``packed_qkv`` is ignored: files are always split).

    Returns:
        ``{key: shape}`` in parameter order.
    """
    import torch

    from trainer.config import DataConfig
    from trainer.model import LTX2VideoTransformer

    split = model.model_copy(update={"packed_qkv": False})
    with torch.device("meta"):
        net = LTX2VideoTransformer(split, DataConfig())
    return {name: tuple(p.shape) for name, p in net.named_parameters()}


def diffusers_config(model: ModelConfig, audio: AudioDims | None = None) -> dict[str, Any]:
    """``config.json`` of the ``LTX2VideoTransformer3DModel`` that has this video branch.

    Diffusers fixes what this trainer keeps configurable: 256 timestep features, an FFN
    4x wide, norm_out eps 1e-6; a model config that differs there still gets a config,
    but Diffusers would build another model from it.

    Args:
        model: The video model config.
        audio: The audio branch sizes (None: :meth:`AudioDims.for_model`).

    Returns:
        The JSON-safe constructor arguments plus ``_class_name`` and ``_diffusers_version``.
    """
    audio = audio or AudioDims.for_model(model)
    return {
        "_class_name": "LTX2VideoTransformer3DModel", "_diffusers_version": DIFFUSERS_VERSION,
        "in_channels": model.in_channels, "out_channels": model.out_channels,
        "patch_size": 1, "patch_size_t": 1,
        "num_attention_heads": model.num_heads, "attention_head_dim": model.head_dim,
        "cross_attention_dim": model.hidden_dim, "vae_scale_factors": [8, 32, 32],
        "pos_embed_max_pos": model.rope_base_frames, "base_height": model.rope_base_height,
        "base_width": model.rope_base_width,
        "audio_in_channels": audio.in_channels, "audio_out_channels": audio.out_channels,
        "audio_num_attention_heads": audio.num_heads,
        "audio_attention_head_dim": audio.head_dim,
        "audio_cross_attention_dim": audio.cross_attention_dim,
        "num_layers": model.num_layers, "norm_eps": model.norm_eps,
        "caption_channels": model.caption_channels, "rope_theta": model.rope_theta,
        "rope_double_precision": True, "causal_offset": 1,
        "timestep_scale_multiplier": int(model.timestep_scale),
        "cross_attn_timestep_scale_multiplier": int(model.timestep_scale),
        "rope_type": "split",
    }


def shard_file_name(index: int, count: int) -> str:
    """Name of shard ``index`` (0-based) of ``count`` (``...-00001-of-00003.safetensors``)."""
    stem = WEIGHTS_NAME.removesuffix(".safetensors")
    return f"{stem}-{index + 1:05d}-of-{count:05d}.safetensors"


def plan_shards(sizes: list[tuple[str, int]], max_shard_bytes: int) -> list[list[str]]:
    """Group keys into shards in order, each at most ``max_shard_bytes`` (greedy).

    As huggingface_hub ``split_torch_state_dict_into_shards``: a tensor larger than the
    limit gets a shard of its own.

    Args:
        sizes: ``(key, nbytes)`` in write order.
        max_shard_bytes: Largest shard, bytes (> 0).

    Returns:
        Keys per shard, in order (at least one shard, possibly empty).
    """
    shards: list[list[str]] = [[]]
    used = 0
    for key, nbytes in sizes:
        if shards[-1] and used + nbytes > max_shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(key)
        used += nbytes
    return shards


def write_index(folder: Path, weight_map: dict[str, str], total_size: int) -> None:
    """Write ``diffusion_pytorch_model.safetensors.index.json`` atomically.

    Args:
        folder: The model folder.
        weight_map: ``{key: shard file name}``.
        total_size: Sum of the tensor bytes of all shards.
    """
    path = folder / INDEX_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"metadata": {"total_size": total_size},
                               "weight_map": dict(sorted(weight_map.items()))}, indent=2) + "\n")
    tmp.replace(path)


def write_init_checkpoint(recipe: Any, folder: str | Path, *, dtype: str = "float32",
                          max_shard_bytes: int = 5 * 10**9, device: str = "cpu",
                          with_audio: bool = True,
                          audio: AudioDims | None = None) -> dict[str, Any]:
    """Write a ``save_pretrained``-compatible LTX-2.0 folder holding the recipe's own init.

    Every video tensor is exactly what :func:`trainer.checkpoint.init_weights` gives
    the recipe (``train.init_std``, ``train.seed``) on ``device``: a float32 folder
    written on the training device therefore loads into bit-identical weights, and a
    run started from it trains exactly like one started from the random init. The
    audio and audio-video tensors (``audio``; None writes a video-only folder) follow
    the same init rule with their own keys (``with_audio=False`` writes a video-only
    folder). Writes ``config.json`` (:func:`diffusers_config`),
    the shards (keys ordered root first, then block by block, video before audio, each
    shard generated and written on its own, at most one shard in host memory) and
    the index.

    Args:
        recipe: A :class:`trainer.config.Recipe`.
        folder: Output folder (created).
        dtype: ``float32`` or ``bfloat16`` (LTX-2's published weights are bf16).
        max_shard_bytes: Largest shard, bytes.
        device: Where values are drawn (``cuda`` matches a GPU run's init; CPU and
            CUDA generators differ).
        with_audio: Also write the audio and audio-video tensors.
        audio: Their sizes (None: :meth:`AudioDims.for_model`).

    Returns:
        ``{"num_tensors", "num_audio_video_tensors", "total_bytes", "num_files"}``.

    Raises:
        ValueError: ``dtype`` is not float32 or bfloat16.
    """
    import torch

    from trainer.checkpoint import _init_value
    from trainer.checkpoint_files import save_shard

    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype must be float32 or bfloat16, not {dtype!r}")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    video = video_key_shapes(recipe.model)
    av = audio_video_key_shapes(recipe.model, audio) if with_audio else {}
    shapes = {**video, **av}
    keys = sorted(shapes, key=lambda k: (-1 if block_index(k) is None else block_index(k),
                                         k in av))
    torch_dtype = getattr(torch, dtype)
    sizes = [(k, _numel(shapes[k]) * torch_dtype.itemsize) for k in keys]
    shards = plan_shards(sizes, max_shard_bytes)
    names = [WEIGHTS_NAME] if len(shards) == 1 else [shard_file_name(i, len(shards))
                                                     for i in range(len(shards))]
    dev = torch.device(device)
    t = recipe.train
    for name, shard in zip(names, shards):
        tensors = {k: _init_value(k, torch.Size(shapes[k]), t.init_std, t.seed, dev)
                   .to(torch_dtype).cpu().contiguous() for k in shard}
        save_shard(tensors, out / name)
        del tensors
    total = sum(n for _, n in sizes)
    if len(names) > 1:
        write_index(out, {k: names[i] for i, ks in enumerate(shards) for k in ks}, total)
    cfg = diffusers_config(recipe.model, audio)
    (out / CONFIG_NAME).write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return {"num_tensors": len(keys), "num_audio_video_tensors": len(av),
            "total_bytes": total, "num_files": len(names)}


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
