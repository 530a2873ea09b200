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
)
from orchestrator.domain.decisions import DECISIONS

__all__ = ["ledger_columns", "ledger_table", "register"]


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
    control commits, delta and drift in percent, decision. At a narrow terminal (80 columns,
    or piped) the columns that do not fit are left out, least wanted first; gate id, result
    and delta always show in full. --wide adds kind, topology, delta in ms and eligibility,
    never cut when piped.

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

    width = _stdout_width(wide)
    table = ledger_table(page, wide=wide, width=width)
    Console(width=width or 100_000).print(table)


def _result(g) -> str:
    """The verdict of a judged gate, else its state (``running``, ``failed``, ...)."""
    return g.verdict if g.verdict and g.status == "succeeded" else g.status


_COLUMN_ORDER = ("gate", "title", "kind", "result", "X / A,B", "topology", "delta", "drift",
                 "decision", "eligible")
"""Display order of the ledger's columns."""
_KEPT = ("gate", "result", "delta")
"""Never dropped nor cut: which gate, what it said, by how much."""
_PRIORITY = ("drift", "decision", "X / A,B", "title", "kind", "topology", "eligible")
"""The other columns, most wanted first: at a narrow terminal the last ones go first."""
_MIN_TITLE = 8
"""The title is shortened with an ellipsis down to this many characters before it is dropped."""
_GAP = 3
"""Characters between two columns (``box.SIMPLE_HEAD``: padding 1, divider, padding 1; no edge)."""


def _cells(page, wide: bool) -> dict[str, list[str]]:
    """Every column's text per gate (the short forms unless ``wide``)."""
    cols: dict[str, list[str]] = {name: [] for name in _COLUMN_ORDER}
    for g in page.data:
        delta = "-" if g.delta_pct is None else (
            f"{g.delta_ms:+.3f} ms / {g.delta_pct:+.3f} %" if wide else f"{g.delta_pct:+.2f}%")
        drift = "-" if g.drift_pct is None else (f"{g.drift_pct:.3f} %" if wide else f"{g.drift_pct:.2f}%")
        cols["gate"].append(str(g.id))
        cols["title"].append(clean(g.title or "-"))
        cols["kind"].append(g.kind)
        cols["result"].append(_result(g))
        cols["X / A,B"].append(f"{(g.candidate.sha_short or '?')[:7]}/{(g.control.sha_short or '?')[:7]}")
        cols["topology"].append(clean(g.topology or "-"))
        cols["delta"].append(delta)
        cols["drift"].append(drift)
        cols["decision"].append(g.decision or "-")
        cols["eligible"].append("yes" if g.baseline_eligible else "no")
    return cols


def ledger_columns(page, *, wide: bool = False, width: int | None = 80) -> dict[str, int]:
    """The columns of the ``axbgate ledger`` table that fit ``width`` characters, with the
    width each one gets.

    Gate id, result and delta are always shown in full; then drift, decision, the commits
    and the title (shortened with an ellipsis down to 8 characters) as long as they fit;
    ``wide`` adds kind, topology and eligibility and long forms of delta and drift.

    Args:
        page: A ``GateSummariesPublic``.
        wide: Every column, in its long form.
        width: Terminal columns; None for no limit (every column of the mode, in full).

    Returns:
        Column name -> width in characters, in display order.
    """
    cells = _cells(page, wide)
    natural = {name: max([len(name), *(len(c) for c in cells[name])]) for name in _COLUMN_ORDER}
    wanted = [n for n in _PRIORITY if wide or n not in ("kind", "topology", "eligible")]
    chosen = {name: natural[name] for name in _KEPT}
    if width is None:
        chosen.update({name: natural[name] for name in wanted})
    else:
        def used(cols: dict[str, int]) -> int:
            return sum(cols.values()) + _GAP * (len(cols) - 1)

        for name in wanted:
            room = width - used(chosen) - _GAP
            if natural[name] <= room:
                chosen[name] = natural[name]
            elif name == "title" and room >= _MIN_TITLE:
                chosen[name] = room
    return {name: chosen[name] for name in _COLUMN_ORDER if name in chosen}


def ledger_table(page, *, wide: bool = False, width: int | None = 80):
    """The ``axbgate ledger`` table: one line per gate within ``width`` columns; the columns
    are those of :func:`ledger_columns` (ids, result and delta never cut).

    Args:
        page: A ``GateSummariesPublic``.
        wide: All columns (kind, topology, delta in ms, eligibility).
        width: Terminal columns; None for no limit.

    Returns:
        A ``rich.table.Table``.
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    columns = ledger_columns(page, wide=wide, width=width)
    cells = _cells(page, wide)
    shown = [name for name in columns if name != "title" or columns[name] > 0]
    hidden = len([n for n in _COLUMN_ORDER if n not in shown
                  and (wide or n not in ("kind", "topology", "eligible"))])
    title = f"ledger ({page.count} gates)"
    if hidden:
        title += (f"; {hidden} column{'s' if hidden > 1 else ''} left out at {width} columns "
                  "(a wider terminal shows more)")
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  title_justify="left")
    for name in shown:
        table.add_column(name, justify="right" if name in ("gate", "delta", "drift") else "left",
                         no_wrap=True, overflow="ellipsis" if name == "title" else "fold",
                         min_width=columns[name], max_width=columns[name])
    for i in range(len(page.data)):
        table.add_row(*[escape(cells[name][i]) for name in shown])
    return table


def _stdout_width(wide: bool) -> int | None:
    """Columns to fit: the terminal's (or ``COLUMNS``, 80 when piped); None (no limit) for
    ``--wide`` output that is not a terminal."""
    from rich.console import Console

    console = Console()
    if wide and not console.is_terminal:
        return None
    return console.width


def decide(
    gate_id: Annotated[int, typer.Argument(min=1, help="Gate id.")],
    decision: Annotated[str, typer.Option(help=f"One of {', '.join(DECISIONS)}.")],
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
