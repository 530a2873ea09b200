"""Ledger verbs of the ``axbgate`` CLI: show, ledger, decide, report.

Embedded mode calls the use cases on the configured database; when ``server_url`` is set
the same verbs talk to that server over HTTP (writes send ``api_token``).
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.app.cli.common import (
    clean,
    echo_json,
    embedded,
    fail,
    is_remote,
    remote_call,
    rich_text,
)

__all__ = ["register"]

def _gate_view(gate_id: int):
    from orchestrator.schemas.views import GateViewPublic
    from orchestrator.usecases import views

    if is_remote():
        return GateViewPublic.model_validate(remote_call("GET", f"/gates/{gate_id}"))
    return embedded(lambda s: views.get_gate_view(session=s, gate_id=gate_id))


def _ledger_page(filters):
    from orchestrator.schemas.views import GateSummariesPublic
    from orchestrator.usecases import views

    if is_remote():
        params = filters.model_dump(exclude_none=True, mode="json")
        return GateSummariesPublic.model_validate(remote_call("GET", "/gates", params=params))
    return embedded(lambda s: views.list_gates(session=s, filters=filters))


def _stopping_points():
    from orchestrator.schemas.views import StoppingPointsPublic
    from orchestrator.usecases import views

    if is_remote():
        return StoppingPointsPublic.model_validate(remote_call("GET", "/stopping-points")).data
    return embedded(lambda s: views.stopping_points(session=s)).data


def show(
    gate_id: Annotated[int, typer.Argument(min=1, help="Gate id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show one gate: numbers, runs, verdicts, health, decisions."""
    from orchestrator.app.cli.report import gate_markdown

    view = _gate_view(gate_id)
    if as_json:
        echo_json(view.model_dump(mode="json"))
        return
    typer.echo(clean(gate_markdown(view)))


def ledger(
    status: Annotated[str | None, typer.Option(help="Gate status.")] = None,
    verdict: Annotated[str | None, typer.Option(help="Timing verdict.")] = None,
    decision: Annotated[str | None, typer.Option(help="Effective decision.")] = None,
    kind: Annotated[str | None, typer.Option(help="candidate, regate or bisect.")] = None,
    tag: Annotated[str | None, typer.Option(help="Tag.")] = None,
    family: Annotated[str | None, typer.Option(help="Family.")] = None,
    topology: Annotated[str | None, typer.Option(help="Allocation topology.")] = None,
    recipe: Annotated[str | None, typer.Option(help="Recipe name.")] = None,
    eligible: Annotated[
        bool | None, typer.Option("--eligible/--not-eligible", help="Baseline-eligible only.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    skip: Annotated[int, typer.Option(min=0)] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List gates newest first with numbers, verdict and decision."""
    from pydantic import ValidationError

    from orchestrator.schemas.views import GateFilters

    try:
        filters = GateFilters(
            status=status, verdict=verdict, decision=decision, kind=kind, tag=tag, family=family,
            topology=topology, recipe=recipe, baseline_eligible=eligible, limit=limit, skip=skip,
        )
    except ValidationError as exc:
        fail("; ".join(f"--{e['loc'][0]}: {e['msg']}" for e in exc.errors()))
    page = _ledger_page(filters)
    if as_json:
        echo_json(page.model_dump(mode="json"))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ledger ({page.count} gates)")
    for col in ("gate", "title", "kind", "status", "X vs A/B", "topology", "delta", "drift",
                "verdict", "decision", "eligible"):
        table.add_column(col)
    for g in page.data:
        table.add_row(
            str(g.id), rich_text(g.title), g.kind, g.status,
            f"{g.candidate.sha_short or '?'} vs {g.control.sha_short or '?'}",
            rich_text(g.topology or "-"),
            "-" if g.delta_pct is None else f"{g.delta_ms:+.3f} ms / {g.delta_pct:+.3f} %",
            "-" if g.drift_pct is None else f"{g.drift_pct:.3f} %",
            g.verdict or "-", g.decision or "-", "yes" if g.baseline_eligible else "no",
        )
    Console().print(table)


def decide(
    gate_id: Annotated[int, typer.Argument(min=1, help="Gate id.")],
    decision: Annotated[str, typer.Option(help="accept, reject, neutral or rerun.")],
    reason: Annotated[str, typer.Option(help="Why (required when it differs from the verdict).")] = "",
    note: Annotated[str, typer.Option(help="Free text kept with the decision (e.g. on whose "
                                           "behalf); who decided is not chosen here.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Record a decision for a finished gate (append-only history). It is recorded under
    the API token's name (remote mode) or this OS user (embedded mode)."""
    from orchestrator.schemas.views import DecisionPublic
    from orchestrator.usecases import gates

    if is_remote():
        body = {"decision": decision, "reason": reason, "note": note}
        out = DecisionPublic.model_validate(
            remote_call("POST", f"/gates/{gate_id}/decisions", json=body)
        )
    else:
        who = getpass.getuser()
        out = embedded(
            lambda s: DecisionPublic.model_validate(
                gates.record_decision(
                    session=s, gate_id=gate_id, decided_by=who, decision=decision, reason=reason,
                    note=note,
                )
            )
        )
    if as_json:
        echo_json(out.model_dump(mode="json"))
        return
    typer.echo(clean(f"gate {gate_id}: decision {out.decision} by {out.decided_by} recorded"))


def report(
    gate: Annotated[int | None, typer.Option("--gate", min=1, help="One gate.")] = None,
    tag: Annotated[str | None, typer.Option(help="Gates with this tag.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 100,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the data as JSON.")] = False,
) -> None:
    """Write the ledger (or one gate) as Markdown tables for a pull request or REPORT.md."""
    from orchestrator.app.cli.report import gate_markdown, ledger_markdown
    from orchestrator.schemas.views import GateFilters

    if gate is not None and tag is not None:
        fail("give --gate or --tag, not both")
    if gate is not None:
        view = _gate_view(gate)
        data: Any = view.model_dump(mode="json")
        text = gate_markdown(view)
    else:
        page = _ledger_page(GateFilters(tag=tag, limit=limit))
        points = _stopping_points()
        data = {"gates": page.model_dump(mode="json"), "stopping_points": [p.model_dump(mode="json") for p in points]}
        text = ledger_markdown(page.data, points, title=f"Ledger: tag {tag}" if tag else "Ledger")
    if as_json:
        echo_json(data)
        return
    text = clean(text)
    if output is not None:
        output.write_text(text)
        typer.echo(clean(f"wrote {output}"), err=True)
        return
    typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    """Add ``show``, ``ledger``, ``decide`` and ``report`` to the ``axbgate`` app."""
    app.command("show")(show)
    app.command("ledger")(ledger)
    app.command("decide")(decide)
    app.command("report")(report)
