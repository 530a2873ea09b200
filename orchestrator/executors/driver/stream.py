"""A run's output, parsed once while it streams (the only parse of a run log)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["StepStream"]


class StepStream:
    """Feeds a run's output lines to the record parser and appends every step record to
    the run's step stream as one JSON line (the poller's live view of the run).

    Args:
        path: The run's step stream (``runs/NN-R.steps.jsonl``).
        log_name: The run log as errors name it (``runs/NN-R.log``).
    """

    def __init__(self, path: Path, log_name: str = "the run log") -> None:
        from orchestrator.domain.records import RecordParser

        # The run log's first line is the driver's "# axbgate step:" header, not output.
        self.parser = RecordParser(first_line_no=2)
        self.out = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.log_name = log_name
        self.failure: str | None = None

    def __call__(self, line: bytes) -> None:
        if self.failure is not None:
            return
        from orchestrator.domain.records import step_row

        try:
            step = self.parser.feed(line)
        except Exception as exc:  # a record the parser cannot survive fails the run only
            self.failure = f"record output unreadable at line {self.parser.line_no}: {exc!r}"
            return
        if step is not None:
            self.out.write(json.dumps(step_row(step), allow_nan=True) + "\n")
            self.out.flush()

    def close(self) -> None:
        self.out.close()
