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

__all__ = ["ledger_table", "register"]


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
    """Show one gate: numbers, runs, verdicts, health, decisions.

    Example: axbgate show 12 --json
    """
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
    wide: Annotated[bool, typer.Option("--wide", help="All columns (kind, topology, delta in ms, "
                                                      "eligible; about 150 columns).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List gates newest first: result (verdict, or state while not judged), candidate and
    control commits, delta and drift in percent, decision. Fits 80 columns; --wide shows all.

    Example: axbgate ledger --family attention --limit 20
    """
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

    Console().print(ledger_table(page, wide=wide))


def _result(g) -> str:
    """The verdict of a judged gate, else its state (``running``, ``failed``, ...)."""
    return g.verdict if g.verdict and g.status == "succeeded" else g.status


def ledger_table(page, *, wide: bool = False):
    """The ``axbgate ledger`` table: one line per gate within 80 columns (titles and SHAs
    shortened with an ellipsis, numbers never cut); ``wide`` adds kind, topology, delta in
    ms and baseline eligibility.

    Args:
        page: A ``GateSummariesPublic``.
        wide: All columns (about 150 columns of terminal).

    Returns:
        A ``rich.table.Table``.
    """
    from rich import box
    from rich.table import Table

    table = Table(title=f"ledger ({page.count} gates)", box=box.SIMPLE_HEAD, pad_edge=False,
                  title_justify="left")
    table.add_column("gate", justify="right", no_wrap=True)
    table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=None if wide else 22)
    if wide:
        table.add_column("kind", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("X / A,B", no_wrap=True)
    if wide:
        table.add_column("topology", no_wrap=True)
    table.add_column("delta", justify="right", no_wrap=True)
    table.add_column("drift", justify="right", no_wrap=True)
    table.add_column("decision", no_wrap=True)
    if wide:
        table.add_column("eligible", no_wrap=True)
    for g in page.data:
        delta = "-" if g.delta_pct is None else (
            f"{g.delta_ms:+.3f} ms / {g.delta_pct:+.3f} %" if wide else f"{g.delta_pct:+.2f}%")
        drift = "-" if g.drift_pct is None else (f"{g.drift_pct:.3f} %" if wide else f"{g.drift_pct:.2f}%")
        shas = f"{(g.candidate.sha_short or '?')[:7]}/{(g.control.sha_short or '?')[:7]}"
        row = [str(g.id), rich_text(g.title or "-")]
        row += [g.kind] if wide else []
        row += [_result(g), shas]
        row += [rich_text(g.topology or "-")] if wide else []
        row += [delta, drift, g.decision or "-"]
        row += ["yes" if g.baseline_eligible else "no"] if wide else []
        table.add_row(*row)
    return table


def decide(
    gate_id: Annotated[int, typer.Argument(min=1, help="Gate id.")],
    decision: Annotated[str, typer.Option(help="accept, reject, neutral or rerun.")],
    reason: Annotated[str, typer.Option(help="Why (required when it differs from the verdict).")] = "",
    note: Annotated[str, typer.Option(help="Free text kept with the decision (e.g. on whose "
                                           "behalf); who decided is not chosen here.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Record a decision for a finished gate (append-only history). It is recorded under
    the API token's name (remote mode) or this OS user (embedded mode).

    Example: axbgate decide 12 --decision reject --reason "+3 GiB peak memory"
    """
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
    gate_id: Annotated[int | None, typer.Argument(min=1, help="One gate (default: the ledger).")] = None,
    gate: Annotated[int | None, typer.Option("--gate", min=1, hidden=True,
                                             help="Deprecated: give the gate id as the argument.")] = None,
    tag: Annotated[str | None, typer.Option(help="Gates with this tag.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 100,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the data as JSON.")] = False,
) -> None:
    """Write the ledger (or one gate) as Markdown tables for a pull request or REPORT.md.

    Examples: axbgate report 12 -o GATE.md; axbgate report --tag nightly
    """
    from orchestrator.app.cli.report import gate_markdown, ledger_markdown
    from orchestrator.schemas.views import GateFilters

    if gate is not None:
        typer.echo(f"axbgate: warning: `report --gate {gate}` is deprecated; use `axbgate report {gate}` "
                   "(the id is an argument, as for show, watch and decide)", err=True)
        if gate_id is not None and gate_id != gate:
            fail(f"two gate ids given ({gate_id} and --gate {gate}); give one")
        gate_id = gate
    if gate_id is not None and tag is not None:
        fail("give a gate id or --tag, not both")
    if gate_id is not None:
        view = _gate_view(gate_id)
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
