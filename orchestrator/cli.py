"""``axbgate`` command line: one command per verb, thin over the use cases.

Every command that prints results accepts ``--json``. Bad input exits with status 2 and
a message naming the option; a domain error (not found, conflict) exits 2 as well;
a failed health gate or a failed gate exits 1.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator import verdict as verdict_engine
from orchestrator.errors import AxbgateError

__all__ = ["app", "main"]

logger = logging.getLogger(__name__)

app = typer.Typer(
    name="axbgate",
    help="A/X/B performance gates for GPU training: faster, slower, or noise?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Ledger database schema (Alembic migrations).", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"axbgate: error: {message}", err=True)
    raise typer.Exit(code)


def _seconds(option: str, raw: str) -> float:
    """Parse a run median given on the command line, in seconds."""
    try:
        value = float(raw)
    except ValueError:
        _fail(f"{option} must be a number of seconds, got {raw!r}")
    if not math.isfinite(value) or value <= 0:
        _fail(f"{option} must be a positive finite number of seconds, got {raw!r}")
    return value


def _echo_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, default=str))


def _settings():
    from pydantic import ValidationError

    from orchestrator.settings import get_settings

    try:
        return get_settings()
    except ValidationError as exc:
        errors = "; ".join(
            f"AXBGATE_{'__'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        _fail(f"invalid settings: {errors}")


def _engine():
    from orchestrator.db.migrate import ensure_schema
    from orchestrator.db.session import get_engine

    from sqlalchemy.exc import SQLAlchemyError

    settings = _settings()
    try:
        ensure_schema(settings.database_url)
    except RuntimeError as exc:
        _fail(str(exc))
    except SQLAlchemyError as exc:
        _fail(f"cannot open the ledger database {settings.database_url}: "
              f"{str(exc.orig if hasattr(exc, 'orig') and exc.orig else exc).splitlines()[0]} "
              "(check AXBGATE_DATABASE__URL, or AXBGATE_DATA_DIR for the embedded SQLite file)")
    except OSError as exc:
        _fail(f"cannot create the ledger under {settings.data_dir}: {exc} (set AXBGATE_DATA_DIR "
              "to a writable folder)")
    return get_engine(settings.database_url, settings.database.echo)


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@app.command("verdict")
def verdict_cmd(
    a: Annotated[str | None, typer.Option("--a", help="Control A run median, seconds.")] = None,
    x: Annotated[str | None, typer.Option("--x", help="Candidate X run median, seconds.")] = None,
    b: Annotated[str | None, typer.Option("--b", help="Control B run median, seconds.")] = None,
    pattern: Annotated[
        str | None,
        typer.Option(help="Longer pattern, e.g. 'A X B X A'; give --medians in that order."),
    ] = None,
    medians: Annotated[
        str | None, typer.Option(help="Comma-separated run medians (seconds) for --pattern.")
    ] = None,
    kind: Annotated[str, typer.Option(help="candidate or regate.")] = "candidate",
    policy: Annotated[
        str, typer.Option(help=f"Verdict policy: {', '.join(verdict_engine.POLICY_NAMES)}.")
    ] = "drift",
    max_drift: Annotated[float | None, typer.Option(help="max_drift, percent (default 2).")] = None,
    min_effect: Annotated[float | None, typer.Option(help="min_effect, percent (default 0).")] = None,
    tolerance: Annotated[float | None, typer.Option(help="Re-gate tolerance, percent (0.5).")] = None,
    confidence: Annotated[
        float | None, typer.Option(help="ratio-ci: two-sided interval coverage (0.98).")
    ] = None,
    mfu_numerator: Annotated[
        float | None,
        typer.Option(help="MFU numerator: FLOPs per sample / peak FLOP/s x 100 (percent-s)."),
    ] = None,
    control_local_batch: Annotated[int, typer.Option(min=1)] = 1,
    control_grad_accum: Annotated[int, typer.Option(min=1)] = 1,
    candidate_local_batch: Annotated[int, typer.Option(min=1)] = 1,
    candidate_grad_accum: Annotated[int, typer.Option(min=1)] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Judge a gate from its run medians (DESIGN.md section 3); no database needed."""
    if pattern is not None or medians is not None:
        if pattern is None or medians is None:
            _fail("--pattern and --medians go together")
        if any(v is not None for v in (a, x, b)):
            _fail("give either --a/--x/--b or --pattern/--medians, not both")
        roles = pattern.replace(",", " ").split()
        values = [m for m in medians.split(",") if m.strip()]
        if len(roles) != len(values):
            _fail(f"--pattern has {len(roles)} runs but --medians has {len(values)} values")
        for i, role in enumerate(roles):
            if role not in ("A", "X", "B"):
                _fail(f"--pattern run {i} is {role!r}; each run must be A, X or B")
        runs = [(r, _seconds(f"--medians[{i}]", v.strip())) for i, (r, v) in enumerate(zip(roles, values))]
    else:
        for name, value in (("--a", a), ("--x", x), ("--b", b)):
            if value is None:
                _fail(f"{name} is required (run median in seconds)")
        runs = [("A", _seconds("--a", a)), ("X", _seconds("--x", x)), ("B", _seconds("--b", b))]
    if kind not in ("candidate", "regate"):
        _fail(f"--kind must be candidate or regate, got {kind!r}")
    params = {
        k: v
        for k, v in {
            "max_drift_pct": max_drift,
            "min_effect_pct": min_effect,
            "tolerance_pct": tolerance,
            "confidence": confidence,
        }.items()
        if v is not None
    }
    if mfu_numerator is not None and (not math.isfinite(mfu_numerator) or mfu_numerator <= 0):
        _fail(f"--mfu-numerator must be a positive number, got {mfu_numerator}")
    try:
        pol = verdict_engine.get_policy(policy, **params)
        measurement = verdict_engine.GateMeasurement(
            runs=tuple(
                verdict_engine.RunSummary(role=role, order=i, median_step_s=value)
                for i, (role, value) in enumerate(runs)
            ),
            kind=kind,
            mfu_numerator_pct_s=mfu_numerator,
            control_local_batch_size=control_local_batch,
            control_grad_accum_steps=control_grad_accum,
            candidate_local_batch_size=candidate_local_batch,
            candidate_grad_accum_steps=candidate_grad_accum,
        )
        result = verdict_engine.judge(measurement, pol)
    except ValueError as exc:
        _fail(str(exc))
    out = result.to_dict()
    bad = [k for k, v in out.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        _fail(f"the medians are too extreme to compare ({', '.join(sorted(bad))} not finite); "
              "give run medians in seconds")
    if as_json:
        _echo_json(out)
        return
    _print_verdict(out)


def _print_verdict(out: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"verdict ({out['policy']} v{out['policy_version']})", show_header=False)
    rows = [
        ("control midpoint", f"{out['midpoint_s']:.9f} s"),
        ("drift", f"{out['drift_pct']:.6f} %"),
        ("delta", f"{out['delta_ms']:+.6f} ms / {out['delta_pct']:+.6f} %"),
    ]
    if out.get("threshold_pct"):
        rows.append(("acts beyond +/-", f"{out['threshold_pct']:.6f} %"))
    if out.get("mfu_points") is not None:
        rows.append(("MFU control / candidate",
                     f"{out['mfu_control_pct']:.3f} % / {out['mfu_candidate_pct']:.3f} %"))
        rows.append(("MFU points", f"{out['mfu_points']:+.3f}"))
    for key in ("ci_low_pct", "ci_high_pct", "mde_pct"):
        if out.get(key) is not None:
            rows.append((key, f"{out[key]:+.4f} %"))
    if out.get("calibration"):
        rows.append(("calibration", f"{out['calibration']}: {out.get('num_gate_control_pairs', 0)} "
                                    f"control pairs of this gate, {out.get('num_history_pairs', 0)} from "
                                    f"{out.get('num_history_gates', 0)} earlier gates"))
    rows.append(("timing verdict", str(out["verdict"]).upper()))
    if out.get("reason"):
        rows.append(("reason", str(out["reason"])))
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


@app.command("import-log")
def import_log_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Run logs (AXBGATE_* or BF16_* records).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """Parse run logs, keep them with their SHA-256 and store the runs in the ledger."""
    from orchestrator.db.session import session_scope
    from orchestrator.imports import import_log

    settings = _settings()
    engine = _engine()
    summaries = []
    errors = []
    for path in paths:  # each log is its own transaction: one bad file stores nothing of it
        try:
            with session_scope(engine) as session:
                summaries.append(
                    import_log(session=session, path=path, artifacts_dir=settings.artifacts_dir)
                )
        except AxbgateError as exc:
            errors.append(f"{path}: {exc}")
    for message in errors:
        typer.echo(f"axbgate: error: {message}", err=True)
    if as_json:
        _echo_json([s.model_dump() for s in summaries])
        if errors:
            raise typer.Exit(2)
        return
    for s in summaries:
        typer.echo(
            f"{s.path}: run={s.run_id} status={s.status} median_step_s={s.median_step_s} "
            f"warmup_steps={s.warmup_steps} measured_steps={s.measured_steps} "
            f"log_sha256={s.log_sha256}"
            + (" (already imported)" if s.already_imported else "")
            + (f" error={s.error}" if s.error else "")
            + (f" health={s.health_verdict}" if s.health_verdict else "")
        )
        if s.median_mismatch:
            typer.echo(
                f"{s.path}: warning: the log's own median_step_s {s.log_median_step_s} differs from "
                f"the median recomputed from its per-step slowest-rank times ({s.median_step_s}); "
                "the ledger keeps the recomputed one",
                err=True,
            )
    if errors:
        raise typer.Exit(2)


@app.command(
    "health",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def health_cmd(ctx: typer.Context) -> None:
    """Run the health gate on this machine or allocation (`axbgate health --help`).

    Options: --criteria FILE|NAME, --json, --nproc N, --nodes H0,H1, --node-rank R,
    --job-id ID, --interface IFACE. Exit status 0 healthy/degraded, non-zero failed or hang.
    """
    from health.cli import main as health_main

    raise typer.Exit(health_main(list(ctx.args)))


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Apply migrations up to REVISION (default: newest)."""
    from orchestrator.db.migrate import current_revision, upgrade

    url = _settings().database_url
    upgrade(url, revision)
    typer.echo(f"database at revision {current_revision(url)}")


@db_app.command("downgrade")
def db_downgrade(revision: Annotated[str, typer.Argument()]) -> None:
    """Revert migrations down to REVISION ('base' empties the schema)."""
    from orchestrator.db.migrate import current_revision, downgrade

    url = _settings().database_url
    downgrade(url, revision)
    typer.echo(f"database at revision {current_revision(url)}")


@db_app.command("current")
def db_current() -> None:
    """Print the revision the database is at."""
    from orchestrator.db.migrate import current_revision, head_revision

    url = _settings().database_url
    typer.echo(f"current={current_revision(url)} head={head_revision()}")


from orchestrator.cli_gate import register_gate_commands  # noqa: E402

register_gate_commands(app)

from orchestrator.cli_ledger import register_ledger_commands  # noqa: E402

register_ledger_commands(app)

from orchestrator.cli_repos import register_repo_commands  # noqa: E402

register_repo_commands(app)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point.

    Returns:
        The process exit status.
    """
    try:
        # Non-standalone mode returns typer.Exit's code instead of raising it.
        rv = app(args=argv, prog_name="axbgate", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # click's own usage errors
        return int(exc.code or 0)
    except Exception as exc:  # click usage errors raised in non-standalone mode
        try:  # recent typer vendors click as typer._click
            from typer._click import exceptions as click_exceptions
        except ImportError:
            from click import exceptions as click_exceptions

        if isinstance(exc, click_exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click_exceptions.Abort):
            return 130
        raise


if __name__ == "__main__":
    sys.exit(main())
