"""``StepTimer``: time a training loop under the gate's measurement rule and print the
record contract (docs/record-contract.md) from rank 0.

Usage (any loop; torchrun, ``srun`` per rank or one process)::

    from axbgate_record import StepTimer

    with StepTimer(local_batch_size=8, tokens_per_sample=2048) as timer:
        while not timer.done():
            loss, grad_norm = train_step(next(batches))
            timer.step(loss=loss, grad_norm=grad_norm)

Each step's interval runs from the end of the previous step (the first from
:meth:`StepTimer.start` or construction) to :meth:`StepTimer.step`, which first waits for
the device (``torch.cuda.synchronize()`` when torch has initialised CUDA), so the interval
holds the step's queued work and the next batch fetch: wall clock from one fetch to the
next, DESIGN.md section 2. The slowest rank per step is taken from every rank's list,
gathered once after the last step (``reduce="gather"``, the default), or agreed after every
step with one float64 MAX all-reduce (``reduce="allreduce"``); either way a steady warmup or
a time window is decided on the all-reduced times while it is being decided, so every rank
stops at the same step. A collective's own time is kept out of the next step's interval.
``benchmarks/record_helper_overhead.py`` measures what each mode costs.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from axbgate_record.dist import Ranks, device_sync
from axbgate_record.emit import emit, emit_timing
from axbgate_record.rule import MeasureRule

__all__ = ["StepTimer"]

_MAX_SERIES = 10_000
"""Most loss/grad-norm values in one semantics record (the trainer's bound: < 1 MiB)."""
_ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "PYTORCH_", "OMP_NUM_THREADS", "SLURM_JOB_ID",
                 "SLURM_NTASKS", "WORLD_SIZE", "AXBGATE_WARMUP", "AXBGATE_MEASURED")


def _number(value: Any) -> float | None:
    """A loss or gradient norm as a float (a 0-dim tensor is read with ``float()``)."""
    return None if value is None else float(value)


def _peak_memory() -> tuple[int | None, int | None]:
    torch = sys.modules.get("torch")
    if torch is None or not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None, None
    return int(torch.cuda.max_memory_allocated()), int(torch.cuda.max_memory_reserved())


class StepTimer:
    """Per-step slowest-rank timing under the gate's warmup/measurement rule.

    Args:
        local_batch_size: Samples per rank per micro-step (``AXBGATE_RESULT``).
        grad_accum_steps: Micro-steps per optimizer step.
        tokens_per_sample: Tokens per sample, for ``tokens_per_s`` and the semantics
            record's ``tokens_per_step`` (None: not reported).
        reduce: ``"gather"`` (every rank's list once, after the last step) or
            ``"allreduce"`` (one scalar MAX all-reduce after every step).
        sync: Called before each interval is closed; ``"auto"`` waits for CUDA when torch
            has initialised it; None never waits (the caller's step already syncs).
        rule: The measurement rule; None reads it from the environment the driver sets
            (``AXBGATE_WARMUP_MODE``, ...), and outside a gate uses the DESIGN default of
            10 warmup + 20 measured steps.
        noop_outside_gate: Outside a gate (no ``AXBGATE_WARMUP_MODE``), do nothing: no
            records, ``done()`` stays False, so the loop runs as it would without the timer.
        stream: Where rank 0 prints the records (stdout).
        environ: The environment to read (``os.environ``).
        clock: Monotonic clock, seconds.

    Raises:
        ValueError: A bad batch size, ``reduce`` mode or ``AXBGATE_*`` value (named).
    """

    def __init__(self, *, local_batch_size: int = 1, grad_accum_steps: int = 1,
                 tokens_per_sample: int | None = None, reduce: str = "gather",
                 sync: Callable[[], None] | str | None = "auto", rule: MeasureRule | None = None,
                 noop_outside_gate: bool = False, stream: TextIO | None = None,
                 environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if reduce not in ("gather", "allreduce"):
            raise ValueError(f"reduce={reduce!r} must be 'gather' or 'allreduce'")
        for name, value in (("local_batch_size", local_batch_size), ("grad_accum_steps", grad_accum_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be an integer >= 1")
        self._environ = os.environ if environ is None else environ
        gate_rule = MeasureRule.from_env(self._environ)
        self.gated = gate_rule is not None
        """True when the driver set the rule (this run belongs to a gate)."""
        self.active = rule is not None or self.gated or not noop_outside_gate
        self.rule = rule or gate_rule or MeasureRule()
        self.local_batch_size, self.grad_accum_steps = local_batch_size, grad_accum_steps
        self.tokens_per_sample = tokens_per_sample
        self.reduce = reduce
        self._sync = device_sync if sync == "auto" else (sync or (lambda: None))
        self._stream, self._clock = stream, clock
        self._ranks: Ranks | None = None
        self.step_s: list[float] = []
        """This rank's step seconds."""
        self._agreed_s: list[float] = []
        self._loss: list[float | None] = []
        self._grad_norm: list[float | None] = []
        self.num_warmup_steps: int | None = self.rule.warmup_steps if self.rule.warmup_mode == "fixed" else None
        """Warmup steps, once decided."""
        self.total_steps: int | None = self.rule.total_steps if self.rule.fixed else None
        """Steps of this run, once decided."""
        self._finished = False
        self._last = clock()
        self._decide()

    # ---- the loop -------------------------------------------------------------------
    def start(self) -> None:
        """Start the first interval now (e.g. after the model is built)."""
        self._last = self._clock()

    def _comm(self) -> Ranks:
        if self._ranks is None:
            self._ranks = Ranks(self._environ)
        return self._ranks

    def _decide(self) -> None:
        """Settle the warmup end and the window from the agreed times so far."""
        done = len(self.step_s)
        if self.num_warmup_steps is None and self.rule.warmup_over(done, self._agreed_s[:done]):
            self.num_warmup_steps = done
        if self.total_steps is None and self.num_warmup_steps is not None and done >= self.num_warmup_steps:
            warm = self._agreed_s[:self.num_warmup_steps]
            self.total_steps = self.num_warmup_steps + self.rule.window_steps(warm)

    def step(self, *, loss: Any = None, grad_norm: Any = None) -> None:
        """Close this step's interval (device sync first) and record it.

        Args:
            loss: This step's loss (a number or 0-dim tensor; rank 0's goes into the
                semantics record: pass the rank-mean loss to compare runs).
            grad_norm: This step's global gradient norm.

        Raises:
            RuntimeError: Called after :meth:`finish`.
        """
        if not self.active:
            return
        if self._finished:
            raise RuntimeError("StepTimer.step() after finish()")
        comm = self._comm()
        self._sync()
        now = self._clock()
        interval = now - self._last
        self.step_s.append(interval)
        if self.reduce == "allreduce" or self.total_steps is None:
            self._agreed_s.append(comm.max(interval))
            now = self._clock()  # the collective is not the next step's time
        self._last = now
        self._loss.append(_number(loss))
        self._grad_norm.append(_number(grad_norm))
        if self.total_steps is None:
            self._decide()

    def record(self, step: int, *, loss: Any = None, grad_norm: Any = None) -> None:
        """Attach a loss / gradient norm to an already timed step (0-based), for loops that
        learn them after the step closed (the HF ``on_log`` event comes after ``on_step_end``)."""
        if not self.active or not 0 <= step < len(self.step_s):
            return
        if loss is not None:
            self._loss[step] = _number(loss)
        if grad_norm is not None:
            self._grad_norm[step] = _number(grad_norm)

    def done(self) -> bool:
        """True once the run has taken every step the rule asks for (never when inactive)."""
        return self.active and self.total_steps is not None and len(self.step_s) >= self.total_steps

    # ---- the end --------------------------------------------------------------------
    def _is_rank0(self) -> bool:
        if self._ranks is not None:
            return self._ranks.rank == 0
        # before the first step (a failure while building): the launcher's rank
        return (self._environ.get("RANK") or self._environ.get("SLURM_PROCID") or "0") == "0"

    def _emit(self, prefix: str, payload: dict[str, Any]) -> None:
        if self._is_rank0():
            if prefix == "AXBGATE_TIMING":
                emit_timing(payload, self._stream)
            else:
                emit(prefix, payload, self._stream)

    def fail(self, error: BaseException | str) -> None:
        """Print a failed ``AXBGATE_RESULT`` (rank 0): the run is failed, not measured."""
        if not self.active or self._finished:
            return
        self._finished = True
        world = self._ranks.world_size if self._ranks else 1
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self._emit("AXBGATE_RESULT", {
            "median_step_s": None, "world_size": world, "local_batch_size": self.local_batch_size,
            "grad_accum_steps": self.grad_accum_steps, "num_completed_steps": len(self.step_s),
            "status": "failed", "error": message[:2000]})

    def finish(self) -> dict[str, Any] | None:
        """Gather every rank's times (one collective) and print the records from rank 0.

        Call on every rank after the loop. Steps past the rule's count are not measured.

        Returns:
            ``{"median_step_s", "num_warmup_steps", "num_measured_steps",
            "slowest_rank_step_s"}`` on every rank, or None when inactive, already
            finished, or the run failed (a failed result was printed: too few steps, or
            ranks that ran different step counts).
        """
        if not self.active or self._finished:
            return None
        comm = self._comm()
        peak = _peak_memory()
        facts = comm.gather({"step_s": self.step_s, "peak": peak, "host": comm.host()})
        lengths = sorted({len(f["step_s"]) for f in facts})
        total, warmup = self.total_steps, self.num_warmup_steps
        if len(lengths) > 1:
            self.fail(f"ranks ran different step counts: {lengths}")
            return None
        if total is None or warmup is None or lengths[0] < total:
            self.fail(f"the loop ended after {lengths[0]} steps; the gate's rule asks for "
                      f"{total if total is not None else 'more'} (loop while not timer.done())")
            return None
        self._finished = True
        per_rank = [f["step_s"][:total] for f in facts]
        slowest = [max(col) for col in zip(*per_rank)]
        median = statistics.median(slowest[warmup:])
        self._print(per_rank, slowest, warmup, total, median, facts)
        return {"median_step_s": median, "num_warmup_steps": warmup,
                "num_measured_steps": total - warmup, "slowest_rank_step_s": slowest}

    def _print(self, per_rank: list[list[float]], slowest: list[float], warmup: int, total: int,
               median: float, facts: list[dict[str, Any]]) -> None:
        world = len(per_rank)
        self._emit("AXBGATE_PROVENANCE", self._provenance(facts))
        for i, seconds in enumerate(slowest):
            record: dict[str, Any] = {"step": i, "slowest_rank_step_s": seconds,
                                      "rank_step_s": per_rank[0][i],
                                      "phase": "warmup" if i < warmup else "measured"}
            for key, series in (("loss", self._loss), ("grad_norm", self._grad_norm)):
                if series[i] is not None:
                    record[key] = series[i]
            self._emit("AXBGATE_STEP", record)
        self._emit("AXBGATE_TIMING", {
            "slowest_rank_step_s": slowest, "num_warmup_steps": warmup,
            "num_measured_steps": total - warmup, "per_rank_step_s": per_rank,
            "warmup_rule": self.rule.timing_rule(), "reduce": self.reduce})
        self._emit("AXBGATE_SEMANTICS", self._semantics(world, total))
        samples_per_s = self.local_batch_size * self.grad_accum_steps * world / median
        peaks = [f["peak"] for f in facts]
        self._emit("AXBGATE_RESULT", {
            "median_step_s": median, "world_size": world, "local_batch_size": self.local_batch_size,
            "grad_accum_steps": self.grad_accum_steps, "samples_per_s": samples_per_s,
            "tokens_per_s": None if self.tokens_per_sample is None else samples_per_s * self.tokens_per_sample,
            "peak_allocated_bytes": max((p[0] for p in peaks if p[0] is not None), default=None),
            "peak_reserved_bytes": max((p[1] for p in peaks if p[1] is not None), default=None),
            "status": "ok"})

    def _semantics(self, world: int, total: int) -> dict[str, Any]:
        samples = self.local_batch_size * self.grad_accum_steps * world
        out: dict[str, Any] = {"local_batch_size": self.local_batch_size,
                               "grad_accum_steps": self.grad_accum_steps, "world_size": world,
                               "global_batch_size": samples, "samples_per_step": samples}
        if self.tokens_per_sample:
            out["tokens_per_step"] = samples * self.tokens_per_sample
        first = max(0, total - _MAX_SERIES)
        for key, series in (("loss", self._loss[:total]), ("grad_norm", self._grad_norm[:total])):
            if all(v is not None for v in series):  # a series with gaps is not compared
                out[key] = series[first:]
        out["series_first_step"] = first
        return out

    def _provenance(self, facts: list[dict[str, Any]]) -> dict[str, Any]:
        torch = sys.modules.get("torch")
        masked = set(filter(None, self._environ.get("AXBGATE_MASKED_ENV", "").split(",")))
        env = {k: "***" if k in masked else v for k, v in sorted(self._environ.items())
               if k.startswith(_ENV_PREFIXES)}
        out: dict[str, Any] = {"hostnames": list(dict.fromkeys(f["host"] for f in facts)),
                               "python_version": platform.python_version(), "command": list(sys.argv),
                               "env": env, "record_helper": "axbgate_record"}
        if torch is not None:
            out["torch_version"] = torch.__version__
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                out["gpu_model"] = torch.cuda.get_device_name()
                out["cuda_version"] = torch.version.cuda
        return out

    # ---- context manager ------------------------------------------------------------
    def __enter__(self) -> StepTimer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None:
            self.fail(exc)
        else:
            self.finish()

    @property
    def num_steps(self) -> int:
        """Steps timed so far."""
        return len(self.step_s)
