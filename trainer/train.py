"""Training entry point: parse, build, train under the measurement contract, close.

Launch with ``torchrun`` or ``srun``: rank, world size and local rank come from
``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` or, when ``RANK`` is absent, from
``SLURM_PROCID``/``SLURM_NTASKS``/``SLURM_LOCALID``; ``MASTER_ADDR``/``MASTER_PORT``
come from the environment (a lone process without them uses loopback and a free
port). NCCL on CUDA, gloo on CPU.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from trainer import checkpoint, metrics, records, semantics, slowdown
from trainer.config import Recipe
from trainer.data import RepeatedBatches
from trainer.flops import flops_per_sample
from trainer.model import LTX2VideoTransformer, flow_matching_loss
from trainer.parallelize import parallelize

logger = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """Loss or gradient norm is NaN/Inf: the run is failed, not measured."""


@dataclass(slots=True)
class Dist:
    """Process-group facts of this rank."""

    rank: int
    """Global rank."""
    world_size: int
    """Number of ranks."""
    local_rank: int
    """Rank on this host (CUDA device index)."""
    device: torch.device
    """Compute device."""
    mesh: object = field(default=None)
    """1-D data-parallel DeviceMesh."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_launch_env(env: os._Environ[str] | dict[str, str]) -> tuple[int, int, int]:
    """Fill ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_*`` from torchrun or Slurm.

    torchrun sets ``RANK``; under ``srun`` (no ``RANK``) they come from
    ``SLURM_PROCID``/``SLURM_NTASKS``/``SLURM_LOCALID``; a lone process gets rank 0
    of 1 with loopback and a free port. ``MASTER_ADDR``/``MASTER_PORT`` are
    taken from the environment (the gate's launch preamble, DESIGN.md section 5).

    Args:
        env: The environment mapping; missing keys are written into it.

    Returns:
        ``(rank, world_size, local_rank)``.

    Raises:
        ValueError: A multi-rank launch without ``MASTER_PORT``.
    """
    if "RANK" not in env and "SLURM_PROCID" in env:
        env["RANK"], env["WORLD_SIZE"] = env["SLURM_PROCID"], env.get("SLURM_NTASKS", "1")
        env["LOCAL_RANK"] = env.get("SLURM_LOCALID", "0")
    if "RANK" not in env:
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in env:
        if int(env["WORLD_SIZE"]) > 1:
            raise ValueError("MASTER_PORT must be set for a multi-rank launch")
        env["MASTER_PORT"] = str(_free_port())
    return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0))


def init_distributed(recipe: Recipe) -> Dist:
    """Initialise the process group from torchrun or Slurm environment variables.

    Args:
        recipe: Uses ``parallel.device`` and ``parallel.backend``.

    Returns:
        This rank's :class:`Dist`.

    Raises:
        ValueError: ``parallel.device = "cuda"`` without CUDA.
    """
    rank, world, local = resolve_launch_env(os.environ)
    want = recipe.parallel.device
    use_cuda = torch.cuda.is_available() if want == "auto" else want == "cuda"
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("parallel.device = 'cuda' but CUDA is not available")
    device = torch.device("cuda", local) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    backend = recipe.parallel.backend
    if backend == "auto":
        backend = "nccl" if use_cuda else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("dp",))
    return Dist(rank, world, local, device, mesh)


def build(recipe: Recipe, d: Dist,
          timeline: dict[str, float] | None = None) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Build the FSDP2 model (meta init, shard, materialise, init or load) and AdamW.

    Args:
        recipe: The recipe.
        d: Distributed facts.

    Returns:
        ``(model, optimizer)``; all trainable parameters are DTensor shards of
        ``parallel.master_dtype`` (float32 unless the recipe declares otherwise).
    """
    with torch.device("meta"):
        model = LTX2VideoTransformer(recipe.model, recipe.data)
    if recipe.parallel.master_dtype == "bfloat16":  # BF16 masters: moments follow them
        model.to(torch.bfloat16)
    marks = timeline if timeline is not None else {}
    parallelize(model, recipe.parallel, d.mesh)
    marks["model_sharded_unix"] = time.time()
    model.to_empty(device=d.device)
    marks["model_materialized_unix"] = time.time()
    if recipe.checkpoint.load_safetensors:
        checkpoint.load_safetensors(model, recipe.checkpoint.load_safetensors)
    else:
        checkpoint.init_weights(model, recipe.train.init_std, recipe.train.seed)
    marks["weights_ready_unix"] = time.time()
    t = recipe.train
    fused = t.fused_adamw == "on" or (t.fused_adamw == "auto" and d.device.type == "cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=(t.beta1, t.beta2),
                                  eps=t.adam_eps, weight_decay=t.weight_decay,
                                  fused=fused or None, foreach=None if fused else True)
    num_params = sum(p.numel() for p in model.parameters())
    logger.info("rank=%d model: %d params (%.3f B), fused_adamw=%s", d.rank, num_params,
                num_params / 1e9, fused)
    return model, optimizer


def accumulate_grads(model: torch.nn.Module,
                     micro_batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """Forward/backward every micro-batch; gradients sync only on the last one.

    Args:
        model: FSDP2 model.
        micro_batches: ``grad_accum_steps`` batches (see ``trainer.data``).

    Returns:
        This rank's mean micro-batch loss, a 0-dim float32 device tensor (each
        micro-loss is divided by the number of micro-batches before backward).
    """
    n = len(micro_batches)
    loss_sum = torch.zeros((), device=micro_batches[0]["latents"].device)
    for i, batch in enumerate(micro_batches):
        model.set_requires_gradient_sync(i == n - 1)
        loss = flow_matching_loss(model, batch) / n
        loss.backward()
        loss_sum += loss.detach()
    return loss_sum


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               micro_batches: list[dict[str, torch.Tensor]],
               max_grad_norm: float, on_grads=None) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step over the micro-batches.

    The clip norm stays a device tensor: the caller reads it on the host only
    after ``optimizer.step()`` so the step is not stalled by a host sync.

    Args:
        model: FSDP2 model.
        optimizer: AdamW over the sharded parameters.
        micro_batches: ``grad_accum_steps`` batches.
        max_grad_norm: Clipping threshold (global L2 norm).
        on_grads: Called with the model after backward, before clipping (the semantic
            probe); None in every step but the probe step.

    Returns:
        ``(loss, grad_norm)``: this rank's mean micro-batch loss and the global
        pre-clip gradient norm, both 0-dim float32 device tensors.
    """
    loss_sum = accumulate_grads(model, micro_batches)
    if on_grads is not None:
        on_grads(model)
    params = [p for p in model.parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params], 2.0, foreach=True)
    if hasattr(grad_norm, "full_tensor"):
        grad_norm = grad_norm.full_tensor()
    torch.nn.utils.clip_grads_with_norm_(params, max_grad_norm, grad_norm, foreach=True)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum, grad_norm


@dataclass(slots=True)
class RunLog:
    """What the timed loop produced on this rank."""

    step_s: list[float] = field(default_factory=list)
    """This rank's per-step wall seconds (fetch to fetch)."""
    loss: list[float] = field(default_factory=list)
    """Rank-mean loss per step."""
    grad_norm: list[float] = field(default_factory=list)
    """Global gradient norm per step."""
    probe: dict | None = None
    """The semantic probe (``trainer.semantics.probe``) at ``measure.semantic_probe_step``."""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _slowest(step_s: float, d: Dist) -> float:
    """This step's time on the slowest rank (one scalar all-reduce; warmup only)."""
    value = torch.tensor([step_s], dtype=torch.float64, device=d.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def _window(recipe: Recipe, warm_slowest: list[float]) -> int:
    """Measured steps once warmup is over (a count, or the steps filling a time window)."""
    m = recipe.measure
    if m.measured_seconds is None:
        return m.measured_steps
    return metrics.measured_steps_for_window(warm_slowest[-m.steady_window:], m.measured_seconds,
                                             m.measured_steps, m.max_measured_steps)


def _warmup_over(recipe: Recipe, step: int, warm_slowest: list[float]) -> bool:
    m = recipe.measure
    if m.warmup_mode == "fixed":
        return step >= m.warmup_steps
    return step >= m.max_warmup_steps or (
        step >= m.warmup_steps
        and metrics.steady_state_reached(warm_slowest, m.steady_window, m.steady_tolerance_pct))


def run_steps(recipe: Recipe, d: Dist, model, optimizer, batches, log: RunLog,
              timeline: dict[str, float]) -> tuple[int, int]:
    """The timed loop: fetch, step, read loss/norm on the host, check finiteness.

    Warmup ends by the recipe's rule (``measure.warmup_mode``); while it lasts, each
    closed step's slowest-rank time is agreed with one scalar all-reduce, excluded from
    the next step's interval, so every rank ends warmup at the same step and sizes the
    measured window (``measure.measured_seconds``) the same way. The measured steps run
    without any collective besides the model's own.

    Returns:
        ``(num_warmup_steps, num_measured_steps)`` actually run.

    Raises:
        NonFiniteError: Loss or gradient norm is not finite (same step on all ranks).
    """
    m = recipe.measure
    timer = metrics.StepTimer(lambda: _sync(d.device))
    timer.step_s = log.step_s
    needs_agreement = m.warmup_mode == "steady" or m.measured_seconds is not None
    fixed = m.warmup_mode == "fixed" and m.measured_seconds is None
    warmup, total = (m.warmup_steps, m.warmup_steps + m.measured_steps) if fixed else (None, None)
    warm_slowest: list[float] = []
    step = 0
    slow = slowdown.CalibratedSlowdown(m.delay_fraction, d.device) if m.delay_fraction > 0 \
        else None
    while total is None or step < total:
        timer.fetch()
        if slow is not None and step > 0:
            slow.record_step_time(step - 1, log.step_s[-1])
        if warmup is None and step > 0:
            warm_slowest.append(_slowest(log.step_s[-1], d) if needs_agreement else log.step_s[-1])
            if _warmup_over(recipe, step, warm_slowest):
                warmup, total = step, step + _window(recipe, warm_slowest)
            timer.restart()
        if warmup is not None and step == warmup and "warmup_end_unix" not in timeline:
            timeline["warmup_end_unix"] = time.time()
        if step == 0:
            timeline["first_step_start_unix"] = time.time()
        if slow is not None:
            slow.step_started()
        micro = next(batches)
        on_grads = None
        if step == m.semantic_probe_step:
            def on_grads(mod, at=step):
                log.probe = semantics.probe(mod, at)
        loss, grad_norm = train_step(model, optimizer, micro, recipe.train.max_grad_norm, on_grads)
        if slow is not None:
            slow.before_sync()
        dist.all_reduce(loss)
        loss_v, norm_v = loss.item() / d.world_size, grad_norm.item()
        logger.info("rank=%d step=%d loss=%.6f grad_norm=%.4f", d.rank, step, loss_v, norm_v)
        if not (math.isfinite(loss_v) and math.isfinite(norm_v)):
            timer.close()
            raise NonFiniteError(f"non-finite loss={loss_v} or grad_norm={norm_v} at step {step}")
        log.loss.append(loss_v)
        log.grad_norm.append(norm_v)
        if slow is not None:  # a calibrated slowdown for validating gates
            slow.after_sync()
        if step == 0:
            timeline["first_step_end_unix"] = time.time()
        step += 1
    timer.close()
    timeline["last_step_end_unix"] = time.time()
    return int(warmup or 0), int(total - (warmup or 0))


def gather_step_times(step_s: list[float], d: Dist) -> list[list[float]]:
    """All-gather every rank's step-time list (one collective, after the loop)."""
    local = torch.tensor(step_s, dtype=torch.float64, device=d.device)
    out = [torch.empty_like(local) for _ in range(d.world_size)]
    dist.all_gather(out, local)
    return [t.tolist() for t in out]


def _peak_memory(d: Dist) -> tuple[int | None, int | None]:
    if d.device.type != "cuda":
        return None, None
    vals = torch.tensor([torch.cuda.max_memory_allocated(d.device),
                         torch.cuda.max_memory_reserved(d.device)], device=d.device)
    dist.all_reduce(vals, op=dist.ReduceOp.MAX)
    return int(vals[0]), int(vals[1])


def profile_steps(recipe: Recipe, d: Dist, model, optimizer, batches) -> None:
    """Profile 2 extra (unrecorded) steps; rank 0 writes the summary table."""
    from pathlib import Path

    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if d.device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(2):
            train_step(model, optimizer, next(batches), recipe.train.max_grad_norm)
        _sync(d.device)
    if d.rank == 0:
        sort = "self_cuda_time_total" if d.device.type == "cuda" else "self_cpu_time_total"
        out = Path(recipe.measure.profile_dir)
        out.mkdir(parents=True, exist_ok=True)
        try:
            table = prof.key_averages().table(sort_by=sort, row_limit=40,
                                              max_name_column_width=70)
        except (KeyError, AttributeError):  # newer torch names it device_time
            table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=40,
                                              max_name_column_width=70)
        (out / "profile_rank0.txt").write_text(table)
        logger.info("profile table written to %s", out / "profile_rank0.txt")


def _warmup_rule(recipe: Recipe) -> dict:
    """The warmup and window rule every run of a gate shares (recorded with the timing)."""
    m = recipe.measure
    return {"mode": m.warmup_mode, "min_warmup_steps": m.warmup_steps,
            "max_warmup_steps": m.max_warmup_steps, "steady_window": m.steady_window,
            "steady_tolerance_pct": m.steady_tolerance_pct, "measured_seconds": m.measured_seconds,
            "min_measured_steps": m.measured_steps}


def _result(recipe: Recipe, d: Dist, slowest: list[float], num_warmup: int, gpu_model: str | None,
            peak: float | None, memory: tuple[int | None, int | None]) -> dict:
    t = recipe.train
    median = metrics.run_median(slowest, num_warmup)
    fps = flops_per_sample(recipe)
    per_gpu = t.local_batch_size * t.grad_accum_steps
    samples_per_s = per_gpu * d.world_size / median
    return {
        "median_step_s": median, "world_size": d.world_size,
        "local_batch_size": t.local_batch_size, "grad_accum_steps": t.grad_accum_steps,
        "mfu_pct": None if peak is None else metrics.mfu_pct(fps, per_gpu, median, peak),
        "mfu_numerator_pct_s": None if peak is None else metrics.mfu_numerator_pct_s(fps, peak),
        "flops_per_sample": fps, "peak_flops_per_gpu": peak, "gpu_model": gpu_model,
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * recipe.data.num_video_tokens,
        "peak_allocated_bytes": memory[0], "peak_reserved_bytes": memory[1],
        "torch_version": torch.__version__, "status": "ok",
    }


def main(recipe: Recipe, timeline: dict[str, float] | None = None) -> int:
    """Run one recipe under the measurement contract; returns the exit code.

    Rank 0 prints ``AXBGATE_PROVENANCE``, one ``AXBGATE_STEP`` per step,
    ``AXBGATE_TIMING``, ``AXBGATE_RESULT`` and ``AXBGATE_TIMELINE`` (Unix times of
    the run's phases: process start, imports, process group, model built, first step,
    warmup end, last step; docs/record-contract.md). A
    non-finite loss or gradient norm, or any error, prints a result with
    ``status: failed`` and returns 1.
    """
    timeline = {**(timeline or {}), "main_start_unix": time.time()}
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        # Explicit, so a rank forked from the fork server (torch already imported) uses
        # the run's thread count, not the server's.
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    d = init_distributed(recipe)
    timeline["process_group_ready_unix"] = time.time()
    is_cuda = d.device.type == "cuda"
    gpu_model = torch.cuda.get_device_name(d.device) if is_cuda else None
    peak = metrics.peak_flops_per_gpu(gpu_model)
    if is_cuda and peak is None:
        logger.warning("no dense BF16 peak for %r: mfu_pct will be null", gpu_model)
    hosts: list = [None] * d.world_size
    dist.all_gather_object(hosts, socket.gethostname())
    if d.rank == 0:
        records.emit("AXBGATE_PROVENANCE", records.provenance(
            recipe.model_dump(), hosts, gpu_model, d.world_size if is_cuda else 0,
            d.local_rank if is_cuda else None))
    m, t = recipe.measure, recipe.train
    log = RunLog()
    try:
        model, optimizer = build(recipe, d, timeline)
        timeline["model_built_unix"] = time.time()
        start = 0
        if recipe.checkpoint.resume_dcp:
            start = checkpoint.load_dcp(model, optimizer, recipe.checkpoint.resume_dcp)
            logger.info("rank=%d resumed at step %d", d.rank, start)
        batches = iter(RepeatedBatches(recipe, d.rank, d.device))
        for _ in range(start % recipe.data.num_batches):
            next(batches)
        if is_cuda:
            torch.cuda.reset_peak_memory_stats(d.device)
        num_warmup, num_measured = run_steps(recipe, d, model, optimizer, batches, log, timeline)
        per_rank = gather_step_times(log.step_s, d)
        slowest = metrics.slowest_rank(per_rank)
        memory = _peak_memory(d)
        coverage = semantics.dtype_coverage(model, optimizer, recipe.parallel.master_dtype)
        if d.rank == 0:
            for i, s in enumerate(slowest):
                records.emit("AXBGATE_STEP", {
                    "step": i, "slowest_rank_step_s": s, "rank_step_s": per_rank[0][i],
                    "phase": "warmup" if i < num_warmup else "measured",
                    "loss": log.loss[i], "grad_norm": log.grad_norm[i], "lr": t.lr})
            records.emit_timing({
                "slowest_rank_step_s": slowest, "num_warmup_steps": num_warmup,
                "num_measured_steps": num_measured, "per_rank_step_s": per_rank,
                "warmup_rule": _warmup_rule(recipe)})
            records.emit("AXBGATE_SEMANTICS", semantics.payload(
                recipe, d.world_size, log.loss, log.grad_norm, coverage, log.probe))
            records.emit("AXBGATE_RESULT", _result(recipe, d, slowest, num_warmup, gpu_model, peak,
                                                   memory))
            records.emit("AXBGATE_TIMELINE", {**records.process_times(), **timeline,
                                              "records_done_unix": time.time()})
        if recipe.checkpoint.save_dcp:
            checkpoint.save_dcp(model, optimizer, start + len(log.loss), recipe.checkpoint.save_dcp)
        ck = recipe.checkpoint
        if ck.export_safetensors:
            checkpoint.export_safetensors(model, ck.export_safetensors, dtype=ck.export_dtype,
                                          like=ck.load_safetensors,
                                          max_shard_bytes=int(ck.export_max_shard_gb * 1e9))
        if m.profile_dir:  # after the checkpoints: the profiled steps change the weights
            profile_steps(recipe, d, model, optimizer, batches)
        code = 0
    except Exception as exc:
        logger.exception("rank=%d run failed", d.rank)
        if d.rank == 0:
            records.emit("AXBGATE_RESULT", {
                "median_step_s": None, "world_size": d.world_size,
                "local_batch_size": t.local_batch_size, "grad_accum_steps": t.grad_accum_steps,
                "num_completed_steps": len(log.loss), "status": "failed",
                "error": f"{type(exc).__name__}: {exc}"})
        code = 1
    if code == 0:
        dist.barrier()
    dist.destroy_process_group()
    return code
