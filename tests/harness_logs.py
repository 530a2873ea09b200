"""Logs of every variant of the LTX-2 MFU harness (shared/seed_harness), written from the
formats their print statements produce (key sets, ``json.dumps`` spacing and key order,
``sort_keys`` where the harness sorts), with deterministic numbers.

Each variant is what one harness file prints on rank 0 (the probe: on every rank):

* ``train``: ``benchmark_fastvideo_train.py`` (``BF16_STEP`` + short ``BF16_RESULT``);
  ``train_1x`` adds the ``BF16_PEAK_GIB`` line of ``benchmark_fastvideo_train_1x.py``.
* ``dynamic_world``, ``fsdp_knobs``, ``max_autotune``, ``symm_mem``: the short variants
  with their extra informational lines and result keys.
* ``compile_mode``, ``grad_norm_sync``, ``singleton_timestep``, ``pack_d016`` (and the
  wrappers around it: ``fsdp_buckets``, ``fused_clip``, ``blockskip``, ``lt_pinned``,
  ``raw_velocity``): ``BF16_TIMING`` with the true-wall and internal slowest-rank lists,
  ``BF16_SEMANTICS`` and the full ``BF16_RESULT``.
* ``health``: ``pr1630_realloc1629519_native_health.py`` on 8 ranks (``HEALTH_GATE``).
"""

from __future__ import annotations

import json
import statistics

EXPECTED_STEPS = 30
WARMUP_STEPS = 10
MFU_NUMERATOR = 14.444115
HOST = "gb200-tray17"

SHORT_VARIANTS = ("train", "train_1x", "dynamic_world", "fsdp_knobs", "max_autotune", "symm_mem")
FULL_VARIANTS = ("compile_mode", "grad_norm_sync", "singleton_timestep", "pack_d016",
                 "fsdp_buckets", "fused_clip", "blockskip", "lt_pinned", "raw_velocity")
VARIANTS = SHORT_VARIANTS + FULL_VARIANTS


def rank_times(world: int = 8) -> list[list[float]]:
    """Per-rank internal step seconds (30 steps, the first slow: compile), rank 3 slowest."""
    out = []
    for rank in range(world):
        times = []
        for step in range(EXPECTED_STEPS):
            base = 2.898 if step == 0 else 0.4281 + 0.0007 * ((step * 7) % 5) / 4
            times.append(round(base + 0.0011 * (rank == 3) + 0.0001 * rank * (step % 2), 9))
        out.append(times)
    return out


def wall_times(world: int = 8) -> list[list[float]]:
    """Per-rank true-wall intervals: a little longer than the internal times."""
    return [[round(t + 0.0009 + 0.00003 * (i % 3), 9) for i, t in enumerate(r)]
            for r in rank_times(world)]


def _slowest(per_rank: list[list[float]]) -> list[float]:
    return [max(col) for col in zip(*per_rank, strict=True)]


def _step_lines(rank0: list[float]) -> list[str]:
    # The tracker's step is 1-based (the harness reads metrics_by_step[EXPECTED_STEPS]).
    lines = []
    for i, value in enumerate(rank0, start=1):
        lines.append("BF16_STEP " + json.dumps({"step": i, "step_time_sec": value}))
        lines.append(f"[rank0]: iteration {i} done")
    return lines


def _short(variant: str, world: int) -> list[str]:
    per_rank = rank_times(world)
    median = statistics.median(_slowest(per_rank)[10:30])
    lines = ["+ torchrun --nproc_per_node=%d benchmark_fastvideo_train.py --config ltx2.yaml" % world]
    if variant == "fsdp_knobs":
        lines.append("BF16_FSDP_KNOBS " + json.dumps(
            {"module_count": 49, "pg_alloc": True, "prefetch_depth": 2}, sort_keys=True))
    if variant == "symm_mem":
        lines.append("BF16_SYMM_MEM enabled on 49 modules")
    if variant in ("dynamic_world", "fsdp_knobs"):
        lines.append("BF16_SETUP " + json.dumps({"unused_vae": "unloaded"}))
    lines += _step_lines(per_rank[0])
    if variant in ("train", "train_1x"):
        result = {"median_step_sec": median, "samples_per_second": 4.0 / median,
                  "model_mfu_percent": MFU_NUMERATOR / median}
    elif variant == "dynamic_world":
        result = {"median_step_sec": median, "model_mfu_percent": MFU_NUMERATOR / median,
                  "samples_per_second": world / median, "world_size": world}
    elif variant == "fsdp_knobs":
        result = {"median_step_sec": median, "model_mfu_percent": MFU_NUMERATOR / median,
                  "samples_per_second": world / median, "world_size": world, "pg_alloc": True,
                  "prefetch_depth": 2, "force_sync": False, "force_reshard_after_backward": False,
                  "forced_reshard_calls": 0, "gradient_sync_false_calls": 0,
                  "gradient_sync_true_calls": 30, "peak_allocated_max_rank_bytes": 151234567890,
                  "peak_reserved_max_rank_bytes": 162345678901}
    else:  # max_autotune, symm_mem
        if variant == "max_autotune":
            lines.append("BF16_COMPILE_MODE " + json.dumps(
                {"calls": 48, "mode": "max-autotune-no-cudagraphs"}, sort_keys=True))
        kind = "regional_max_autotune_no_cudagraphs" if variant == "max_autotune" else "fsdp2_symm_mem"
        result = {"kind": kind, "median_step_sec": median, "samples_per_second": 4.0 / median,
                  "model_mfu_percent": MFU_NUMERATOR / median}
    lines.append("BF16_RESULT " + json.dumps(result, sort_keys=True))
    if variant == "train_1x":
        lines.append("BF16_PEAK_GIB 71.234567")
    return lines


def _semantics(variant: str, world: int, rank0: list[float]) -> dict:
    if variant == "grad_norm_sync":
        records = [{"step": i, "key": "grad_norm/student", "value": 1.0 / i, "after_optimizer": True}
                   for i in range(1, EXPECTED_STEPS + 1)]
        return {"defer_grad_norm_materialization": True, "source_deferred_grad_norm": False,
                "by_rank": [{"rank": r, "counts": {"clip_calls": 30}, "grad_norm_digest": "ab" * 32,
                             "first_grad_norm": records[0], "last_grad_norm": records[-1]}
                            for r in range(world)],
                "rank0_grad_norm_series": records}
    series = {str(i): {"finetune_loss": 0.5 / i, "grad_norm/student": 1.0 / i, "step_time_sec": t,
                       "total_loss": 0.5 / i} for i, t in enumerate(rank0, start=1)}
    probe = {"step": 10, "parameters": {"adaln_single.linear.weight": {
        "present": True, "shape": [4096, 24576], "dtype": "torch.float32", "numel": 100663296,
        "finite": True, "l2_norm": 0.25, "max_abs": 0.001, "mean": 1e-7, "sha256": "cd" * 32}}}
    return {"singleton_timestep": variant == "singleton_timestep", "gradient_probe_step": 10,
            "by_rank": [{"rank": r, "counts": {"semantic_token_count_4290": 30},
                         "metric_series_digest": "ef" * 32,
                         "peak_memory": {"allocated_bytes": 151234567890, "reserved_bytes": 162345678901},
                         "ada_grad_probe": probe, "optimizer_probe": {"class": "torch.optim.adamw.AdamW"},
                         "first_metrics": series["1"], "last_metrics": series["30"]}
                        for r in range(world)],
            "rank0_metric_series": series}


def _full_result(variant: str, world: int, internal: list[float], wall: list[float]) -> dict:
    batch = 2 if variant in ("pack_d016", "fsdp_buckets", "fused_clip", "blockskip", "lt_pinned") else 1
    accum = 1
    internal_median = statistics.median(internal[10:])
    wall_median = statistics.median(wall[10:])
    scale = MFU_NUMERATOR * (batch * accum if variant != "compile_mode" and variant != "grad_norm_sync" else 1)
    result = {"world_size": world, "internal_median_step_sec": internal_median,
              "internal_model_mfu_percent": scale / internal_median,
              "true_wall_median_step_sec": wall_median,
              "true_wall_model_mfu_percent": scale / wall_median,
              "true_wall_sum_slowest_intervals_sec": sum(wall[10:]),
              "true_wall_mean_slowest_interval_sec": statistics.mean(wall[10:]),
              "true_measured_window_max_rank_sec": sum(wall[10:]) + 0.01,
              "true_end_to_end_max_rank_sec": sum(wall) + 0.01,
              "samples_per_second_from_true_wall_median": world * batch / wall_median}
    if variant == "compile_mode":
        result.update(compile_mode="max-autotune-no-cudagraphs", singleton_timestep=False)
    elif variant == "grad_norm_sync":
        result.update(defer_grad_norm_materialization=True, source_deferred_grad_norm=False)
    else:
        result.update(singleton_timestep=variant in ("singleton_timestep", "raw_velocity"),
                      local_batch_size=batch)
        if variant not in ("singleton_timestep", "raw_velocity"):
            result["gradient_accumulation_steps"] = accum
    if variant != "grad_norm_sync":
        result.update(peak_allocated_max_rank_bytes=151234567890,
                      peak_reserved_max_rank_bytes=162345678901)
    return result


def _full(variant: str, world: int) -> list[str]:
    per_rank = rank_times(world)
    internal, wall = _slowest(per_rank), _slowest(wall_times(world))
    lines = [f"+ srun --ntasks={world} python benchmark_fastvideo_train_{variant}.py --config ltx2.yaml"]
    if variant == "lt_pinned":
        lines.append("LT_PIN_TUNE to_q torch_ms=1.2345 best_lt_ms=1.1000 algo=17")
        lines.append("LT_PIN_INSTALLED modules=192")
    if variant == "fsdp_buckets":
        lines.append("BF16_BUCKET_PLAN " + json.dumps({
            "mode": 2, "block_count": 48, "blocks_per_group": 2, "block_communication_groups": 24,
            "communication_group_count": 25, "decorated_block_modules": 48,
            "public_fully_shard_list_api": True, "total_parameter_numel": 19000000000,
            "root_straggler_numel": 12345, "grouped_block_numel_min": 700000000,
            "grouped_block_numel_max": 800000000, "original_parameter_dtypes": ["torch.float32"],
            "working_parameter_dtype": "torch.bfloat16", "reduction_dtype": "torch.float32",
            "initial_reshard_after_forward": True, "cpu_offload": False}, sort_keys=True))
    if variant == "blockskip":
        lines.append("BLOCK_SKIP_APPLIED n=2 wrapped_blocks=24")
    lines.append("BF16_SETUP " + json.dumps({"unused_vae": "unloaded"}))
    lines += _step_lines(per_rank[0])
    lines.append("BF16_TIMING " + json.dumps({"internal_slowest_rank_sec": internal,
                                              "true_wall_slowest_rank_sec": wall,
                                              "final_cuda_sync": True}, sort_keys=True))
    lines.append("BF16_SEMANTICS " + json.dumps(_semantics(variant, world, per_rank[0]), sort_keys=True))
    lines.append("BF16_RESULT " + json.dumps(_full_result(variant, world, internal, wall), sort_keys=True))
    if variant == "fused_clip":
        lines.append("FUSED_CLIP_COUNTS " + json.dumps({"per_rank_steps": 30, "totals": {"fused_clips": 240},
                                                        "world_size": world}, sort_keys=True))
    if variant == "raw_velocity":
        lines.append("BF16_VARIANT " + json.dumps({"raw_velocity": True, "singleton_timestep": True,
                                                   "to_denoised_bypass_calls_by_rank": [30] * world},
                                                  sort_keys=True))
    return lines


def variant_log(variant: str, world: int = 8) -> str:
    """The log text of one harness variant (rank 0's output plus launcher noise)."""
    if variant == "train_1x":
        world = 1
    lines = _short(variant, world) if variant in SHORT_VARIANTS else _full(variant, world)
    return "\n".join(lines) + "\n"


def expected(variant: str, world: int = 8) -> dict:
    """What the parser must find: the slowest-rank (or rank-0) series and the medians."""
    if variant == "train_1x":
        world = 1
    per_rank = rank_times(world)
    if variant in SHORT_VARIANTS:
        return {"series": per_rank[0], "source": "rank0" if world > 1 else "slowest_rank",
                "log_median": statistics.median(_slowest(per_rank)[10:30])}
    wall = _slowest(wall_times(world))
    return {"series": wall, "source": "slowest_rank", "internal": _slowest(per_rank),
            "log_median": statistics.median(wall[10:])}


def health_log(world: int = 8, busbw_gbps: float = 463.2, scalar_sum: float | None = None) -> str:
    """What the native health probe prints on every rank (two nodes of ``world // 2``)."""
    lines = []
    total = world * (world + 1) / 2 if scalar_sum is None else scalar_sum
    for rank in range(world):
        host = f"gb200-tray{17 + rank // max(1, world // 2)}"
        lines.append("HEALTH_GATE " + json.dumps({"phase": "scalar", "rank": rank, "local_rank": rank % 4,
                                                  "world_size": world, "sum": total, "host": host},
                                                 sort_keys=True))
    for rank in range(world):
        host = f"gb200-tray{17 + rank // max(1, world // 2)}"
        mean = 0.93 + 0.001 * rank
        lines.append("HEALTH_GATE " + json.dumps({
            "phase": "sustained_all_reduce", "rank": rank, "local_rank": rank % 4, "host": host,
            "iterations": 128, "payload_bytes": 268435456, "mean_ms": mean, "p50_ms": mean - 0.001,
            "p95_ms": mean + 0.01, "max_ms": mean + 0.02, "slowest_rank_mean_ms": 0.937,
            "slowest_rank_bus_gbps": busbw_gbps, "value": 1.0}, sort_keys=True))
    return "\n".join(lines) + "\n"
