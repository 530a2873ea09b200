"""``axbgate import-log``: store run logs printed by any harness (record contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.app.cli.common import clean, echo_json, fail, open_engine, settings
from orchestrator.domain.errors import AxbgateError

__all__ = ["register"]


def import_log_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Run logs (AXBGATE_* or BF16_* records).")],
    log_format: Annotated[str, typer.Option("--format", help="record (AXBGATE_*/BF16_* lines, default), torchtitan or megatron (the framework's own log; docs/integrations.md).")] = "record",
    warmup_steps: Annotated[int | None, typer.Option(help="Warmup steps of a torchtitan/megatron log, from its first step (default 10; must end on a logged step).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """Parse run logs, keep them with their SHA-256 and store the runs in the ledger.

    Example: axbgate import-log --format torchtitan --warmup-steps 2 train.log
    """
    from sqlalchemy.exc import SQLAlchemyError

    from orchestrator.db.session import session_scope
    from orchestrator.usecases.imports import import_log

    from orchestrator.domain.framework_logs import LOG_FORMATS

    if log_format not in LOG_FORMATS:
        fail(f"--format {log_format!r} must be one of {', '.join(LOG_FORMATS)}")
    if warmup_steps is not None and (log_format == "record" or warmup_steps < 0):
        fail("--warmup-steps applies to --format torchtitan/megatron (a record log states its "
             "own counts) and must be >= 0")
    current = settings()
    engine = open_engine()
    summaries = []
    errors = []
    for path in paths:  # each log is its own transaction: one bad file stores nothing of it
        try:
            with session_scope(engine) as session:
                summaries.append(import_log(session=session, path=path, artifacts_dir=current.artifacts_dir,
                                            log_format=log_format, warmup_steps=warmup_steps))
        except AxbgateError as exc:
            errors.append(f"{path}: {exc}")
        except (SQLAlchemyError, OSError) as exc:  # one file's failure never stops the others
            first = str(getattr(exc, "orig", None) or exc).splitlines()[0][:300]
            errors.append(f"{path}: not stored ({type(exc).__name__}: {first})")
    for message in errors:
        typer.echo(clean(f"axbgate: error: {message}"), err=True)
    for s in summaries:  # notes and warnings go to stderr, also with --json
        for note in s.notes:
            typer.echo(clean(f"{s.path}: note: {note}"), err=True)
        if s.median_mismatch:
            series = "rank 0's own" if s.step_series == "rank0" else "slowest-rank"
            typer.echo(clean(
                f"{s.path}: warning: the log's own median_step_s {s.log_median_step_s} differs from "
                f"the median recomputed from its per-step {series} times ({s.median_step_s}); "
                "the ledger keeps the recomputed one"),
                err=True,
            )
    if as_json:
        echo_json([s.model_dump() for s in summaries])
    else:
        for s in summaries:
            typer.echo(clean(
                f"{s.path}: run={s.run_id} status={s.status} median_step_s={s.median_step_s} "
                f"warmup_steps={s.warmup_steps} measured_steps={s.measured_steps} "
                f"log_sha256={s.log_sha256}"
                + (" (already imported)" if s.already_imported else "")
                + (f" error={s.error}" if s.error else "")
                + (f" health={s.health_verdict}" if s.health_verdict else "")
            ))
    if errors:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Add ``import-log`` to the ``axbgate`` app."""
    app.command("import-log")(import_log_cmd)
