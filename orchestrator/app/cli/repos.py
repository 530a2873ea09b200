"""``axbgate repo add/list/show/remove`` and ``axbgate regate --once``.

Embedded mode calls the use cases on the configured database; when ``server_url`` is set
the verbs talk to that server over HTTP (writes send ``api_token``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.app.cli.common import (
    clean,
    echo_json,
    embedded,
    fail,
    format_pydantic_error,
    is_remote,
    open_engine,
    pairs,
    remote_call,
    rich_text,
    settings,
)

__all__ = ["register"]

repo_app = typer.Typer(help="Tracked repositories of the nightly re-gate.", no_args_is_help=True)


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

    from orchestrator.schemas.repos import RepoCreate, RepoCreatedPublic
    from orchestrator.usecases import regate

    data: dict[str, Any] = json.loads(spec.read_text()) if spec is not None else {}
    data.update(url=url, branch=branch)
    if command is not None:
        try:
            argv = json.loads(command)
        except json.JSONDecodeError as exc:
            fail(f"--command must be a JSON list of strings ({exc.msg})")
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
        options["env"] = pairs("--env", env)
    topology = data.setdefault("topology", {})
    for key, value in (("nodes", nodes), ("gpus_per_node", gpus_per_node), ("partition", partition),
                       ("time_limit_min", time_limit_min)):
        if value is not None:
            topology[key] = value
    try:
        repo_in = RepoCreate.model_validate(data)
    except ValidationError as exc:
        fail(format_pydantic_error(exc))
    if is_remote():
        repo = RepoCreatedPublic.model_validate(remote_call("POST", "/repos",
                                                            json=repo_in.model_dump(mode="json")))
    else:
        current = settings()
        repo = embedded(lambda s: regate.add_repository(
            session=s, repo_in=repo_in, default_executor=current.executor.kind,
            allow_private_webhooks=current.security.webhook_allow_private))
    if as_json:
        echo_json(repo.model_dump(mode="json"))
        return
    typer.echo(clean(f"repository {repo.id}: {repo.url} branch {repo.branch}, schedule "
                     f"'{repo.schedule}' UTC, executor {repo.executor}; the first check sets the "
                     "measured head"))
    typer.echo("webhook signing secret (shown once; receivers verify the webhook-signature "
               f"header with it): {repo.webhook_secret}")


@repo_app.command("list")
def repo_list(as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False) -> None:
    """Tracked repositories with their measured heads."""
    from orchestrator.schemas.repos import ReposPublic
    from orchestrator.usecases import regate

    if is_remote():
        repos = ReposPublic.model_validate(remote_call("GET", "/repos"))
    else:
        repos = embedded(lambda s: regate.list_repositories(session=s))
    if as_json:
        echo_json(repos.model_dump(mode="json"))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "repository", "branch", "health", "schedule", "executor", "tol. %",
                  "bisect", "measured head")
    colors = {"healthy": "green", "failing": "red", "regression": "red", "no_verdict": "yellow"}
    for r in repos.data:
        health = f"[{colors[r.health]}]{r.health}[/]" if r.health in colors else r.health
        table.add_row(str(r.id), rich_text(r.url), rich_text(r.branch), health, r.schedule, r.executor,
                      f"{r.tolerance_pct:g}", "yes" if r.bisect else "no", (r.last_measured_sha or "-")[:12])
    Console().print(table)
    for r in repos.data:
        if r.health_reason:
            typer.echo(clean(f"repository {r.id} {r.health}: {r.health_reason}"))


@repo_app.command("show")
def repo_show(
    repo_id: Annotated[int, typer.Argument(min=1, help="Repository id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """One repository: events (flags, alerts), bisections, notifications."""
    from orchestrator.schemas.repos import RepoViewPublic
    from orchestrator.usecases import regate

    if is_remote():
        view = RepoViewPublic.model_validate(remote_call("GET", f"/repos/{repo_id}"))
    else:
        view = embedded(lambda s: regate.get_repository_view(session=s, repo_id=repo_id))
    if as_json:
        echo_json(view.model_dump(mode="json"))
        return
    r = view.repo
    typer.echo(clean(f"repository {r.id}: {r.url} branch {r.branch}; measured head "
                     f"{r.last_measured_sha or '-'}; health {r.health}"))
    for b in view.bisections:
        typer.echo(clean(f"  bisection {b.id} [{b.status}] {b.good_sha[:10]}..{b.bad_sha[:10]}: "
                         f"first bad {b.first_bad_sha or '-'} delta {b.delta_pct} % drift {b.drift_pct} % "
                         f"({b.num_gates} gates)"))
    for e in view.events:
        typer.echo(clean(f"  {e.created_at:%Y-%m-%d %H:%M} {e.kind:<13} gate {e.gate_id or '-'} {e.message}"))
    for d in view.deliveries:
        last = f"; last error: {d.last_error}" if d.last_error else (
            f"; last answer HTTP {d.last_status_code}" if d.last_status_code else "")
        typer.echo(clean(f"  notification {d.id} ({d.payload.get('event')}) to {d.url}: {d.status}, "
                         f"{d.num_attempts} attempts{last}"))


@repo_app.command("remove")
def repo_remove(repo_id: Annotated[int, typer.Argument(min=1, help="Repository id.")]) -> None:
    """Stop tracking a repository (its gates stay in the ledger)."""
    from orchestrator.usecases import regate

    if is_remote():
        remote_call("DELETE", f"/repos/{repo_id}")
    else:
        embedded(lambda s: regate.remove_repository(session=s, repo_id=repo_id))
    typer.echo(f"repository {repo_id} removed")


@repo_app.command("webhook-secret")
def repo_webhook_secret(
    repo_id: Annotated[int, typer.Argument(min=1, help="Repository id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Replace the repository's webhook signing secret and show the new one once."""
    from orchestrator.schemas.repos import RepoCreatedPublic
    from orchestrator.usecases import regate

    if is_remote():
        repo = RepoCreatedPublic.model_validate(remote_call("POST", f"/repos/{repo_id}/webhook-secret"))
    else:
        repo = embedded(lambda s: regate.rotate_webhook_secret(session=s, repo_id=repo_id))
    if as_json:
        echo_json(repo.model_dump(mode="json"))
        return
    typer.echo(f"repository {repo.id}: new webhook signing secret (shown once): {repo.webhook_secret}")


def regate_cmd(
    repo_ids: Annotated[list[int] | None, typer.Argument(help="Repository ids (default: every enabled one).")] = None,
    once: Annotated[bool, typer.Option("--once", help="Do one pass now (required).")] = False,
    repo: Annotated[list[int] | None, typer.Option("--repo", help="Repository id (repeat); the same as the arguments.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Embedded: run the submitted gates here "
                                                       "and follow bisections to the end.")] = False,
    timeout_s: Annotated[float, typer.Option(help="--wait limit, seconds.")] = 6 * 3600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """One re-gate pass for cron or Slurm's scrontab: process finished re-gates, check each
    tracked branch, submit a re-gate where the head moved, send notifications.

    Exits 1 when the check of a repository failed (its branch could not be read), so cron
    and scrontab report it; `axbgate repo list` then shows it as failing.

    Example: axbgate regate --once 3 --wait
    """
    if not once:
        fail("regate runs inside `axbgate serve`; use --once for one pass from cron")
    repo = [*(repo_ids or []), *(repo or [])] or None
    from orchestrator.schemas.repos import CheckResultPublic

    if is_remote():
        if wait:
            fail("--wait is for the embedded mode; the server runs the gates")
        ids = repo or [r["id"] for r in remote_call("GET", "/repos")["data"] if r["enabled"]]
        results = [CheckResultPublic.model_validate(remote_call("POST", f"/repos/{i}/check")) for i in ids]
    else:
        results = _embedded_pass(repo or None, wait=wait, timeout_s=timeout_s)
    if as_json:
        echo_json([r.model_dump(mode="json") for r in results])
    else:
        for r in results:
            gate = f" gate {r.gate_id}" if r.gate_id else ""
            typer.echo(clean(f"repository {r.repository_id}: {r.action}{gate} "
                             f"{(r.head_sha or '')[:12]} {r.message}".rstrip()))
    failed = [r.repository_id for r in results if r.action == "check_failed"]
    if failed:
        fail(f"the check of repositories {failed} failed (see above); exit status 1", code=1)


def _embedded_pass(repo_ids: list[int] | None, *, wait: bool, timeout_s: float):
    from orchestrator.domain.errors import AxbgateError
    from orchestrator.runtime.oneshot import run_regate_once

    try:
        return run_regate_once(open_engine(), settings(), repo_ids, wait=wait, timeout_s=timeout_s)
    except AxbgateError as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    """Add ``repo`` and ``regate`` to the ``axbgate`` app."""
    app.add_typer(repo_app, name="repo")
    app.command("regate")(regate_cmd)
