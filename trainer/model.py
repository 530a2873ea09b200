"""LTX-2 video-only transformer (architecture only).

Sources (read for the layout, re-implemented here): Diffusers
``LTX2VideoTransformer3DModel`` (``diffusers/models/transformers/transformer_ltx2.py``,
video branch: ``LTX2VideoTransformerBlock`` self-attention, text cross-attention
and FFN with AdaLN-single modulation; ``LTX2AudioVideoRotaryPosEmbed`` in "split"
mode) and Lightricks ltx-core's video-only LTX-2 model. Parameter names follow
the Diffusers keys so checkpoints map one to one (packed QKV/KV excepted, see
``trainer.checkpoint``).

Shape legend (suffixes on tensor names):
    B  batch (samples)            N  video tokens (F * H * W latent positions)
    T  text tokens                D  hidden width (num_heads * head_dim)
    C  latent channels            E  caption (text-encoder) channels
    H  attention heads            K  head dim            S  timestep rows (1 or N)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config import DataConfig, ModelConfig

_SDPA_BACKENDS = {
    "cudnn": "CUDNN_ATTENTION",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}


def sdpa_context(backend: str) -> contextlib.AbstractContextManager:
    """Context that pins PyTorch SDPA to one backend.

    Args:
        backend: ``auto``/``eager`` (no pinning) or one of ``cudnn``, ``flash``,
            ``efficient``, ``math``.

    Returns:
        A context manager; entering it restricts ``F.scaled_dot_product_attention``.
    """
    if backend not in _SDPA_BACKENDS:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, _SDPA_BACKENDS[backend])])


def attention(q_BHNK: torch.Tensor, k_BHMK: torch.Tensor, v_BHMK: torch.Tensor,
              backend: str, bias_B11M: torch.Tensor | None = None) -> torch.Tensor:
    """Non-causal multi-head attention.

    Args:
        q_BHNK: Queries [B, H, N, K].
        k_BHMK: Keys [B, H, M, K].
        v_BHMK: Values [B, H, M, K].
        backend: ``eager`` = explicit matmul + fp32 softmax (what FlopCounterMode
            counts as 2 matmuls forward, 4 backward); anything else = SDPA.
        bias_B11M: Optional additive score bias [B, 1, 1, M] (the text attention
            mask, :func:`text_attention_bias`); None attends to every key.

    Returns:
        Output [B, H, N, K] in the query dtype.
    """
    if backend == "eager":
        scores_BHNM = (q_BHNK @ k_BHMK.transpose(-2, -1)) * (q_BHNK.shape[-1] ** -0.5)
        if bias_B11M is not None:
            scores_BHNM = scores_BHNM + bias_B11M
        probs_BHNM = torch.softmax(scores_BHNM.float(), dim=-1).to(q_BHNK.dtype)
        return probs_BHNM @ v_BHMK
    return F.scaled_dot_product_attention(q_BHNK, k_BHMK, v_BHMK, attn_mask=bias_B11M)


def apply_split_rope(x_BHNK: torch.Tensor, cos_1HNk: torch.Tensor,
                     sin_1HNk: torch.Tensor) -> torch.Tensor:
    """Rotate the first half of each head against the second half ("split" RoPE).

    Matches Diffusers ``apply_split_rotary_emb``: with x = [x1, x2] along K,
    out = [x1 cos - x2 sin, x2 cos + x1 sin], computed in float32.

    Args:
        x_BHNK: Queries or keys [B, H, N, K].
        cos_1HNk: Cosines [1, H, N, K/2] (float32 or the compute dtype).
        sin_1HNk: Sines [1, H, N, K/2].

    Returns:
        Rotated tensor [B, H, N, K] in the input dtype.
    """
    x1, x2 = x_BHNK.float().chunk(2, dim=-1)
    cos, sin = cos_1HNk.float(), sin_1HNk.float()
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.to(x_BHNK.dtype)


def rope_cos_sin(model: ModelConfig, data: DataConfig,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """3-D RoPE tables for the video grid, "split" layout.

    Follows Diffusers ``LTX2AudioVideoRotaryPosEmbed`` (video, split): each latent
    patch's pixel-space bounds (VAE factors 8x32x32, causal first frame, time in
    seconds at ``fps``) give a midpoint, normalised by the base sizes and mapped
    to [-1, 1]; frequencies theta**linspace(0, 1, D // 6) * pi / 2 (float64, then
    rounded to float32 as Diffusers' ``rope_double_precision=True``) are shared by
    the 3 axes and interleaved per frequency; the D/2 angle vector is front-padded
    (cos 1, sin 0) and split across heads. Positions, angles and cos/sin are computed
    in ``model.rope_dtype``: float32 reproduces the reference bit for bit, float64 is
    this trainer's pre-issue-27 table.

    Args:
        model: Model config (heads, head dim, theta, base sizes, fps, rope dtype).
        data: Data config (latent grid).
        device: Where the tables live.

    Returns:
        ``(cos, sin)``, each [1, H, N, K/2] float32.
    """
    dt = torch.float32 if model.rope_dtype == "float32" else torch.float64
    d = model.hidden_dim
    f, h, w = data.latent_frames, data.latent_height, data.latent_width
    grid = torch.stack(torch.meshgrid(
        torch.arange(f, dtype=dt), torch.arange(h, dtype=dt), torch.arange(w, dtype=dt),
        indexing="ij"), dim=0).flatten(1)  # [3, N]
    scale = torch.tensor([8.0, 32.0, 32.0], dtype=dt)[:, None]
    start, end = grid * scale, (grid + 1) * scale
    # Causal VAE: the first latent frame covers one pixel frame (Diffusers causal_offset=1).
    start[0] = (start[0] + 1 - 8).clamp(min=0) / model.fps
    end[0] = (end[0] + 1 - 8).clamp(min=0) / model.fps
    mid = (start + end) / 2
    base = torch.tensor([model.rope_base_frames, model.rope_base_height,
                         model.rope_base_width], dtype=dt)[:, None]
    frac_3N = mid / base
    num_freqs = d // 6
    freqs = model.rope_theta ** torch.linspace(0.0, 1.0, num_freqs, dtype=torch.float64)
    freqs = (freqs * math.pi / 2).float().to(dt)
    angles_N3F = (frac_3N.T[:, :, None] * 2 - 1) * freqs  # [N, 3, F]
    angles = angles_N3F.transpose(1, 2).flatten(1)  # [N, 3F] interleaved per frequency
    pad = d // 2 - angles.shape[1]
    cos = torch.cat([torch.ones(angles.shape[0], pad, dtype=dt), angles.cos()], 1)
    sin = torch.cat([torch.zeros(angles.shape[0], pad, dtype=dt), angles.sin()], 1)
    n, heads = angles.shape[0], model.num_heads
    cos = cos.reshape(n, heads, -1).transpose(0, 1)[None].float()
    sin = sin.reshape(n, heads, -1).transpose(0, 1)[None].float()
    return cos.contiguous().to(device), sin.contiguous().to(device)


def text_attention_bias(text_mask_BT: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive cross-attention bias from a text attention mask (Diffusers semantics).

    As ``LTX2VideoTransformer3DModel.forward``: bias = (1 - mask) * -10000 in the compute
    dtype, added to the attention scores of every head and query. A finite bias, not
    -inf: a prompt that is all padding attends uniformly instead of producing NaN.

    Args:
        text_mask_BT: [B, T], 1 (or True) for real tokens and 0 for padding.
        dtype: Compute dtype.

    Returns:
        Bias [B, 1, 1, T] in ``dtype``.
    """
    return ((1 - text_mask_BT.to(dtype)) * -10000.0)[:, None, None, :]


def timestep_features(t_BS: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal timestep features, cos first (PixArt ``Timesteps(flip_sin_to_cos=True)``).

    Args:
        t_BS: Model timesteps [B, S] (sigma * timestep_scale), any float dtype.
        dim: Feature width (even).

    Returns:
        Features [B, S, dim] float32.
    """
    half = dim // 2
    exponent = -math.log(10000.0) * torch.arange(half, dtype=torch.float32,
                                                 device=t_BS.device) / half
    args = t_BS.float()[..., None] * exponent.exp()
    return torch.cat([args.cos(), args.sin()], dim=-1)


class _GELUProj(nn.Module):
    """Linear then tanh-GELU (Diffusers ``GELU(approximate="tanh")``, key ``proj``)."""

    def __init__(self, dim_in: int, dim_out: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    """D -> ffn_dim (tanh GELU) -> D; keys ``net.0.proj`` and ``net.2`` as in Diffusers."""

    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.net = nn.ModuleList([_GELUProj(dim, inner), nn.Identity(), nn.Linear(inner, dim)])

    def forward(self, x_BND: torch.Tensor) -> torch.Tensor:
        return self.net[2](self.net[0](x_BND))


class SelfAttention(nn.Module):
    """Video self-attention: Q/K/V/O with bias, full-width RMSNorm on q and k, split RoPE."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.hidden_dim
        self.heads, self.backend, self.packed = cfg.num_heads, cfg.attention_backend, cfg.packed_qkv
        if self.packed:
            self.to_qkv = nn.Linear(d, 3 * d)
        else:
            self.to_q, self.to_k, self.to_v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.norm_q = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.norm_k = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.to_out = nn.ModuleList([nn.Linear(d, d)])

    def _heads(self, x_BND: torch.Tensor) -> torch.Tensor:
        return x_BND.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x_BND: torch.Tensor, cos_1HNk: torch.Tensor,
                sin_1HNk: torch.Tensor) -> torch.Tensor:
        if self.packed:
            q_BND, k_BND, v_BND = self.to_qkv(x_BND).chunk(3, dim=-1)
        else:
            q_BND, k_BND, v_BND = self.to_q(x_BND), self.to_k(x_BND), self.to_v(x_BND)
        q_BHNK = apply_split_rope(self._heads(self.norm_q(q_BND)), cos_1HNk, sin_1HNk)
        k_BHNK = apply_split_rope(self._heads(self.norm_k(k_BND)), cos_1HNk, sin_1HNk)
        o_BHNK = attention(q_BHNK, k_BHNK, self._heads(v_BND), self.backend)
        return self.to_out[0](o_BHNK.transpose(1, 2).flatten(2))


class CrossAttention(nn.Module):
    """Text cross-attention: Q/O on video tokens, K/V on text tokens, q/k RMSNorm, no RoPE."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.hidden_dim
        self.heads, self.backend, self.packed = cfg.num_heads, cfg.attention_backend, cfg.packed_qkv
        self.to_q = nn.Linear(d, d)
        if self.packed:
            self.to_kv = nn.Linear(d, 2 * d)
        else:
            self.to_k, self.to_v = nn.Linear(d, d), nn.Linear(d, d)
        self.norm_q = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.norm_k = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.to_out = nn.ModuleList([nn.Linear(d, d)])

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x_BND: torch.Tensor, text_BTD: torch.Tensor,
                text_bias_B11T: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed:
            k_BTD, v_BTD = self.to_kv(text_BTD).chunk(2, dim=-1)
        else:
            k_BTD, v_BTD = self.to_k(text_BTD), self.to_v(text_BTD)
        q_BHNK = self._heads(self.norm_q(self.to_q(x_BND)))
        k_BHTK = self._heads(self.norm_k(k_BTD))
        o_BHNK = attention(q_BHNK, k_BHTK, self._heads(v_BTD), self.backend, text_bias_B11T)
        return self.to_out[0](o_BHNK.transpose(1, 2).flatten(2))


class LTX2Block(nn.Module):
    """One LTX-2 video block (Diffusers ``LTX2VideoTransformerBlock``, video branch).

    x += gate_msa * attn1(norm1(x) * (1 + scale_msa) + shift_msa)
    x += attn2(norm2(x), text)
    x += gate_mlp * ff(norm3(x) * (1 + scale_mlp) + shift_mlp)
    with the 6 modulation vectors = scale_shift_table [6, D] + temb.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.hidden_dim
        self.norm1 = nn.RMSNorm(d, eps=cfg.norm_eps, elementwise_affine=False)
        self.attn1 = SelfAttention(cfg)
        self.norm2 = nn.RMSNorm(d, eps=cfg.norm_eps, elementwise_affine=False)
        self.attn2 = CrossAttention(cfg)
        self.norm3 = nn.RMSNorm(d, eps=cfg.norm_eps, elementwise_affine=False)
        self.ff = FeedForward(d, cfg.ffn_dim)
        self.scale_shift_table = nn.Parameter(torch.empty(6, d))

    def forward(self, x_BND: torch.Tensor, text_BTD: torch.Tensor, temb_BS6D: torch.Tensor,
                cos_1HNk: torch.Tensor, sin_1HNk: torch.Tensor,
                text_bias_B11T: torch.Tensor | None = None) -> torch.Tensor:
        """Args are [B,N,D] video, [B,T,D] text, [B,S,6D] timestep modulation,
        [1,H,N,K/2] RoPE tables and an optional [B,1,1,T] text attention bias;
        returns [B,N,D]."""
        mod = self.scale_shift_table + temb_BS6D.unflatten(-1, (6, -1))  # [B, S, 6, D]
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = mod.unbind(2)
        h_BND = self.norm1(x_BND) * (1 + scale_msa) + shift_msa
        x_BND = x_BND + self.attn1(h_BND, cos_1HNk, sin_1HNk) * gate_msa
        x_BND = x_BND + self.attn2(self.norm2(x_BND), text_BTD, text_bias_B11T)
        h_BND = self.norm3(x_BND) * (1 + scale_mlp) + shift_mlp
        return x_BND + self.ff(h_BND) * gate_mlp


class _TimestepEmbedder(nn.Module):
    def __init__(self, in_dim: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_dim, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class _CombinedEmbedding(nn.Module):
    def __init__(self, in_dim: int, dim: int) -> None:
        super().__init__()
        self.timestep_embedder = _TimestepEmbedder(in_dim, dim)


class AdaLNSingle(nn.Module):
    """AdaLN-single timestep embedding with 6 modulation vectors (PixArt-alpha, LTX-2)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.hidden_dim
        self.freq_dim = cfg.timestep_embed_dim
        self.emb = _CombinedEmbedding(cfg.timestep_embed_dim, d)
        self.linear = nn.Linear(d, 6 * d)

    def forward(self, t_BS: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (modulation [B, S, 6D], embedded timestep [B, S, D])."""
        emb_BSD = self.emb.timestep_embedder(timestep_features(t_BS, self.freq_dim).to(dtype))
        return self.linear(F.silu(emb_BSD)), emb_BSD


class _CaptionProjection(nn.Module):
    """E -> D -> D with tanh GELU (PixArt ``PixArtAlphaTextProjection``)."""

    def __init__(self, in_dim: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_dim, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.gelu(self.linear_1(x), approximate="tanh"))


class LTX2VideoTransformer(nn.Module):
    """LTX-2 video-only denoiser: latents + text embeddings + timestep -> velocity.

    13.04 B parameters at the default (full) size with 48 blocks.
    """

    def __init__(self, cfg: ModelConfig, data: DataConfig) -> None:
        super().__init__()
        d = cfg.hidden_dim
        self.cfg, self.data = cfg, data
        self.proj_in = nn.Linear(cfg.in_channels, d)
        self.caption_projection = _CaptionProjection(cfg.caption_channels, d)
        self.time_embed = AdaLNSingle(cfg)
        self.transformer_blocks = nn.ModuleList(LTX2Block(cfg) for _ in range(cfg.num_layers))
        self.norm_out = nn.LayerNorm(d, eps=cfg.norm_eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.empty(2, d))
        self.proj_out = nn.Linear(d, cfg.out_channels)
        self._rope_cache: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def rope(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Cached RoPE tables [1, H, N, K/2] (float32) on ``device``."""
        if device not in self._rope_cache:
            self._rope_cache[device] = rope_cos_sin(self.cfg, self.data, device)
        return self._rope_cache[device]

    def forward(self, latents_BNC: torch.Tensor, text_BTE: torch.Tensor,
                sigma: torch.Tensor, text_mask_BT: torch.Tensor | None = None) -> torch.Tensor:
        """Predict the flow-matching velocity.

        Args:
            latents_BNC: Noised latent tokens [B, N, C] (any float dtype).
            text_BTE: Text-encoder embeddings [B, T, E].
            sigma: Noise level in [0, 1] (float32 preferred): per sample [B], or per
                token [B, N] (image-to-video conditioning: first-frame tokens at 0;
                needs ``model.singleton_timestep = false``).
            text_mask_BT: Optional text attention mask [B, T] (1 real, 0 padding); None
                attends to every text token (the same output as an all-ones mask).

        Returns:
            Velocity [B, N, C_out] in the compute dtype.

        Raises:
            ValueError: A per-token ``sigma`` with ``model.singleton_timestep = true``,
                or a ``sigma`` of another shape.
        """
        dtype = self.proj_in.weight.dtype
        t = sigma.float() * self.cfg.timestep_scale
        n = latents_BNC.shape[1]
        if t.ndim == 2 and tuple(t.shape) == (latents_BNC.shape[0], n):
            if self.cfg.singleton_timestep:
                raise ValueError("per-token sigma [B, N] needs model.singleton_timestep = false")
            t_BS = t
        elif t.ndim == 1:
            t_BS = t[:, None] if self.cfg.singleton_timestep else t[:, None].expand(-1, n)
        else:
            raise ValueError(f"sigma must be [B] or [B, N]; got {tuple(sigma.shape)}")
        with sdpa_context(self.cfg.attention_backend):
            x_BND = self.proj_in(latents_BNC.to(dtype))
            text_BTD = self.caption_projection(text_BTE.to(dtype))
            text_bias = None if text_mask_BT is None else text_attention_bias(text_mask_BT, dtype)
            temb_BS6D, emb_BSD = self.time_embed(t_BS, dtype)
            cos, sin = self.rope(x_BND.device)
            if self.cfg.rope_tables_in_compute_dtype:
                cos, sin = cos.to(dtype), sin.to(dtype)
            for block in self.transformer_blocks:
                x_BND = block(x_BND, text_BTD, temb_BS6D, cos, sin, text_bias)
            shift_BSD, scale_BSD = (self.scale_shift_table + emb_BSD[:, :, None]).unbind(2)
            x_BND = self.norm_out(x_BND) * (1 + scale_BSD) + shift_BSD
            return self.proj_out(x_BND)

    def blocks(self) -> Iterator[nn.Module]:
        """The transformer blocks in order (possibly wrapped by AC/compile)."""
        return iter(self.transformer_blocks)


def flow_matching_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Flow-matching loss: x_t = (1 - sigma) x0 + sigma noise, target noise - x0.

    Args:
        model: The transformer (plain or FSDP-wrapped).
        batch: ``latents`` [B, N, C], ``noise`` [B, N, C], ``text`` [B, T, E],
            ``sigma`` [B] or [B, N] float32; optional ``text_mask`` [B, T] (1 real
            token, 0 padding) and ``loss_mask`` [B, N] (1 = token in the loss; the
            clean first-frame tokens of an image-to-video sample are 0).

    Returns:
        Scalar float32 MSE between predicted and target velocity over the tokens in
        the loss (all tokens without ``loss_mask``).
    """
    x0, noise, sigma = batch["latents"], batch["noise"], batch["sigma"]
    s = sigma.float()[:, None, None] if sigma.ndim == 1 else sigma.float()[:, :, None]
    x_t = (1 - s) * x0.float() + s * noise.float()
    pred = model(x_t, batch["text"], sigma, batch.get("text_mask"))
    target = noise.float() - x0.float()
    loss_mask = batch.get("loss_mask")
    if loss_mask is None:
        return F.mse_loss(pred.float(), target)
    weight_BN1 = loss_mask.float()[:, :, None]
    num = (weight_BN1.sum() * target.shape[-1]).clamp(min=1.0)
    return ((pred.float() - target) ** 2 * weight_BN1).sum() / num
