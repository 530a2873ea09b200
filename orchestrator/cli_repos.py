"""``axbgate repo add/list/show/remove`` and ``axbgate regate --once``.

Embedded mode calls the use cases on the configured database; when ``server_url`` is set
the verbs talk to that server over HTTP (writes send ``api_token``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register_repo_commands"]

repo_app = typer.Typer(help="Tracked repositories of the nightly re-gate.", no_args_is_help=True)


def _cli():
    from orchestrator import cli

    return cli


def _remote(method: str, path: str, **kwargs: Any) -> Any:
    """Call the configured server; ``None`` for 204; exit 2 with its message on an error."""
    import httpx

    from orchestrator.cli_ledger import _remote_call

    if method != "DELETE":
        return _remote_call(method, path, **kwargs)
    settings = _cli()._settings()
    headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}
    try:
        resp = httpx.request(method, settings.server_url.rstrip("/") + path, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        _cli()._fail(f"cannot reach {settings.server_url}: {exc}")
    if resp.status_code >= 400:
        _cli()._fail(f"server answered {resp.status_code}: {resp.text[:500]}")
    return None


def _embedded(fn):
    from orchestrator.cli_ledger import _embedded as run

    return run(fn)


def _is_remote() -> bool:
    return bool(_cli()._settings().server_url)


@repo_app.command("add")
def repo_add(
    url: Annotated[str, typer.Argument(help="Repository URL or absolute path of a local repository.")],
    branch: Annotated[str, typer.Option(help="Branch to follow.")] = "main",
    spec: Annotated[Path | None, typer.Option(help="RepoCreate as a JSON file (options below override).")] = None,
    recipe: Annotated[str | None, typer.Option(help="Bundled trainer recipe.")] = None,
    command: Annotated[str | None, typer.Option(help="External harness argv as a JSON list.")] = None,
    schedule: Annotated[str | None, typer.Option(help="Cron expression, UTC (default '0 2 * * *').")] = None,
    executor: Annotated[str | None, typer.Option(help="local, slurm or debug.")] = None,
    tolerance: Annotated[float | None, typer.Option(help="Re-gate tolerance, percent (0.5).")] = None,
    notify: Annotated[list[str] | None, typer.Option(help="Webhook URL, http(s) (repeat).")] = None,
    bisect: Annotated[bool, typer.Option("--bisect", help="Bisect multi-commit regressions.")] = False,
    disabled: Annotated[bool, typer.Option("--disabled", help="Add without scheduling.")] = False,
    pattern: Annotated[str | None, typer.Option(help="Run pattern, e.g. 'A X B'.")] = None,
    warmup_steps: Annotated[int | None, typer.Option(help="Warmup steps per run.")] = None,
    measured_steps: Annotated[int | None, typer.Option(help="Measured steps per run.")] = None,
    no_health: Annotated[bool, typer.Option("--no-health", help="Skip the health gate.")] = False,
    run_timeout_s: Annotated[float | None, typer.Option(help="Deadline of each run, s.")] = None,
    env: Annotated[list[str] | None, typer.Option(help="Env NAME=VALUE of both sides (repeat).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes of the allocation.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per node (0: CPU).")] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition.")] = None,
    time_limit_min: Annotated[int | None, typer.Option(help="Allocation time limit, minutes.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the repository as JSON.")] = False,
) -> None:
    """Track a branch: each scheduled check re-gates a new head against the measured head."""
    from pydantic import ValidationError

    from orchestrator import regate
    from orchestrator.cli_gate import _pairs, format_pydantic_error
    from orchestrator.schemas.repos import RepoCreate, RepoPublic

    data: dict[str, Any] = json.loads(spec.read_text()) if spec is not None else {}
    data.update(url=url, branch=branch)
    if command is not None:
        try:
            argv = json.loads(command)
        except json.JSONDecodeError as exc:
            _cli()._fail(f"--command must be a JSON list of strings ({exc.msg})")
        data["workload"] = {"command": argv}
    elif recipe is not None:
        data["workload"] = {"recipe": recipe}
    for key, value in (("schedule", schedule), ("executor", executor), ("tolerance_pct", tolerance)):
        if value is not None:
            data[key] = value
    if notify:
        data["notify"] = notify
    if bisect:
        data["bisect"] = True
    if disabled:
        data["enabled"] = False
    options = data.setdefault("options", {})
    for key, value in (("run_pattern", pattern), ("warmup_steps", warmup_steps),
                       ("measured_steps", measured_steps), ("run_timeout_s", run_timeout_s)):
        if value is not None:
            options[key] = value
    if no_health:
        options.setdefault("health", {})["enabled"] = False
    if env:
        options["env"] = _pairs("--env", env)
    topology = data.setdefault("topology", {})
    for key, value in (("nodes", nodes), ("gpus_per_node", gpus_per_node), ("partition", partition),
                       ("time_limit_min", time_limit_min)):
        if value is not None:
            topology[key] = value
    try:
        repo_in = RepoCreate.model_validate(data)
    except ValidationError as exc:
        _cli()._fail(format_pydantic_error(exc))
    if _is_remote():
        repo = RepoPublic.model_validate(_remote("POST", "/repos", json=repo_in.model_dump(mode="json")))
    else:
        settings = _cli()._settings()
        repo = _embedded(lambda s: regate.add_repository(session=s, repo_in=repo_in,
                                                         default_executor=settings.executor.kind))
    if as_json:
        _cli()._echo_json(repo.model_dump(mode="json"))
        return
    typer.echo(f"repository {repo.id}: {repo.url} branch {repo.branch}, schedule '{repo.schedule}' UTC, "
               f"executor {repo.executor}; the first check sets the measured head")


@repo_app.command("list")
def repo_list(as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False) -> None:
    """Tracked repositories with their measured heads."""
    from orchestrator import regate
    from orchestrator.schemas.repos import ReposPublic

    if _is_remote():
        repos = ReposPublic.model_validate(_remote("GET", "/repos"))
    else:
        repos = _embedded(lambda s: regate.list_repositories(session=s))
    if as_json:
        _cli()._echo_json(repos.model_dump(mode="json"))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "repository", "branch", "schedule", "executor", "tolerance %", "bisect",
                  "measured head", "enabled")
    for r in repos.data:
        table.add_row(str(r.id), r.url, r.branch, r.schedule, r.executor, f"{r.tolerance_pct:g}",
                      "yes" if r.bisect else "no", (r.last_measured_sha or "-")[:12],
                      "yes" if r.enabled else "no")
    Console().print(table)


@repo_app.command("show")
def repo_show(
    repo_id: Annotated[int, typer.Argument(min=1, help="Repository id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """One repository: events (flags, alerts), bisections, notifications."""
    from orchestrator import regate
    from orchestrator.schemas.repos import RepoViewPublic

    if _is_remote():
        view = RepoViewPublic.model_validate(_remote("GET", f"/repos/{repo_id}"))
    else:
        view = _embedded(lambda s: regate.get_repository_view(session=s, repo_id=repo_id))
    if as_json:
        _cli()._echo_json(view.model_dump(mode="json"))
        return
    r = view.repo
    typer.echo(f"repository {r.id}: {r.url} branch {r.branch}; measured head {r.last_measured_sha or '-'}")
    for b in view.bisections:
        typer.echo(f"  bisection {b.id} [{b.status}] {b.good_sha[:10]}..{b.bad_sha[:10]}: "
                   f"first bad {b.first_bad_sha or '-'} delta {b.delta_pct} % drift {b.drift_pct} % "
                   f"({b.num_gates} gates)")
    for e in view.events:
        typer.echo(f"  {e.created_at:%Y-%m-%d %H:%M} {e.kind:<13} gate {e.gate_id or '-'} {e.message}")


@repo_app.command("remove")
def repo_remove(repo_id: Annotated[int, typer.Argument(min=1, help="Repository id.")]) -> None:
    """Stop tracking a repository (its gates stay in the ledger)."""
    from orchestrator import regate

    if _is_remote():
        _remote("DELETE", f"/repos/{repo_id}")
    else:
        _embedded(lambda s: regate.remove_repository(session=s, repo_id=repo_id))
    typer.echo(f"repository {repo_id} removed")


def regate_cmd(
    once: Annotated[bool, typer.Option("--once", help="Do one pass now (required).")] = False,
    repo: Annotated[list[int] | None, typer.Option("--repo", help="Repository id (repeat; default all).")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Embedded: run the submitted gates here "
                                                       "and follow bisections to the end.")] = False,
    timeout_s: Annotated[float, typer.Option(help="--wait limit, seconds.")] = 6 * 3600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """One re-gate pass for cron or Slurm's scrontab: process finished re-gates, check each
    tracked branch, submit a re-gate where the head moved, send notifications."""
    if not once:
        _cli()._fail("regate runs inside `axbgate serve`; use --once for one pass from cron")
    from orchestrator.schemas.repos import CheckResultPublic

    if _is_remote():
        if wait:
            _cli()._fail("--wait is for the embedded mode; the server runs the gates")
        ids = repo or [r["id"] for r in _remote("GET", "/repos")["data"] if r["enabled"]]
        results = [CheckResultPublic.model_validate(_remote("POST", f"/repos/{i}/check")) for i in ids]
    else:
        results = _embedded_pass(repo or None, wait=wait, timeout_s=timeout_s)
    if as_json:
        _cli()._echo_json([r.model_dump(mode="json") for r in results])
        return
    for r in results:
        gate = f" gate {r.gate_id}" if r.gate_id else ""
        typer.echo(f"repository {r.repository_id}: {r.action}{gate} {(r.head_sha or '')[:12]} {r.message}".rstrip())


def _embedded_pass(repo_ids: list[int] | None, *, wait: bool, timeout_s: float):
    from sqlalchemy.orm import Session

    from orchestrator import store
    from orchestrator.services.gates import dispatch_pass, poll_pass
    from orchestrator.services.nightly import LEASE_NAME, process_finished_gates, regate_pass

    settings = _cli()._settings()
    engine = _cli()._engine()
    holder = f"cli:{os.getpid()}"

    def lease() -> bool:
        # Renewed on every --wait round, so a killed pass blocks a server for 10 min at most.
        with Session(engine) as session:
            held = store.webhooks.try_acquire_lease(session=session, name=LEASE_NAME, holder=holder,
                                                    now=dt.datetime.now(dt.UTC), duration_s=600.0)
            session.commit()
        return held

    if not lease():
        _cli()._fail("a running scheduler (axbgate serve) holds the re-gate lease; it checks on "
                     "its schedule, or use POST /repos/{id}/check against it")
    try:
        results = regate_pass(engine, settings, repo_ids)
        if wait:
            deadline = time.monotonic() + timeout_s
            ids = repo_ids or [r.repository_id for r in results]
            while True:
                with Session(engine) as session:
                    busy = [g.id for rid in ids for g in store.repos.gates_in_flight(session=session, repo_id=rid)]
                if not busy:
                    break
                if time.monotonic() > deadline:
                    _cli()._fail(f"gates {busy} still running after {timeout_s:g} s")
                if not lease():
                    _cli()._fail("another scheduler took the re-gate lease; stopping this pass")
                dispatch_pass(engine, settings, gate_ids=busy)
                poll_pass(engine, settings, gate_ids=busy)
                process_finished_gates(engine, settings)
                time.sleep(1.0)
            from orchestrator.notify import deliver_due

            deliver_due(engine=engine, settings=settings)
        return results
    finally:
        with Session(engine) as session:
            store.webhooks.release_lease(session=session, name=LEASE_NAME, holder=holder)
            session.commit()


def register_repo_commands(app: typer.Typer) -> None:
    """Add ``repo`` and ``regate`` to the ``axbgate`` app."""
    app.add_typer(repo_app, name="repo")
    app.command("regate")(regate_cmd)
