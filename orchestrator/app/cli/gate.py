"""``axbgate gate`` / ``submit`` / ``watch``: submit a gate, follow it live, print the verdict table.

Embedded mode (no ``AXBGATE_SERVER_URL``): the gate is stored in the local ledger and
this process dispatches it to the executor and polls it until it ends. Remote mode: the
request goes to the server's API and this process watches it over HTTP.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from orchestrator.app.cli.common import (
    echo_json,
    fail,
    format_pydantic_error,
    open_engine,
    pairs,
    print_verdict,
    remote_call,
    settings,
)
from orchestrator.domain.errors import AxbgateError
from orchestrator.domain.gate_spec import GateCreate

__all__ = [
    "build_gate_request",
    "follow_gate",
    "follow_gate_remote",
    "register",
]


def build_gate_request(*, spec_file: Path | None, overrides: dict[str, Any]) -> GateCreate:
    """Merge a JSON/TOML spec file with command-line values into a validated request.

    Raises:
        ValueError: The file cannot be read or the merged request is invalid; the message
            names every bad field.
    """
    data: dict[str, Any] = {}
    if spec_file is not None:
        text = spec_file.read_text()
        if spec_file.suffix not in (".json", ".toml"):
            raise ValueError(f"{spec_file}: the spec must be a .json or .toml file")
        if spec_file.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"{spec_file}: a gate request must be a JSON/TOML object (GateCreate)")
    for key, value in overrides.items():
        if value is None:
            continue
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    try:
        return GateCreate.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_pydantic_error(exc)) from None


def follow_gate(engine, current, gate_id: int, *, quiet: bool, poll_s: float = 1.0) -> None:
    """Dispatch and poll one gate in this process until it ends, with a progress bar per run.

    Ctrl-C cancels the gate (its job gets SIGTERM) and waits for the driver to stop.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from orchestrator.db.session import session_scope
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases import gates as use_cases

    dispatch_pass(engine, current, gate_ids=[gate_id])
    tasks: dict[int, Any] = {}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), disable=quiet, transient=False)
    cancelled = False
    with progress:
        while True:
            try:
                poll_pass(engine, current, gate_ids=[gate_id])
                with session_scope(engine) as session:
                    state = use_cases.get_gate_progress(session=session, gate_id=gate_id)
                if state.status == "queued":  # another local gate holds this machine
                    dispatch_pass(engine, current, gate_ids=[gate_id])
                for run in state.runs:
                    if run.order not in tasks:
                        tasks[run.order] = progress.add_task(
                            f"run {run.order} {run.role}", total=state.num_steps_per_run, info="pending")
                    info = run.status if run.median_step_s is None else (
                        f"{run.status} median {run.median_step_s * 1e3:.3f} ms")
                    progress.update(tasks[run.order], completed=run.num_steps, info=info)
                if state.status in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(poll_s)
            except KeyboardInterrupt:
                if cancelled:
                    raise
                cancelled = True
                with session_scope(engine) as session:
                    use_cases.cancel_gate(session=session, gate_id=gate_id,
                                          reason="cancelled from the CLI (Ctrl-C)")
                poll_pass(engine, current, gate_ids=[gate_id])


def follow_gate_remote(call, gate_id: int, *, quiet: bool, poll_s: float = 1.0):
    """Watch a gate on a server (its services run it) until it ends.

    Args:
        call: ``call(method, path, **kw) -> JSON`` (the CLI's HTTP helper; exits on errors).
        gate_id: Gate id.
        quiet: No progress bars.
        poll_s: Seconds between two GETs.

    Returns:
        The final ``GET /gates/{id}`` JSON.

    Ctrl-C asks the server to cancel the gate, then keeps watching until it ends.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), disable=quiet)
    tasks: dict[int, Any] = {}
    cancelled = False
    with progress:
        while True:
            try:
                view = call("GET", f"/gates/{gate_id}")
                gate = view["gate"]
                total = gate["num_warmup_steps"] + gate["num_measured_steps"]
                for run in view["runs"]:
                    if run["order"] not in tasks:
                        tasks[run["order"]] = progress.add_task(
                            f"run {run['order']} {run['role']}", total=total, info="pending")
                    median = run.get("median_step_s")
                    info = run["status"] if median is None else f"{run['status']} median {median * 1e3:.3f} ms"
                    progress.update(tasks[run["order"]], completed=len(run.get("steps") or []), info=info)
                if gate["status"] in ("succeeded", "failed", "cancelled"):
                    return view
                time.sleep(poll_s)
            except KeyboardInterrupt:
                if cancelled:
                    raise
                cancelled = True
                call("POST", f"/gates/{gate_id}/cancel", json={"reason": "cancelled from the CLI (Ctrl-C)"})


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
    from orchestrator.db.session import session_scope
    from orchestrator.usecases import gates as use_cases

    try:
        cmd_list = json.loads(command) if command else None
        if cmd_list is not None and not (
            isinstance(cmd_list, list) and all(isinstance(a, str) for a in cmd_list)
        ):
            fail('--command must be a JSON list of strings, e.g. \'["python", "bench.py"]\'')
    except json.JSONDecodeError as exc:
        fail(f"--command must be a JSON list of strings ({exc.msg})")
    try:
        control_env_map = pairs("--control-env", control_env)
        candidate_env_map = pairs("--candidate-env", candidate_env)
    except ValueError as exc:
        fail(str(exc))
    if cmd_list is not None and not cmd_list:
        fail("--command must name a program: a non-empty JSON list")
    if cmd_list and recipe:
        fail("give either --recipe (bundled trainer) or --command (external harness), not both")
    if repo and not (control_ref or candidate_ref):
        fail("--repo needs --control-ref and/or --candidate-ref (the refs to compare)")
    if (control_ref or candidate_ref) and not repo:
        fail("--control-ref/--candidate-ref need --repo (the repository to resolve them in)")
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
        fail(str(exc) if not isinstance(exc, RecursionError) else "the spec is nested too deeply")
    current = settings()
    if current.server_url:
        _gate_remote(gate_in, no_wait=no_wait, as_json=as_json)
        return
    engine = open_engine()
    try:
        with session_scope(engine) as session:
            gate, _ = use_cases.submit_gate(session=session, gate_in=gate_in,
                                            default_executor=current.executor.kind)
    except AxbgateError as exc:
        fail(str(exc))
    if not as_json:
        typer.echo(f"gate {gate.id} queued: pattern {gate.run_pattern}, executor {gate.executor}")
    if no_wait:
        if as_json:
            echo_json(gate.model_dump(mode="json"))
        return
    follow_gate(engine, current, gate.id, quiet=as_json)
    _show_gate(engine, gate.id, as_json)


def _gate_remote(gate_in, *, no_wait: bool, as_json: bool) -> None:
    """Submit through the server's API and watch the gate there."""
    from orchestrator.schemas import GatePublic

    created = remote_call("POST", "/gates", json=gate_in.model_dump(mode="json"))
    gate_id = created["id"]
    if not as_json:
        typer.echo(f"gate {gate_id} queued on {settings().server_url}: pattern {created['run_pattern']}")
    if no_wait:
        if as_json:
            echo_json(created)
        return
    view = follow_gate_remote(remote_call, gate_id, quiet=as_json)
    gate = GatePublic.model_validate(view["gate"])
    if as_json:
        echo_json(view["gate"])
    else:
        _print_gate(gate, {})
    if gate.status != "succeeded":
        raise typer.Exit(1)


def submit_cmd(ctx: typer.Context) -> None:
    """Submit a gate and return at once (`axbgate gate --no-wait`; same options)."""
    gate = ctx.parent.command.get_command(ctx.parent, "gate")
    ctx.invoke(gate.callback, **{**_gate_defaults(gate, ctx), "no_wait": True})


def _gate_defaults(gate, ctx: typer.Context) -> dict[str, Any]:
    """Parse ``submit``'s extra arguments with the ``gate`` command's own options."""
    sub = gate.make_context("submit", list(ctx.args), parent=ctx.parent)
    return dict(sub.params)


def watch_cmd(
    gate_id: Annotated[int, typer.Argument(help="Gate id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the final gate as JSON.")] = False,
) -> None:
    """Follow a gate live until it ends (embedded: this process drives it)."""
    current = settings()
    if current.server_url:
        from orchestrator.schemas import GatePublic

        view = follow_gate_remote(remote_call, gate_id, quiet=as_json)
        gate = GatePublic.model_validate(view["gate"])
        echo_json(view["gate"]) if as_json else _print_gate(gate, {})
        if gate.status != "succeeded":
            raise typer.Exit(1)
        return
    from orchestrator.db.session import session_scope
    from orchestrator.usecases import gates as use_cases

    engine = open_engine()
    try:
        with session_scope(engine) as session:
            use_cases.get_gate(session=session, gate_id=gate_id)
    except AxbgateError as exc:
        fail(str(exc))
    follow_gate(engine, current, gate_id, quiet=as_json)
    _show_gate(engine, gate_id, as_json)


def _show_gate(engine, gate_id: int, as_json: bool) -> None:
    from orchestrator.db.session import session_scope
    from orchestrator.usecases import gates as use_cases

    with session_scope(engine) as session:
        gate = use_cases.get_gate(session=session, gate_id=gate_id)
        report = use_cases.gate_overhead(session=session, gate_id=gate_id,
                                         data_dir=settings().data_dir)
    if as_json:
        out = gate.model_dump(mode="json")
        out["overhead"] = report
        echo_json(out)
    else:
        from orchestrator.executors.plan import GatePaths

        report = {**report, "gate_dir": str(GatePaths.of(settings().data_dir, gate_id).root)}
        _print_gate(gate, report, ledger=settings().database_url)
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
        print_verdict(v.numbers)
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

    from orchestrator.executors.plan import GatePaths

    path = GatePaths.of(settings().data_dir, gate_id).run_log(run.order, run.role or "X")
    if not path.exists():
        return
    lines = path.read_text(errors="replace").splitlines()[-num_lines:]
    console.print(f"run {run.order} ({run.role}) log {path}, last {len(lines)} lines:")
    for line in lines:
        console.print("  " + escape(line[:200]))


def register(app: typer.Typer) -> None:
    """Add ``gate``, ``submit`` and ``watch`` to the ``axbgate`` app."""
    app.command("gate")(gate_cmd)
    app.command(
        "submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
    )(submit_cmd)
    app.command("watch")(watch_cmd)
