"""Input pipeline: deterministic synthetic samples or precomputed safetensors latents.

The whole pool of ``data.num_batches`` optimizer-step batches is built once, moved
to the device before the first step and then repeated, so fetching a batch inside
the timed loop is a list index: the data path is off the critical path
(DESIGN.md section 8, "repeated/prefetched input").

Sample ``i`` of rank ``r`` is a pure function of (data.seed, r, i), so a batch of 2
split into two micro-batches of 1 sees exactly the same samples (the
accumulation-equivalence test relies on it).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator

import torch

from trainer.config import Recipe

logger = logging.getLogger(__name__)

Batch = dict[str, torch.Tensor]


def _generator(seed: int, rank: int, index: int) -> torch.Generator:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(zlib.crc32(f"{seed}/{rank}/{index}".encode()))
    return gen


def synthetic_sample(recipe: Recipe, rank: int, index: int, device: torch.device,
                     source: dict[str, torch.Tensor] | None = None) -> Batch:
    """One training sample.

    Args:
        recipe: The recipe (shapes, seed, text padding, first-frame conditioning).
        rank: Data-parallel rank (samples differ per rank).
        index: Sample index on that rank.
        device: Target device.
        source: Optional precomputed ``latents`` [S, C, F, H, W], ``text`` [S, T, E]
            and ``text_mask`` [S, T]; sample ``index`` uses row ``(rank + index) % S``.

    Returns:
        ``latents`` [N, C] float32, ``noise`` [N, C] float32, ``text`` [T, E]
        float32 and ``sigma`` float32 (logit-normal in (0, 1)): [] per sample, or
        [N] per token with ``data.first_frame_conditioning_p > 0``, which also adds
        ``loss_mask`` [N] float32 (0 on the clean first-frame tokens of a conditioned
        sample). ``text_mask`` [T] float32 (1 real, 0 padding) when the recipe or the
        source defines one.
    """
    m, d = recipe.model, recipe.data
    n, t = d.num_video_tokens, d.num_text_tokens
    gen = _generator(d.seed, rank, index)
    text_mask = None
    if source is None:
        latents = torch.randn(n, m.in_channels, generator=gen)
        text = torch.randn(t, m.caption_channels, generator=gen)
        if d.num_text_valid_tokens is not None:
            text_mask = (torch.arange(t) < d.num_text_valid_tokens).float()
    else:
        row = (rank + index) % source["latents"].shape[0]
        latents = source["latents"][row].float().flatten(1).T.contiguous()  # [F*H*W, C]
        text = source["text"][row].float()
        if "text_mask" in source:
            text_mask = source["text_mask"][row].float()
    noise = torch.randn(n, m.out_channels, generator=gen)
    sigma = torch.sigmoid(torch.randn((), generator=gen))
    out = {"latents": latents, "noise": noise, "text": text, "sigma": sigma}
    if d.first_frame_conditioning_p > 0:
        # Drawn after everything else, so the other tensors do not depend on the option.
        conditioned = bool(torch.rand((), generator=gen) < d.first_frame_conditioning_p)
        first = d.latent_height * d.latent_width if conditioned else 0
        out["sigma"] = torch.full((n,), float(sigma))
        out["sigma"][:first] = 0.0
        out["loss_mask"] = torch.ones(n)
        out["loss_mask"][:first] = 0.0
    if text_mask is not None:
        out["text_mask"] = text_mask
    return {k: v.to(device) for k, v in out.items()}


def _load_source(recipe: Recipe) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    d, m = recipe.data, recipe.model
    tensors = load_file(str(d.path))
    for key in ("latents", "text"):
        if key not in tensors:
            raise ValueError(f"data.path {d.path}: missing tensor {key!r}")
    lat, txt = tensors["latents"], tensors["text"]
    want_lat = (m.in_channels, d.latent_frames, d.latent_height, d.latent_width)
    if tuple(lat.shape[1:]) != want_lat:
        raise ValueError(f"data.path latents shape {tuple(lat.shape)} != [S, *{want_lat}]")
    if tuple(txt.shape[1:]) != (d.num_text_tokens, m.caption_channels):
        raise ValueError(f"data.path text shape {tuple(txt.shape)} does not match the recipe")
    out = {"latents": lat, "text": txt}
    if "text_mask" in tensors:
        mask = tensors["text_mask"]
        if tuple(mask.shape) != (lat.shape[0], d.num_text_tokens):
            raise ValueError(f"data.path text_mask shape {tuple(mask.shape)} != "
                             f"[{lat.shape[0]}, {d.num_text_tokens}] (samples, text tokens)")
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError(f"data.path {d.path}: text_mask must hold only 0 and 1")
        out["text_mask"] = mask
    return out


class RepeatedBatches:
    """Device-resident pool of optimizer-step batches, repeated forever.

    Each item is a list of ``grad_accum_steps`` micro-batches, each a dict of
    ``latents`` [B, N, C], ``noise`` [B, N, C], ``text`` [B, T, E], ``sigma`` [B] (or
    [B, N] with ``loss_mask`` [B, N] under first-frame conditioning) and, when some
    prompt of the pool is padded, ``text_mask`` [B, T]. A pool whose masks are all ones
    carries none: the model then attends to every text token, the same output without
    the masked kernel.
    """

    def __init__(self, recipe: Recipe, rank: int, device: torch.device) -> None:
        source = _load_source(recipe) if recipe.data.source == "safetensors" else None
        bsz, accum = recipe.train.local_batch_size, recipe.train.grad_accum_steps
        self.pool: list[list[Batch]] = []
        for p in range(recipe.data.num_batches):
            micro = []
            for a in range(accum):
                samples = [synthetic_sample(recipe, rank, (p * accum + a) * bsz + b, device, source)
                           for b in range(bsz)]
                micro.append({k: torch.stack([s[k] for s in samples]) for k in samples[0]})
            self.pool.append(micro)
        masks = [mb["text_mask"] for batch in self.pool for mb in batch if "text_mask" in mb]
        if masks and all(bool(mask.all()) for mask in masks):
            for batch in self.pool:
                for mb in batch:
                    mb.pop("text_mask")
        logger.info("rank=%d data pool: %d batches x %d micro-batches x %d samples on %s",
                    rank, len(self.pool), accum, bsz, device)

    def __iter__(self) -> Iterator[list[Batch]]:
        i = 0
        while True:
            yield self.pool[i % len(self.pool)]
            i += 1
