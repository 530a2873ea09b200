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


@app.command("gate")
def gate_cmd(
    spec: Annotated[Path | None, typer.Option(help="Gate request as JSON or TOML (GateCreate).")] = None,
    title: Annotated[str | None, typer.Option(help="What this gate decides.")] = None,
    recipe: Annotated[str | None, typer.Option(help="Bundled trainer recipe (default tiny).")] = None,
    command: Annotated[
        str | None, typer.Option(help="External harness argv as a JSON list (record contract).")
    ] = None,
    repo: Annotated[str | None, typer.Option(help="Git repository of both sides' source.")] = None,
    control_ref: Annotated[str | None, typer.Option(help="Control git ref (needs --repo).")] = None,
    candidate_ref: Annotated[str | None, typer.Option(help="Candidate git ref (needs --repo).")] = None,
    control_env: Annotated[list[str], typer.Option(help="Control env NAME=VALUE (repeat).")] = [],
    candidate_env: Annotated[list[str], typer.Option(help="Candidate env NAME=VALUE (repeat).")] = [],
    control_override: Annotated[list[str], typer.Option(help="Control recipe section.key=value.")] = [],
    candidate_override: Annotated[list[str], typer.Option(help="Candidate recipe section.key=value.")] = [],
    pattern: Annotated[str | None, typer.Option(help="Run pattern (default 'A X B'; e.g. 'A X B X A').")] = None,
    warmup_steps: Annotated[int | None, typer.Option(help="Warmup steps per run (default 10).")] = None,
    measured_steps: Annotated[int | None, typer.Option(help="Measured steps per run (default 20).")] = None,
    executor: Annotated[str | None, typer.Option(help="local, slurm or debug (default: AXBGATE_EXECUTOR__KIND, local).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes of the allocation.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per node (default 0: CPU ranks, gloo).")] = None,
    ntasks_per_node: Annotated[int | None, typer.Option(help="Ranks per node (default: GPUs per node, or 2 on CPU).")] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition.")] = None,
    time_limit_min: Annotated[int | None, typer.Option(help="Allocation time limit, minutes.")] = None,
    policy: Annotated[str | None, typer.Option(help="Primary verdict policy (default drift; ratio-ci is always reported too).")] = None,
    criteria: Annotated[str | None, typer.Option(help="Health criteria name or TOML path.")] = None,
    no_health: Annotated[bool, typer.Option("--no-health", help="Skip the health gate.")] = False,
    run_timeout_s: Annotated[float | None, typer.Option(help="Deadline of each run, s.")] = None,
    max_extend: Annotated[int | None, typer.Option(help="Append X B while inconclusive, up to N times.")] = None,
    tag: Annotated[list[str], typer.Option(help="Tag (repeat).")] = [],
    family: Annotated[str | None, typer.Option(help="Family (groups gates in the ledger).")] = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Submit and return.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the gate as JSON.")] = False,
) -> None:
    """Run an A/X/B gate: health gate, then A, X, B on ONE allocation, then the verdict."""
    from orchestrator import gates as use_cases
    from orchestrator.cli_gate import _pairs, build_gate_request, follow_gate
    from orchestrator.db.session import session_scope

    try:
        cmd_list = json.loads(command) if command else None
        if cmd_list is not None and not (
            isinstance(cmd_list, list) and all(isinstance(a, str) for a in cmd_list)
        ):
            _fail('--command must be a JSON list of strings, e.g. \'["python", "bench.py"]\'')
    except json.JSONDecodeError as exc:
        _fail(f"--command must be a JSON list of strings ({exc.msg})")
    try:
        control_env_map = _pairs("--control-env", control_env)
        candidate_env_map = _pairs("--candidate-env", candidate_env)
    except ValueError as exc:
        _fail(str(exc))
    if cmd_list is not None and not cmd_list:
        _fail("--command must name a program: a non-empty JSON list")
    if cmd_list and recipe:
        _fail("give either --recipe (bundled trainer) or --command (external harness), not both")
    if repo and not (control_ref or candidate_ref):
        _fail("--repo needs --control-ref and/or --candidate-ref (the refs to compare)")
    if (control_ref or candidate_ref) and not repo:
        _fail("--control-ref/--candidate-ref need --repo (the repository to resolve them in)")
    overrides: dict[str, Any] = {
        "title": title,
        "workload": ({"command": cmd_list} if cmd_list else {"recipe": recipe}) if (cmd_list or recipe) else None,
        "control.source.repo": repo if (repo and control_ref) else None,
        "control.source.ref": control_ref,
        "candidate.source.repo": repo if (repo and candidate_ref) else None,
        "candidate.source.ref": candidate_ref,
        "control.env": control_env_map or None,
        "candidate.env": candidate_env_map or None,
        "control.recipe_overrides": control_override or None,
        "candidate.recipe_overrides": candidate_override or None,
        "run_pattern": pattern,
        "warmup_steps": warmup_steps,
        "measured_steps": measured_steps,
        "executor": executor,
        "topology.nodes": nodes,
        "topology.gpus_per_node": gpus_per_node,
        "topology.ntasks_per_node": ntasks_per_node,
        "topology.partition": partition,
        "topology.time_limit_min": time_limit_min,
        "policy": policy,
        "health.criteria": criteria,
        "health.enabled": False if no_health else None,
        "run_timeout_s": run_timeout_s,
        "max_extend": max_extend,
        "tags": tag or None,
        "family": family,
    }
    try:
        gate_in = build_gate_request(spec_file=spec, overrides=overrides)
    except (ValueError, OSError, RecursionError) as exc:
        _fail(str(exc) if not isinstance(exc, RecursionError) else "the spec is nested too deeply")
    settings = _settings()
    if settings.server_url:
        _gate_remote(gate_in, no_wait=no_wait, as_json=as_json)
        return
    engine = _engine()
    try:
        with session_scope(engine) as session:
            gate, _ = use_cases.submit_gate(session=session, gate_in=gate_in,
                                            default_executor=settings.executor.kind)
    except AxbgateError as exc:
        _fail(str(exc))
    if not as_json:
        typer.echo(f"gate {gate.id} queued: pattern {gate.run_pattern}, executor {gate.executor}")
    if no_wait:
        if as_json:
            _echo_json(gate.model_dump(mode="json"))
        return
    follow_gate(engine, settings, gate.id, quiet=as_json)
    _show_gate(engine, gate.id, as_json)


def _gate_remote(gate_in, *, no_wait: bool, as_json: bool) -> None:
    """Submit through the server's API and watch the gate there."""
    from orchestrator.cli_gate import follow_gate_remote
    from orchestrator.cli_ledger import _remote_call
    from orchestrator.schemas import GatePublic

    created = _remote_call("POST", "/gates", json=gate_in.model_dump(mode="json"))
    gate_id = created["id"]
    if not as_json:
        typer.echo(f"gate {gate_id} queued on {_settings().server_url}: pattern {created['run_pattern']}")
    if no_wait:
        if as_json:
            _echo_json(created)
        return
    view = follow_gate_remote(_remote_call, gate_id, quiet=as_json)
    gate = GatePublic.model_validate(view["gate"])
    if as_json:
        _echo_json(view["gate"])
    else:
        _print_gate(gate, {})
    if gate.status != "succeeded":
        raise typer.Exit(1)


@app.command(
    "submit",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def submit_cmd(ctx: typer.Context) -> None:
    """Submit a gate and return at once (`axbgate gate --no-wait`; same options)."""
    raise typer.Exit(main(["gate", *ctx.args, "--no-wait"]))


@app.command("watch")
def watch_cmd(
    gate_id: Annotated[int, typer.Argument(help="Gate id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the final gate as JSON.")] = False,
) -> None:
    """Follow a gate live until it ends (embedded: this process drives it)."""
    settings = _settings()
    if settings.server_url:
        from orchestrator.cli_gate import follow_gate_remote
        from orchestrator.cli_ledger import _remote_call
        from orchestrator.schemas import GatePublic

        view = follow_gate_remote(_remote_call, gate_id, quiet=as_json)
        gate = GatePublic.model_validate(view["gate"])
        _echo_json(view["gate"]) if as_json else _print_gate(gate, {})
        if gate.status != "succeeded":
            raise typer.Exit(1)
        return
    from orchestrator import gates as use_cases
    from orchestrator.cli_gate import follow_gate
    from orchestrator.db.session import session_scope

    engine = _engine()
    try:
        with session_scope(engine) as session:
            use_cases.get_gate(session=session, gate_id=gate_id)
    except AxbgateError as exc:
        _fail(str(exc))
    follow_gate(engine, settings, gate_id, quiet=as_json)
    _show_gate(engine, gate_id, as_json)


def _show_gate(engine, gate_id: int, as_json: bool) -> None:
    from orchestrator import gates as use_cases
    from orchestrator.db.session import session_scope

    with session_scope(engine) as session:
        gate = use_cases.get_gate(session=session, gate_id=gate_id)
        report = use_cases.gate_overhead(session=session, gate_id=gate_id,
                                         data_dir=_settings().data_dir)
    if as_json:
        out = gate.model_dump(mode="json")
        out["overhead"] = report
        _echo_json(out)
    else:
        from orchestrator.ingest import gate_dir

        report = {**report, "gate_dir": str(gate_dir(_settings().data_dir, gate_id))}
        _print_gate(gate, report, ledger=_settings().database_url)
    if gate.status != "succeeded":
        raise typer.Exit(1)


def _print_gate(gate, report: dict[str, Any], ledger: str | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    table = Table(title=f"gate {gate.id}: {gate.title or gate.run_pattern} [{gate.status}]")
    for col in ("run", "role", "status", "median ms", "MFU %", "warmup+measured", "error"):
        table.add_column(col)
    for run in gate.runs:
        table.add_row(str(run.order), run.role or "-", run.status,
                      f"{run.median_step_s * 1e3:.3f}" if run.median_step_s else "-",
                      f"{run.mfu_pct:.2f}" if run.mfu_pct is not None else "-",
                      f"{run.num_warmup_steps}+{run.num_measured_steps}" if run.num_measured_steps
                      else str(len(run.slowest_rank_step_s)),
                      escape((run.error or "")[:60]))
    console.print(table)
    if gate.status_reason:
        console.print(f"reason: {escape(gate.status_reason)}")
    for run in gate.runs:
        if run.status == "failed" and ledger is not None:
            _print_log_tail(console, ledger, gate.id, run)
    primary = None
    for v in sorted(gate.verdicts, key=lambda v: not v.is_primary):
        _print_verdict(v.numbers)
        if v.is_primary:
            primary = v
    others = [v for v in gate.verdicts if not v.is_primary and primary and v.verdict != primary.verdict]
    for v in others:
        console.print(
            f"[bold yellow]policies disagree:[/] {primary.policy}={primary.verdict}, "
            f"{v.policy}={v.verdict}. A single A X B under the drift rule accepts ~20% of "
            "candidates with no true effect (README, Verdicts); re-run with a longer pattern "
            "or more measured steps before adopting."
        )
    if report.get("allocation_wall_s"):
        console.print(
            f"allocation wall {report['allocation_wall_s']:.1f} s: measured steps "
            f"{report['measured_s']:.1f} s, health {report['health_s']:.1f} s, everything else "
            f"(launch, compile, warmup) {report['allocation_wall_s'] - report['measured_s'] - report['health_s']:.1f} s; "
            f"overhead = 1 - measured/wall = {report['overhead_pct']:.1f} %"
        )
    if ledger:
        console.print(f"ledger: {ledger} (gate {gate.id}); logs: {report.get('gate_dir', '')}")


def _print_log_tail(console, ledger: str, gate_id: int, run, num_lines: int = 12) -> None:
    """Show where a failed run's raw log is and its last lines."""
    from rich.markup import escape

    from orchestrator.executors.plan import run_file_stem
    from orchestrator.ingest import gate_dir

    path = gate_dir(_settings().data_dir, gate_id) / "runs" / f"{run_file_stem(run.order, run.role or 'X')}.log"
    if not path.exists():
        return
    lines = path.read_text(errors="replace").splitlines()[-num_lines:]
    console.print(f"run {run.order} ({run.role}) log {path}, last {len(lines)} lines:")
    for line in lines:
        console.print("  " + escape(line[:200]))


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
