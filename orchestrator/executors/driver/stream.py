"""A run's output, parsed once while it streams (the only parse of a run log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["StepStream", "measure_stream", "run_log_parser"]


def run_log_parser(plan):
    """How a run's output is read: the record contract, or the workload's framework log
    (``workload.log_format``; the run log's first line is the driver's header)."""
    from orchestrator.domain.framework_logs import log_parser

    return log_parser(plan.workload.get("log_format") or "record", first_line_no=2,
                      warmup_steps=plan.num_warmup_steps, world_size=plan.nodes * plan.ranks_per_node)


class StepStream:
    """Feeds a run's output lines to the record parser and appends every step record to
    the run's step stream as one JSON line (the poller's live view of the run).

    Args:
        path: The run's step stream (``runs/NN-R.steps.jsonl``).
        log_name: The run log as errors name it (``runs/NN-R.log``).
        parser: How the output is read (``domain.framework_logs.log_parser``: the record
            contract, or a framework adapter); None: the record contract.
    """

    def __init__(self, path: Path, log_name: str = "the run log", parser=None) -> None:
        from orchestrator.domain.records import RecordParser

        # The run log's first line is the driver's "# axbgate step:" header, not output.
        self.parser = parser if parser is not None else RecordParser(first_line_no=2)
        self.out = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.log_name = log_name
        self.failure: str | None = None

    def __call__(self, line: bytes) -> None:
        if self.failure is not None:
            return

        try:
            step = self.parser.feed(line)
        except Exception as exc:  # a record the parser cannot survive fails the run only
            self.failure = f"record output unreadable at line {self.parser.line_no}: {exc!r}"
            return
        if step is not None:  # an adapter's line may close several steps of an interval
            self._write(step if isinstance(step, list) else [step])

    def _write(self, steps: list) -> None:
        from orchestrator.domain.records import step_row

        for step in steps:
            self.out.write(json.dumps(step_row(step), allow_nan=True) + "\n")
        self.out.flush()

    def close(self) -> None:
        drain = getattr(self.parser, "drain", None)
        if drain is not None and self.failure is None:
            self._write(drain())  # an adapter's steps not known before the end
        self.out.close()


def measure_stream(plan, stream: StepStream, step_error: str | None) -> tuple[dict[str, Any], str | None]:
    """The run's measured outcome from its parsed output (the one parse of the log).

    Args:
        plan: The gate's :class:`~orchestrator.executors.plan.GatePlan` (warmup rules).
        stream: The run's finished stream.
        step_error: How the step ended, if it failed.

    Returns:
        (outcome dict for ``NN-R.json``, the run's error or None).
    """
    from orchestrator.domain.errors import RecordError
    from orchestrator.domain.measure import measure_run

    if stream.failure is not None:
        return {}, step_error or stream.failure
    try:
        parsed = stream.parser.finish()
    except RecordError as exc:
        return {}, step_error or f"malformed record output in {stream.log_name}: {exc}"
    steady, window = plan.warmup_mode == "steady", plan.measured_seconds is not None
    outcome = measure_run(
        parsed,
        expected_warmup_steps=None if steady else plan.num_warmup_steps,
        expected_measured_steps=None if (steady or window) else plan.num_measured_steps,
        warmup_bounds=(plan.num_warmup_steps, plan.max_warmup_steps) if steady else None,
        min_measured_steps=plan.num_measured_steps if (steady or window) else None,
        require_slowest_rank=True,
    )
    error = step_error or outcome.error
    return {"status": outcome.status, "error": outcome.error, "fields": outcome.fields,
            "log_median_step_s": outcome.log_median_step_s,
            "median_mismatch": outcome.median_mismatch}, error
