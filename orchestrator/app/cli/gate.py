"""``axbgate gate`` / ``submit`` / ``watch``: submit a gate, follow it live, print the verdict table.

Embedded mode (no ``AXBGATE_SERVER_URL``): the gate is stored in the local ledger and
this process dispatches it to the executor and polls it until it ends. Remote mode: the
request goes to the server's API and this process watches it over HTTP.
"""

from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from orchestrator.app.cli.common import (
    clean,
    echo_json,
    fail,
    format_pydantic_error,
    open_engine,
    pairs,
    remote_call,
    settings,
)
from orchestrator.app.cli.follow import follow_gate, follow_gate_remote, print_gate
from orchestrator.domain.errors import AxbgateError
from orchestrator.domain.gate_spec import GateCreate

__all__ = ["build_gate_request", "register"]


def _pattern_help() -> str:
    """The ``--pattern`` help, with the defaults the code applies (never hard-coded)."""
    from orchestrator.verdict import get_policy, initial_roles

    first = " ".join(initial_roles(get_policy("sequential")))
    fixed = GateCreate.model_fields["run_pattern"].default
    return (f"Run pattern. Default: '{first}' under the sequential policy (the default; it "
            f"extends the pattern while undecided and plans its own order), '{fixed}' under "
            "--policy drift or ratio-ci (e.g. 'A X B X A').")


_PATTERN_HELP = _pattern_help()


def build_gate_request(*, spec_file: Path | None, overrides: dict[str, Any]) -> GateCreate:
    """Merge a JSON/TOML spec file with command-line values into a validated request.

    Raises:
        ValueError: The file is missing or cannot be read (``--spec: ...``), or the merged
            request is invalid; the message names every bad field.
    """
    data: dict[str, Any] = {}
    if spec_file is not None:
        try:
            text = spec_file.read_text()
        except FileNotFoundError:
            raise ValueError(f"--spec: file {spec_file} not found; give the path of a gate "
                             "request as JSON or TOML (GateCreate, docs/server.md)") from None
        except IsADirectoryError:
            raise ValueError(f"--spec: {spec_file} is a folder; give the path of a gate "
                             "request as JSON or TOML (GateCreate)") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ValueError(f"--spec: cannot read {spec_file} ({reason}); give a readable "
                             "JSON or TOML file") from None
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






def gate_cmd(
    spec: Annotated[Path | None, typer.Option(help="Gate request as JSON or TOML (GateCreate).")] = None,
    title: Annotated[str | None, typer.Option(help="What this gate decides.")] = None,
    recipe: Annotated[str | None, typer.Option(help="Bundled trainer recipe (default tiny).")] = None,
    command: Annotated[
        str | None, typer.Option(help="External harness argv as a JSON list (record contract).")
    ] = None,
    log_format: Annotated[str | None, typer.Option(help="How --command's output is read: record (default), torchtitan or megatron (their own log lines; docs/integrations.md).")] = None,
    repo: Annotated[str | None, typer.Option(help="Git repository of both sides' source.")] = None,
    control_ref: Annotated[str | None, typer.Option(help="Control git ref (needs --repo).")] = None,
    candidate_ref: Annotated[str | None, typer.Option(help="Candidate git ref (needs --repo).")] = None,
    control_env: Annotated[list[str], typer.Option(help="Control env NAME=VALUE (repeat).")] = [],
    candidate_env: Annotated[list[str], typer.Option(help="Candidate env NAME=VALUE (repeat).")] = [],
    control_override: Annotated[list[str], typer.Option(help="Control recipe section.key=value.")] = [],
    candidate_override: Annotated[list[str], typer.Option(help="Candidate recipe section.key=value.")] = [],
    pattern: Annotated[str | None, typer.Option(help=_PATTERN_HELP)] = None,
    warmup_steps: Annotated[int | None, typer.Option(help="Warmup steps per run (default 10).")] = None,
    measured_steps: Annotated[int | None, typer.Option(help="Measured steps per run (default 20).")] = None,
    warmup_mode: Annotated[str | None, typer.Option(help="fixed (default) or steady: warmup ends when the step time settles.")] = None,
    max_warmup_steps: Annotated[int | None, typer.Option(help="Most warmup steps under steady (default 50).")] = None,
    measured_seconds: Annotated[float | None, typer.Option("--measured-seconds", "--measure-seconds", help="Measured window in seconds of step time: ceil(S / step time) steps, at least --measured-steps when given, else at least 3.")] = None,
    auto_window: Annotated[bool | None, typer.Option("--auto-window/--no-auto-window", help="Choose the window after the conditioning run to minimise GPU-seconds per decision (default: when neither the request nor the recipe names a window; sequential gates on the bundled trainer).")] = None,
    max_window_seconds: Annotated[float | None, typer.Option(help="Longest window the cost model may choose, seconds (default 60).")] = None,
    design_seed: Annotated[int | None, typer.Option(help="Seed of the sequential gate's randomised run order (default: drawn and stored).")] = None,
    no_fork_server: Annotated[bool, typer.Option("--no-fork-server", help="Launch each local trainer run with torchrun instead of the fork server.")] = False,
    executor: Annotated[str | None, typer.Option(help="local, slurm or debug (default: AXBGATE_EXECUTOR__KIND, local).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes of the allocation.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per node (default 0: CPU ranks, gloo).")] = None,
    ntasks_per_node: Annotated[int | None, typer.Option(help="Ranks per node (default: GPUs per node, or 2 on CPU).")] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition.")] = None,
    time_limit_min: Annotated[int | None, typer.Option(help="Allocation time limit, minutes.")] = None,
    policy: Annotated[str | None, typer.Option(help="Primary verdict policy: sequential (default), drift or ratio-ci; all three are always stored.")] = None,
    criteria: Annotated[str | None, typer.Option(help="Health criteria: a shipped name or a TOML path (a relative path is resolved here, now).")] = None,
    no_health: Annotated[bool, typer.Option("--no-health", help="Skip the health gate.")] = False,
    run_timeout_s: Annotated[float | None, typer.Option(help="Deadline of each run, s.")] = None,
    max_extend: Annotated[int | None, typer.Option(help="Append X B while inconclusive, up to N times.")] = None,
    tag: Annotated[list[str], typer.Option(help="Tag (repeat).")] = [],
    family: Annotated[str | None, typer.Option(help="Family (groups gates in the ledger).")] = None,
    declare_change: Annotated[list[str], typer.Option("--declare-change", help="A semantic change the candidate makes on purpose: 'batch' (another global batch; timing is compared per sample instead of 'not comparable').")] = [],
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Submit and return.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the gate as JSON.")] = False,
) -> None:
    """Run an A/X/B gate: health gate, then A, X, B on ONE allocation, then the verdict.

    Examples:

      axbgate gate --repo . --control-ref main --candidate-ref HEAD --recipe ltx2-bench-h200

      axbgate gate --command '["python", "bench.py", "{warmup_steps}", "{measured_steps}"]' --control-env IMPL=old --candidate-env IMPL=new
    """
    from orchestrator.db.session import session_scope
    from orchestrator.usecases import gates as use_cases

    try:
        cmd_list = json.loads(command) if command is not None else None
    except json.JSONDecodeError as exc:
        fail(f"--command must be a JSON list of strings ({exc.msg})")
    if cmd_list is not None and not (isinstance(cmd_list, list) and all(isinstance(a, str) for a in cmd_list)):
        fail('--command must be a JSON list of strings, e.g. \'["python", "bench.py"]\'')
    control_env_map = pairs("--control-env", control_env)
    candidate_env_map = pairs("--candidate-env", candidate_env)
    # Option pairs that only mean something together; everything about the request
    # itself (one workload kind, a non-empty command, ...) is GateCreate's to check.
    if repo and not (control_ref or candidate_ref):
        fail("--repo needs --control-ref and/or --candidate-ref (the refs to compare)")
    if (control_ref or candidate_ref) and not repo:
        fail("--control-ref/--candidate-ref need --repo (the repository to resolve them in)")
    workload = {k: v for k, v in (("recipe", recipe), ("command", cmd_list)) if v is not None}
    overrides: dict[str, Any] = {
        "title": title,
        "workload": workload or None,
        "workload.log_format": log_format,
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
        "warmup_mode": warmup_mode,
        "max_warmup_steps": max_warmup_steps,
        "measured_seconds": measured_seconds,
        "auto_window": auto_window,
        "design_seed": design_seed,
        "max_window_s": max_window_seconds,
        "fork_server": False if no_fork_server else None,
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
        "declare_changes": declare_change or None,
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
        typer.echo(clean(f"gate {gate_id} queued on {settings().server_url}: pattern {created['run_pattern']}"))
    if no_wait:
        if as_json:
            echo_json(GatePublic.model_validate(created).model_dump(mode="json"))
        return
    view = follow_gate_remote(remote_call, gate_id, quiet=as_json)
    gate = GatePublic.model_validate(view)
    if as_json:
        echo_json(gate.model_dump(mode="json"))
    else:
        print_gate(gate, {}, allocation=_allocation_of(view))
    if gate.status != "succeeded":
        raise typer.Exit(1)


def submit_cmd(**options: Any) -> None:
    """Submit a gate and return at once: `axbgate gate --no-wait` with the same options.

    Example: axbgate submit --recipe tiny --control-env LR=1e-3 --candidate-env LR=2e-3 --json
    """
    gate_cmd(**options, no_wait=True)


def _with_gate_options(fn):
    """Give ``fn`` the signature of :func:`gate_cmd` without ``--no-wait`` (so ``submit
    --help`` lists every option and Typer parses them)."""
    signature = inspect.signature(gate_cmd, eval_str=True)
    fn.__signature__ = signature.replace(
        parameters=[p for p in signature.parameters.values() if p.name != "no_wait"])
    fn.__annotations__ = {k: v for k, v in typing.get_type_hints(gate_cmd, include_extras=True).items()
                          if k != "no_wait"}
    return fn


def watch_cmd(
    gate_id: Annotated[int, typer.Argument(help="Gate id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the final gate as JSON.")] = False,
) -> None:
    """Follow a gate live until it ends (embedded: this process drives it).

    Example: axbgate watch 12
    """
    current = settings()
    if current.server_url:
        from orchestrator.schemas import GatePublic

        view = follow_gate_remote(remote_call, gate_id, quiet=as_json)
        gate = GatePublic.model_validate(view)
        echo_json(gate.model_dump(mode="json")) if as_json else print_gate(
            gate, {}, allocation=_allocation_of(view))
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


def _allocation_of(view: dict[str, Any]):
    """The ``AllocationPublic`` of a ``GET /gates/{id}`` answer, or None."""
    from orchestrator.schemas.runs import AllocationPublic

    raw = view.get("allocation") if isinstance(view, dict) else None
    return AllocationPublic.model_validate(raw) if raw else None


def _show_gate(engine, gate_id: int, as_json: bool) -> None:
    from orchestrator.db.session import session_scope
    from orchestrator.usecases import gates as use_cases
    from orchestrator.usecases import views

    with session_scope(engine) as session:
        gate = use_cases.get_gate(session=session, gate_id=gate_id)
        allocation = views.get_gate_view(session=session, gate_id=gate_id).allocation
        report = use_cases.gate_overhead(session=session, gate_id=gate_id,
                                         data_dir=settings().data_dir)
    if as_json:
        out = gate.model_dump(mode="json")
        out["overhead"] = report
        echo_json(out)
    else:
        from orchestrator.executors.plan import GatePaths

        report = {**report, "gate_dir": str(GatePaths.of(settings().data_dir, gate_id).root)}
        print_gate(gate, report, ledger=settings().database_url, allocation=allocation)
    if gate.status != "succeeded":
        raise typer.Exit(1)






def register(app: typer.Typer) -> None:
    """Add ``gate``, ``submit`` and ``watch`` to the ``axbgate`` app."""
    app.command("gate")(gate_cmd)
    app.command("submit")(_with_gate_options(submit_cmd))
    app.command("watch")(watch_cmd)
