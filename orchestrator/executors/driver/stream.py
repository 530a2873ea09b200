"""A run's output, parsed once while it streams (the only parse of a run log)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["StepStream"]


class StepStream:
    """Feeds a run's output lines to the record parser and appends every step record to
    the run's step stream as one JSON line (the poller's live view of the run)."""

    def __init__(self, path: Path) -> None:
        from orchestrator.domain.records import RecordParser

        self.parser = RecordParser()
        self.out = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.failure: str | None = None

    def __call__(self, line: str) -> None:
        if self.failure is not None:
            return
        from orchestrator.domain.records import step_row

        try:
            step = self.parser.feed(line)
        except Exception as exc:  # a record the parser cannot survive fails the run only
            self.failure = f"record output unreadable at line {self.parser._line_no}: {exc!r}"
            return
        if step is not None:
            self.out.write(json.dumps(step_row(step), allow_nan=True) + "\n")
            self.out.flush()

    def close(self) -> None:
        self.out.close()
