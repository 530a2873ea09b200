"""Recipe schema for the bundled LTX-2 trainer (DESIGN.md section 8).

A recipe is everything that defines the measured workload (DESIGN.md section 1):
model sizes and options, input shape, batch and accumulation, precision and
parallelism policy, measurement counts and checkpoint paths. Recipes are TOML
files under ``trainer/recipes/`` validated by pydantic models that forbid unknown
fields, so a typo is an error naming the field. ``Recipe.model_dump()`` is the
object the ledger stores with every run.

This module imports no torch: the orchestrator validates recipes and overrides at
submission time through :func:`load_recipe` without paying for torch.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
"""Folder holding the named recipe files (``NAME.toml``)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Section):
    """LTX-2 video-only transformer sizes and options.

    Defaults are the LTX-2.0 video transformer as published in Diffusers
    ``LTX2VideoTransformer3DModel`` (video branch) and ltx-core's video-only model.
    """

    num_layers: int = Field(48, ge=1)
    """Number of transformer blocks (48 at full size)."""
    num_heads: int = Field(32, ge=1)
    """Attention heads; hidden width is ``num_heads * head_dim``."""
    head_dim: int = Field(128, ge=2)
    """Channels per attention head (must be even for split RoPE)."""
    in_channels: int = Field(128, ge=1)
    """Latent channels per token (patch size 1x1x1)."""
    out_channels: int = Field(128, ge=1)
    """Predicted velocity channels per token."""
    caption_channels: int = Field(3840, ge=1)
    """Width of the text-encoder embeddings fed to the caption projection."""
    ffn_mult: int = Field(4, ge=1)
    """FFN inner width as a multiple of the hidden width (4 -> 16384 at full size)."""
    timestep_embed_dim: int = Field(256, ge=2)
    """Sinusoidal timestep feature width before the AdaLN-single MLP."""
    timestep_scale: float = 1000.0
    """Model timestep = sigma * timestep_scale (flow-matching sigma in [0, 1])."""
    norm_eps: float = Field(1e-6, gt=0)
    """Epsilon of every RMSNorm / LayerNorm."""
    rope_theta: float = Field(10000.0, gt=0)
    """RoPE frequency base."""
    rope_base_frames: int = Field(20, ge=1)
    """RoPE normalisation for the time axis (seconds * fps units, Diffusers default 20)."""
    rope_base_height: int = Field(2048, ge=1)
    """RoPE normalisation for the height axis, pixels."""
    rope_base_width: int = Field(2048, ge=1)
    """RoPE normalisation for the width axis, pixels."""
    fps: float = Field(24.0, gt=0)
    """Frames per second used to turn frame indices into seconds for RoPE."""
    rope_dtype: Literal["float32", "float64"] = "float32"
    """Dtype of the RoPE angles (position x frequency) and their cos/sin. ``float32`` is
    what Diffusers ``LTX2AudioVideoRotaryPosEmbed`` and ltx-core compute (the default);
    ``float64`` reproduces this trainer's tables before issue 27 (they differ by up to
    8.8e-4 at 81x480x832, from float32 rounding of angles up to ~1.6e4 rad)."""
    rope_tables_in_compute_dtype: bool = False
    """Round the cos/sin tables to ``parallel.param_dtype`` before the blocks (this
    trainer before issue 27; half the table bytes under bf16). False keeps them float32
    and rotates in float32, as Diffusers ``apply_split_rotary_emb`` does."""
    packed_qkv: bool = False
    """Fuse self-attention Q/K/V and cross-attention K/V into one GEMM each.
    Checkpoints still load and export with split Diffusers keys."""
    singleton_timestep: bool = True
    """Timestep tensor [B, 1] (one AdaLN vector per sample) instead of [B, tokens]."""
    attention_backend: Literal["auto", "cudnn", "flash", "efficient", "math", "eager"] = "auto"
    """SDPA backend; ``eager`` is explicit matmul + softmax (FLOP audit, CPU)."""

    @property
    def hidden_dim(self) -> int:
        """Hidden width d = num_heads * head_dim (4096 at full size)."""
        return self.num_heads * self.head_dim

    @property
    def ffn_dim(self) -> int:
        """FFN inner width (16384 at full size)."""
        return self.hidden_dim * self.ffn_mult

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.head_dim % 2:
            raise ValueError("model.head_dim must be even (split RoPE rotates half-dims)")
        return self


class DataConfig(_Section):
    """Input shape and source. Token count follows the LTX-2 VAE (8x32x32 compression)."""

    num_frames: int = Field(81, ge=1)
    """Pixel-space frames; must be 1 + 8k (causal VAE). 81 -> 11 latent frames."""
    height: int = Field(480, ge=32)
    """Pixel height; multiple of 32. 480 -> 15 latent rows."""
    width: int = Field(832, ge=32)
    """Pixel width; multiple of 32. 832 -> 26 latent columns."""
    num_text_tokens: int = Field(1024, ge=1)
    """Text tokens per sample (cross-attention keys)."""
    source: Literal["synthetic", "safetensors"] = "synthetic"
    """Deterministic synthetic latents, or precomputed latents from ``path``."""
    path: str | None = None
    """safetensors file with ``latents`` [S, C, F, H, W] and ``text`` [S, T, caption]."""
    num_batches: int = Field(1, ge=1)
    """Distinct batches kept resident on the device and repeated (prefetched pool)."""
    seed: int = 1234
    """Seed of synthetic samples, noise and per-sample sigma."""
    num_text_valid_tokens: int | None = Field(None, ge=1)
    """Synthetic prompts: the first this many text tokens are real and the rest padding
    (text attention mask 0, DESIGN vocabulary "text attention mask"). None: every token
    is real and no mask is applied, which equals an all-ones mask. A ``safetensors``
    source brings its own optional ``text_mask`` instead. The override
    ``data.num_text_valid_tokens=none`` sets None."""
    first_frame_conditioning_p: float = Field(0.0, ge=0.0, le=1.0)
    """Probability that a sample is image-to-video conditioned: the tokens of its first
    latent frame stay clean (per-token sigma 0, so timestep 0) and are left out of the
    loss, as in LTX-2 image-to-video training. Needs per-token timesteps
    (``model.singleton_timestep = false``). 0: every token of a sample shares its sigma."""

    @property
    def latent_frames(self) -> int:
        """Latent frames (num_frames - 1) / 8 + 1."""
        return (self.num_frames - 1) // 8 + 1

    @property
    def latent_height(self) -> int:
        """Latent rows height / 32."""
        return self.height // 32

    @property
    def latent_width(self) -> int:
        """Latent columns width / 32."""
        return self.width // 32

    @property
    def num_video_tokens(self) -> int:
        """Video tokens per sample (4290 for 81x480x832)."""
        return self.latent_frames * self.latent_height * self.latent_width

    @model_validator(mode="after")
    def _check(self) -> DataConfig:
        if (self.num_frames - 1) % 8:
            raise ValueError("data.num_frames must be 1 + 8k (LTX-2 causal VAE)")
        if self.height % 32 or self.width % 32:
            raise ValueError("data.height and data.width must be multiples of 32")
        if self.source == "safetensors" and not self.path:
            raise ValueError("data.path is required when data.source = 'safetensors'")
        if self.num_text_valid_tokens is not None and self.num_text_valid_tokens > self.num_text_tokens:
            raise ValueError(f"data.num_text_valid_tokens ({self.num_text_valid_tokens}) must be at "
                             f"most data.num_text_tokens ({self.num_text_tokens})")
        return self

    @field_validator("num_text_valid_tokens", mode="before")
    @classmethod
    def _none_valid(cls, value: Any) -> Any:
        return None if value == "none" else value


class TrainConfig(_Section):
    """Optimisation settings."""

    local_batch_size: int = Field(1, ge=1)
    """Samples per rank per micro-step."""
    grad_accum_steps: int = Field(1, ge=1)
    """Micro-steps per optimizer step; gradients sync only on the last one."""
    lr: float = Field(1e-4, ge=0)
    """AdamW learning rate (constant)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW decoupled weight decay."""
    beta1: float = Field(0.9, ge=0, lt=1)
    """AdamW first-moment decay."""
    beta2: float = Field(0.999, ge=0, lt=1)
    """AdamW second-moment decay."""
    adam_eps: float = Field(1e-8, gt=0)
    """AdamW epsilon."""
    fused_adamw: Literal["auto", "on", "off"] = "auto"
    """Fused AdamW kernel; ``auto`` = on for CUDA, foreach elsewhere."""
    max_grad_norm: float = Field(1.0, gt=0)
    """Gradient clipping threshold (global L2 norm)."""
    init_std: float = Field(0.02, gt=0)
    """Std of the normal init of linear weights."""
    seed: int = 0
    """Parameter init seed (the same on every rank and world size)."""


class ParallelConfig(_Section):
    """FSDP2, precision, compile and activation checkpointing policy."""

    modules_per_group: int = Field(1, ge=1)
    """Consecutive blocks per FSDP2 unit."""
    reshard_after_forward: bool = True
    """Free gathered params after forward (False keeps them for backward)."""
    param_dtype: Literal["bfloat16", "float32"] = "bfloat16"
    """Dtype of gathered working params and compute (masters stay float32)."""
    reduce_dtype: Literal["bfloat16", "float32"] = "float32"
    """Dtype of gradient reduce-scatter."""
    master_dtype: Literal["float32", "bfloat16"] = "float32"
    """Dtype of the registered (master) parameters and hence of the AdamW moments.
    ``float32`` is DESIGN.md section 8; ``bfloat16`` trains on BF16 masters (less memory
    and optimizer traffic, different numerics: the semantic gate reports it as a
    dtype-coverage change)."""
    compile: bool = False
    """Regional torch.compile of each block (never the whole FSDP model)."""
    activation_checkpointing: Literal["none", "full"] = "none"
    """Full activation checkpointing of every block."""
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    """Process-group backend; auto = nccl on CUDA, gloo on CPU."""
    device: Literal["auto", "cuda", "cpu"] = "auto"
    """Device; auto = cuda when available."""


class MeasureConfig(_Section):
    """Measurement contract counts (DESIGN.md section 2, docs/record-contract.md).

    Warmup is either a fixed count or ends at steady state: once at least
    ``warmup_steps`` steps ran and the last ``steady_window`` slowest-rank step times lie
    within ``steady_tolerance_pct`` of their median (at most ``max_warmup_steps``). The
    measured window is ``measured_steps`` steps, or, with ``measured_seconds``, as many
    steps as fill that many seconds at the steady-state step time (at least
    ``measured_steps``, at most ``max_measured_steps``), decided once when warmup ends so
    the timed loop itself runs without a collective.
    """

    warmup_steps: int = Field(10, ge=0)
    """Optimizer steps discarded at the start (the minimum under ``steady``)."""
    measured_steps: int = Field(20, ge=1)
    """Optimizer steps whose slowest-rank median is reported (the minimum with
    ``measured_seconds``)."""
    warmup_mode: Literal["fixed", "steady"] = "fixed"
    """``fixed``: exactly ``warmup_steps``; ``steady``: until the step time settles."""
    max_warmup_steps: int = Field(50, ge=1)
    """Steady-state warmup gives up settling after this many steps (they are all warmup)."""
    steady_window: int = Field(5, ge=2)
    """Consecutive slowest-rank step times that must agree to end a steady warmup."""
    steady_tolerance_pct: float = Field(1.0, gt=0)
    """How far (percent of their median) those step times may spread."""
    measured_seconds: float | None = Field(None, gt=0)
    """Measured window in seconds of step time (None: ``measured_steps`` steps; the
    override ``measure.measured_seconds=none`` sets None, as TOML has no null)."""
    max_measured_steps: int = Field(100000, ge=1)
    """Cap on the measured steps of a time window."""
    delay_fraction: float = Field(0.0, ge=0.0, le=1.0)
    """For validating gates only: a calibrated slowdown of each step by this fraction of
    its own time (0.01: about +1%). On CUDA device matmuls sized by feedback, from step 2
    on; on CPU a host sleep after every step (``trainer/slowdown.py``)."""
    semantic_probe_step: int | None = Field(0, ge=0)
    """Optimizer step (0-based, warmup included) at which the ``AXBGATE_SEMANTICS`` probe
    hashes the root parameters and their pre-clip gradients (one gather of small tensors;
    step 0 keeps it out of the measured window). None: no probe."""
    semantic_floor_prefix_steps: int | None = Field(None, ge=1, le=100)
    """For the gate, not the trainer: compared steps at the start of the semantic
    comparison that share one A-vs-B floor (``orchestrator.verdict.SemanticPolicy``);
    None: the policy default."""
    profile_dir: str | None = None
    """If set, profile 2 extra steps after the measured ones and write the
    torch.profiler summary table there (rank 0)."""

    @field_validator("measured_seconds", mode="before")
    @classmethod
    def _none_window(cls, value: Any) -> Any:
        return None if value == "none" else value


class CheckpointConfig(_Section):
    """Checkpoint load, export and resume paths (all optional; docs/checkpoints.md)."""

    load_safetensors: str | None = None
    """Initial weights in the Diffusers ``LTX2VideoTransformer3DModel`` layout (split
    Q/K/V): a ``.safetensors`` file, a ``*.safetensors.index.json`` or a folder holding
    either (as ``save_pretrained`` writes it). Audio and audio-video tensors are skipped
    with a warning; each rank reads only the slices of its own FSDP2 shard."""
    export_safetensors: str | None = None
    """Write final weights here in the Diffusers layout, video tensors only: a path
    ending in ``.safetensors`` is one file, anything else a folder of shards with
    ``diffusion_pytorch_model.safetensors.index.json`` (rank 0 writes, one shard in host
    memory at a time)."""
    export_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Dtype of the exported tensors. ``auto``: each tensor in the dtype it had in
    ``load_safetensors`` (so a bf16 checkpoint comes back bf16, bitwise when untrained),
    else the registered (master) dtype."""
    export_max_shard_gb: float = Field(10.0, gt=0)
    """Largest shard of a folder export, GB (1e9 bytes; Diffusers ``save_pretrained``
    defaults to 10 GB). A tensor larger than this gets a shard of its own."""
    save_dcp: str | None = None
    """Write a DCP checkpoint (model + optimizer + step) here at the end."""
    resume_dcp: str | None = None
    """Resume model, optimizer and step count from this DCP checkpoint."""


class Recipe(_Section):
    """One measured workload. ``model_dump()`` is what the ledger stores."""

    name: str = "custom"
    """Recipe name (file stem for named recipes)."""
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    parallel: ParallelConfig = ParallelConfig()
    measure: MeasureConfig = MeasureConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()

    @model_validator(mode="after")
    def _check(self) -> Recipe:
        if self.data.first_frame_conditioning_p > 0 and self.model.singleton_timestep:
            raise ValueError("data.first_frame_conditioning_p > 0 needs per-token timesteps: "
                             "set model.singleton_timestep = false")
        return self


def recipe_measure_keys(name_or_path: str | Path) -> set[str]:
    """The keys a recipe's TOML names in its ``[measure]`` table (not the defaults).

    Raises:
        ValueError: Unknown recipe or unreadable TOML.
    """
    text = str(name_or_path)
    path = Path(text) if (text.endswith(".toml") or Path(text).is_file()) \
        else RECIPES_DIR / f"{text}.toml"
    if not path.is_file():
        raise ValueError(f"unknown recipe {text!r}; bundled: {', '.join(list_recipes())}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"recipe {path}: {exc}") from exc
    return set((raw.get("measure") or {}).keys())


def list_recipes() -> list[str]:
    """Names of the bundled recipes.

    Returns:
        Sorted recipe names (file stems under ``trainer/recipes``).
    """
    return sorted(p.stem for p in RECIPES_DIR.glob("*.toml"))


def _parse_value(text: str) -> Any:
    """Parse an override value as a TOML value, falling back to a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides to a raw recipe dict.

    Args:
        data: Raw recipe mapping (as read from TOML); not modified.
        overrides: Items like ``train.local_batch_size=2``; values are TOML
            literals (``true``, ``2``, ``"x"``) or bare strings.

    Returns:
        A new mapping with the overrides set.

    Raises:
        ValueError: An item has no ``=`` or an empty key.
    """
    out = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ValueError(f"override {item!r} must look like section.key=value")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                msg = f"override {item!r}: {part!r} is not a section"
                raise ValueError(msg)  # noqa: TRY004 - bad user input, not a programming error
            node = child
        node[parts[-1]] = _parse_value(value.strip())
    return out


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "recipe"
        lines.append(f"{loc}: {e['msg']}")
    return "invalid recipe: " + "; ".join(lines)


def load_recipe(name_or_path: str | Path, overrides: list[str] | None = None) -> Recipe:
    """Load, override and validate a recipe.

    Args:
        name_or_path: A bundled recipe name (``tiny``, ``ltx2-full``, ...) or a
            path to a ``.toml`` file.
        overrides: ``section.key=value`` items applied before validation.

    Returns:
        The validated, frozen recipe.

    Raises:
        ValueError: Unknown recipe, unreadable TOML, or a field that is unknown or
            invalid (the message names each offending field, e.g.
            ``train.local_batch_sise: Extra inputs are not permitted``).
    """
    text = str(name_or_path)
    path = Path(text)
    if text.endswith(".toml") or path.is_file():
        if not path.is_file():
            raise ValueError(f"recipe file {text!r} does not exist")
    else:
        path = RECIPES_DIR / f"{text}.toml"
        if not path.is_file():
            raise ValueError(f"unknown recipe {text!r}; bundled: {', '.join(list_recipes())}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"recipe {path}: {exc}") from exc
    raw.setdefault("name", path.stem)
    raw = apply_overrides(raw, overrides or [])
    try:
        return Recipe.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_format_error(exc)) from None
