"""Megatron-LM's iteration lines, read as a run's step series (``log_format = "megatron"``).

What Megatron-LM prints (``megatron/training/training.py`` ``training_log``, every
``--log-interval`` iterations, newer versions also after the first, from the LAST rank)::

     [2024-04-06 03:02:12] iteration       71/     100 | consumed samples:         9088 |
     elapsed time per iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 |
     learning rate: 1.420000E-05 | global batch size:   128 | lm loss: 1.818812E+00 | ... |
     loss scale: 1.0 | grad norm: 1.300 | number of skipped iterations:   0 |
     number of nan iterations:   0 |

``elapsed time per iteration`` is Megatron's ``interval-time`` timer over the iterations since
the previous line, divided by their number; the timer starts and stops behind a barrier of
all ranks and a ``torch.cuda.synchronize()`` (``megatron/core/timers.py``), so the interval
lasts until the slowest rank finished it. What the log cannot say, and the run is labelled
with (``megatron_interval_mean``): the per-step spread inside an interval (every step gets the
interval's mean, printed to 0.1 ms), and which rank was slowest. The loss is the mean over
the interval's iterations (per step at ``--log-interval 1``), the gradient norm the last
iteration's; skipped iterations (fp16 loss scaling) are in the interval; ``number of nan
iterations`` above 0 fails the run (a NaN loss is not printed at all). Batch facts come from
the argument dump (``micro_batch_size``, ``seq_length``, ``data_parallel_size``) and the
``using world size: N, data-parallel size: D, ...`` line.
"""

from __future__ import annotations

import datetime as dt
import re

from orchestrator.domain.framework_intervals import IntervalLogParser, LogPoint, parse_number

__all__ = ["MegatronLogParser"]

_ITER_RE = re.compile(r"iteration\s+(?P<step>\d+)/\s*(?P<total>\d+) \|")
_FIELD_RE = re.compile(r"\|\s*(?P<key>[^|:]+?):\s*(?P<value>[^|]+?)\s*(?=\|)")
_STAMP_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\] iteration")
_WORLD_RE = re.compile(r"using world size: (?P<world>\d+), data-parallel size: (?P<dp>\d+)")
_ARG_RE = re.compile(r"^\s*(?P<key>micro_batch_size|global_batch_size|seq_length|data_parallel_size"
                     r"|world_size) \.{2,} (?P<value>\d+)\s*$")
_LOSS_KEYS = ("lm loss", "loss")


def _stamp(text: str) -> float | None:
    match = _STAMP_RE.search(text)
    if match is None:
        return None
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in match[1] else "%Y-%m-%d %H:%M:%S"
    return dt.datetime.strptime(match[1], fmt).replace(tzinfo=dt.timezone.utc).timestamp()


class MegatronLogParser(IntervalLogParser):
    """Reads Megatron-LM's ``iteration N/ M | ...`` lines (docs/integrations.md, Megatron-LM)."""

    log_format = "megatron"
    series_label = "megatron_interval_mean"
    notes = ("Megatron-LM prints its interval timer (barrier- and device-synchronised, so it lasts "
             "until the slowest rank is done) averaged over each log interval: the per-step series "
             "is that interval mean, not a per-step maximum over ranks",)

    def _point(self, text: str, line_no: int) -> LogPoint | None:
        if "elapsed time per iteration" not in text:
            return None
        match = _ITER_RE.search(text)
        if match is None:
            return None
        fields = {m["key"].strip(): m["value"] for m in _FIELD_RE.finditer(text + "|")}
        elapsed_ms = parse_number(fields.get("elapsed time per iteration (ms)"))
        if elapsed_ms is None:
            return None
        loss = next((parse_number(fields[k]) for k in _LOSS_KEYS if k in fields), None)
        extra = {"train_iters": int(match["total"])}
        for key, name in (("consumed samples", "consumed_samples"), ("global batch size", "global_batch_size"),
                          ("number of skipped iterations", "skipped"), ("number of nan iterations", "nan"),
                          ("throughput per GPU (TFLOP/s/GPU)", "tflops_per_gpu"),
                          ("learning rate", "lr"), ("loss scale", "loss_scale")):
            if key in fields:
                extra[name] = parse_number(fields[key])
        if isinstance(extra.get("global_batch_size"), float):
            self.facts.setdefault("global_batch_size", int(extra["global_batch_size"]))
        return LogPoint(line_no=line_no, step=int(match["step"]), step_s=elapsed_ms / 1000.0,
                        stamp_s=_stamp(text), loss=loss, grad_norm=parse_number(fields.get("grad norm")),
                        extra=extra)

    def _header(self, text: str) -> None:
        if (match := _WORLD_RE.search(text)) is not None:
            self.facts.setdefault("world_size", int(match["world"]))
            self.facts.setdefault("data_parallel_size", int(match["dp"]))
        elif (match := _ARG_RE.match(text)) is not None:
            self.facts.setdefault(match["key"], int(match["value"]))

    def _non_finite(self, point: LogPoint) -> str | None:
        nan = point.extra.get("nan")
        if nan:
            return (f"Megatron-LM counted {int(nan)} nan iteration(s) in the interval ending at "
                    f"iteration {point.step} (log line {point.line_no}): non-finite loss")
        return super()._non_finite(point)

    def finish(self):
        """See :meth:`IntervalLogParser.finish`; adds batch facts and skipped iterations."""
        facts = self.facts
        micro, dp = facts.get("micro_batch_size"), facts.get("data_parallel_size")
        glob = facts.get("global_batch_size")
        if micro:
            facts["local_batch_size"] = micro
        if micro and dp and glob and glob % (micro * dp) == 0:
            facts["grad_accum_steps"] = glob // (micro * dp)
        if glob:
            facts["samples_per_step"] = glob
            if facts.get("seq_length"):
                facts["tokens_per_step"] = glob * facts["seq_length"]
        parsed = super().finish()
        skipped = sum(int(p.extra.get("skipped") or 0) for p in self.points)
        if skipped:
            parsed.notes.append(f"Megatron-LM skipped {skipped} iteration(s) (loss scaling); they are "
                                "counted in their interval's time")
        return parsed

    def _result(self, per_step: list[float]) -> dict:
        result = super()._result(per_step)
        tflops = [p.extra["tflops_per_gpu"] for p in self.points if p.extra.get("tflops_per_gpu")]
        if tflops:
            result["framework_tflops_per_gpu"] = tflops[-1]
        return result
