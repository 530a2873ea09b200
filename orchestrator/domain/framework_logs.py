"""Framework log adapters: gate a torchtitan or Megatron-LM job with no code change (pure).

``workload.log_format`` names how a run's output is read: ``record`` (the record contract,
docs/record-contract.md; the default, also what the HF/Lightning callbacks print),
``torchtitan`` or ``megatron`` (their own periodic metric lines, docs/integrations.md).
:func:`log_parser` builds the parser the driver streams a run through and the importer
reads a file with; every kind answers ``feed``/``feed_lines``/``finish`` like
:class:`~orchestrator.domain.records.RecordParser`.
"""

from __future__ import annotations

from orchestrator.domain.framework_intervals import IntervalLogParser
from orchestrator.domain.framework_megatron import MegatronLogParser
from orchestrator.domain.framework_torchtitan import TorchtitanLogParser

__all__ = ["ADAPTERS", "LOG_FORMATS", "IntervalLogParser", "MegatronLogParser",
           "TorchtitanLogParser", "check_gate_log_format", "log_parser"]

ADAPTERS: dict[str, type[IntervalLogParser]] = {"torchtitan": TorchtitanLogParser,
                                                "megatron": MegatronLogParser}
LOG_FORMATS = ("record", *ADAPTERS)
"""Every ``workload.log_format`` / ``axbgate import-log --format`` value."""


def log_parser(log_format: str = "record", *, warmup_steps: int | None = None,
               world_size: int | None = None, first_line_no: int = 1, keep_steps: bool = False):
    """The parser for one run's log.

    Args:
        log_format: One of :data:`LOG_FORMATS`.
        warmup_steps: Warmup steps (an adapter needs them: its log does not state them);
            None for an import: the DESIGN default of 10, with a note.
        world_size: Ranks of the run when known from outside the log (a gate's topology).
        first_line_no: Line number of the first line fed.
        keep_steps: Keep every step record (small logs, tests).

    Returns:
        A :class:`~orchestrator.domain.records.RecordParser` or an :class:`IntervalLogParser`.

    Raises:
        ValueError: An unknown ``log_format`` (the message lists the valid ones).
    """
    from orchestrator.domain.records import RecordParser

    if log_format == "record":
        return RecordParser(keep_steps=keep_steps, first_line_no=first_line_no)
    if log_format not in ADAPTERS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    note = None
    if warmup_steps is None:
        warmup_steps = 10
        note = (f"the {log_format} log does not state a warmup: the DESIGN default of 10 warmup steps "
                "is used (--warmup-steps N to choose)")
    return ADAPTERS[log_format](warmup_steps=warmup_steps, world_size=world_size,
                                first_line_no=first_line_no, keep_steps=keep_steps, warmup_note=note)


def check_gate_log_format(log_format: str, command: list[str] | None, warmup_mode: str,
                          measured_seconds: float | None) -> None:
    """Refuse a gate whose measurement rule an adapter cannot apply.

    Raises:
        ValueError: An adapter with a steady warmup or a time window (the framework runs
            the step count it is given), or a command without ``{total_steps}``.
    """
    if log_format == "record":
        return
    if warmup_mode != "fixed" or measured_seconds is not None:
        raise ValueError(
            f"workload.log_format {log_format!r}: the framework runs the step count it is given "
            "({total_steps}), so the gate needs warmup_mode 'fixed' and a count of measured steps "
            "(no measured_seconds); a steady warmup or a time window needs the record helper "
            "(axbgate_record.StepTimer, docs/integrations.md)")
    if not any("{total_steps}" in arg for arg in command or []):
        raise ValueError(
            f"workload.log_format {log_format!r}: pass {{total_steps}} in workload.command as the "
            "framework's step count (torchtitan --training.steps {total_steps}, Megatron-LM "
            "--train-iters {total_steps}), so every run takes the gate's warmup + measured steps")
