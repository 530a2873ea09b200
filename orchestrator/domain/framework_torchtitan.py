"""torchtitan's metric lines, read as a run's step series (``log_format = "torchtitan"``).

What torchtitan prints (``torchtitan/components/metrics.py`` ``MetricsProcessor.log``, every
``--metrics.log_freq`` steps and at step 1, from the ranks in ``LOG_RANK``, rank 0 by
default; coloured unless ``--metrics.disable_color_printing``)::

    [rank0]:[titan] 2026-05-20 02:22:58,212 - root - INFO - step:  2  loss: 10.60813
        grad_norm: 49.2500  memory: 169.10GiB(94.81%)  tps: 9,891  tflops: 833.38  mfu: 37.04%

``tps`` is the printing rank's tokens since its previous line / (seconds since then x the
non-data-parallel degree pp x cp x tp). The step time of the interval is therefore
``tokens per step per rank / (tps x pp x cp x tp)``, with the tokens per step from the
trainer's start line (``Trainer is initialized with local batch size B, global batch size G,
gradient accumulation steps A, sequence length S`` -> B x S x A; newer versions:
``N tokens per DP rank, M tokens per train step, gradient accumulation steps A`` -> N x A;
older: ``Training starts at step 1, with local batch size B, ... sequence length S``) and the
degrees from ``Building device mesh with parallelism: pp=.., dp_replicate=.., dp_shard=..,
cp=.., tp=..``. Without a batch line the interval is timed from the lines' own timestamps
(millisecond resolution). Older logs print ``wps`` for ``tps``.

What the log cannot say, and the run is labelled with (``torchtitan_rank0_interval_mean``):
the time is the printing rank's, not the slowest rank's (an interval that ends in a
collective waits for the slowest rank, but a slower rank is not seen directly), and every
step of an interval gets the interval's mean. The interval ends after ``grad_norm.item()``,
a device synchronisation. ``memory`` is the printing rank's peak reserved memory over the
interval; ``mfu`` uses torchtitan's own FLOP count and peak table (kept as
``framework_mfu_pct``, not as the DESIGN.md MFU).
"""

from __future__ import annotations

import datetime as dt
import re

from orchestrator.domain.errors import RecordError
from orchestrator.domain.framework_intervals import IntervalLogParser, LogPoint, parse_number
from orchestrator.domain.record_types import StepRecord

__all__ = ["TorchtitanLogParser"]

_STEP_RE = re.compile(
    r"INFO - step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)"
    r"(?:\s+grad_norm:\s*(?P<grad_norm>\S+))?"
    r"(?:\s+memory:\s*(?P<mem>[\d.]+)GiB\((?P<mem_pct>[\d.]+)%\))?"
    r"\s+(?P<rate_key>tps|wps):\s*(?P<rate>[\d,]+)"
    r"(?:\s+tflops:\s*(?P<tflops>[\d,.]+))?"
    r"(?:\s+mfu:\s*(?P<mfu>[\d.]+)%)?")
_STAMP_RE = re.compile(r"\[titan\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")
_BATCH_RE = re.compile(r"local batch size (?P<local>\d+), global batch size (?P<global>\d+)"
                       r"(?:, gradient accumulation steps (?P<accum>\d+))?, sequence length (?P<seq>\d+)")
_TOKENS_RE = re.compile(r"(?P<rank_tokens>\d+) tokens per DP rank, (?P<step_tokens>\d+) tokens per "
                        r"train step, gradient accumulation steps (?P<accum>\d+)")
_MESH_RE = re.compile(r"Building device mesh with parallelism: (?P<dims>(?:\w+=-?\d+(?:, )?)+)")
_START_RE = re.compile(r"Training starts at step (?P<step>\d+)")
_GIB = 2**30


def _stamp(text: str) -> float | None:
    match = _STAMP_RE.search(text)
    if match is None:
        return None
    when = dt.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f")
    return when.replace(tzinfo=dt.timezone.utc).timestamp()  # differences only


class TorchtitanLogParser(IntervalLogParser):
    """Reads torchtitan's metric lines (docs/integrations.md, torchtitan)."""

    log_format = "torchtitan"
    series_label = "torchtitan_rank0_interval_mean"
    notes = ("torchtitan prints the printing rank's (LOG_RANK, rank 0 by default) tokens per "
             "second over each log interval: the per-step series is that rank's interval mean "
             "(tokens per step / tps), not the slowest rank's per-step time",)

    def _point(self, text: str, line_no: int) -> LogPoint | None:
        if "step:" not in text:
            return None
        match = _STEP_RE.search(text)
        if match is None:
            return None
        rate = parse_number(match["rate"])
        if not rate or rate <= 0:
            raise RecordError(line_no, f"torchtitan step {match['step']}: {match['rate_key']} "
                                       f"{match['rate']} is not a positive rate")
        extra = {"rate_key": match["rate_key"]}
        for key, name in (("mem", "memory_gib"), ("mem_pct", "memory_pct"), ("tflops", "tflops"),
                          ("mfu", "mfu_pct")):
            if match[key] is not None:
                extra[name] = parse_number(match[key])
        return LogPoint(line_no=line_no, step=int(match["step"]), rate=rate, stamp_s=_stamp(text),
                        loss=parse_number(match["loss"]), grad_norm=parse_number(match["grad_norm"]), extra=extra)

    def _header(self, text: str) -> None:
        facts = self.facts
        if (match := _BATCH_RE.search(text)) is not None:
            accum = int(match["accum"] or 1)
            facts.update(local_batch_size=int(match["local"]), global_batch_size=int(match["global"]),
                         grad_accum_steps=accum, seq_len=int(match["seq"]),
                         tokens_per_rank_step=int(match["local"]) * int(match["seq"]) * accum,
                         samples_per_step=int(match["global"]),
                         tokens_per_step=int(match["global"]) * int(match["seq"]))
        elif (match := _TOKENS_RE.search(text)) is not None:
            accum = int(match["accum"])
            facts.update(grad_accum_steps=accum, tokens_per_rank_step=int(match["rank_tokens"]) * accum,
                         tokens_per_step=int(match["step_tokens"]))
        elif (match := _MESH_RE.search(text)) is not None:
            dims = {k: int(v) for k, v in (d.split("=") for d in match["dims"].split(", "))}
            facts["parallel_dims"] = dims
            facts["non_dp_degree"] = dims.get("pp", 1) * dims.get("cp", 1) * dims.get("tp", 1)
            if all(v > 0 for v in dims.values()):
                facts["world_size"] = (dims.get("pp", 1) * dims.get("dp_replicate", 1)
                                       * dims.get("dp_shard", 1) * dims.get("cp", 1) * dims.get("tp", 1))
        elif (match := _START_RE.search(text)) is not None and not self.points:
            facts["start_step"] = int(match["step"])
            facts["start_stamp_s"] = _stamp(text)

    def _resolve(self, index: int) -> float:
        point = self.points[index]
        tokens = self.facts.get("tokens_per_rank_step")
        if tokens:
            return tokens / (point.rate * self.facts.get("non_dp_degree", 1))
        previous = self.points[index - 1].stamp_s if index else self.facts.get("start_stamp_s")
        begin = self.points[index - 1].step if index else (self._start or 0)
        if previous is None or point.stamp_s is None:
            raise RecordError(point.line_no, (
                "torchtitan: the log has no batch line ('Trainer is initialized with local batch "
                "size ..., sequence length ...' or '... tokens per DP rank ...') to turn tps into "
                "seconds, and no timestamps to time the interval; keep torchtitan's start lines in "
                "the log"))
        if "timestamps" not in self.facts:
            self.facts["timestamps"] = True
        return (point.stamp_s - previous) / (point.step - begin)

    def _record(self, point: LogPoint, index: int, seconds: float, phase: str, last: bool) -> StepRecord:
        # the printing rank's own time: the rank column, never the slowest-rank one
        return StepRecord(point.line_no, index, None, seconds, point.loss if last else None,
                          point.grad_norm if last else None, phase)

    def finish(self):
        """See :meth:`IntervalLogParser.finish`; adds how the step time was derived."""
        parsed = super().finish()
        if self.facts.get("timestamps"):
            parsed.notes.append("no batch line in the log: step times come from the lines' "
                                "timestamps (1 ms resolution), so they include logging time")
        return parsed

    def _result(self, per_step: list[float]) -> dict:
        result = super()._result(per_step)
        memory = [p.extra["memory_gib"] for p in self.points if p.extra.get("memory_gib") is not None]
        if memory:  # rank 0's peak reserved memory; printed with 2 decimals of GiB
            result["peak_reserved_bytes"] = round(max(memory) * _GIB)
            result["peak_memory_rank"] = "printing rank (LOG_RANK)"
        mfu = [p.extra["mfu_pct"] for p in self.points if p.extra.get("mfu_pct") is not None]
        if mfu:
            result["framework_mfu_pct"] = mfu[-1]
        result["parallel_dims"] = self.facts.get("parallel_dims")
        return result
