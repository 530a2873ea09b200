"""``axbgate verdict``: judge run medians offline, no ledger needed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from orchestrator import verdict as verdict_engine
from orchestrator.app.cli.common import echo_json, fail, print_verdict, seconds

__all__ = ["register"]


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
        str, typer.Option(help=f"Verdict policy: {', '.join(verdict_engine.POLICY_NAMES)} "
                               f"(default {verdict_engine.DEFAULT_POLICY_NAME}; drift = the campaign rule).")
    ] = verdict_engine.DEFAULT_POLICY_NAME,
    history: Annotated[
        Path | None, typer.Option(help="Control history: JSON list of control-median lists "
                                       "(seconds) of earlier gates, or {pairs, gate_ids}.")
    ] = None,
    batch: Annotated[
        Path | None, typer.Option(help="JSON lines in, one gate each (pattern, medians_s, kind, "
                                       "policy, params, history, ...): one verdict JSON line out each.")
    ] = None,
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
    """Judge a gate from its run medians (DESIGN.md section 3); no database needed.

    Examples: ``axbgate verdict --a 0.4284 --x 0.4148 --b 0.4265 --policy drift``;
    ``axbgate verdict --pattern 'A A X B' --medians 0.43,0.4284,0.4148,0.4265 --history h.json``;
    ``axbgate verdict --batch gates.jsonl > verdicts.jsonl``.
    """
    if batch is not None:
        _judge_batch(batch)
        return
    if pattern is not None or medians is not None:
        if pattern is None or medians is None:
            fail("--pattern and --medians go together")
        if any(v is not None for v in (a, x, b)):
            fail("give either --a/--x/--b or --pattern/--medians, not both")
        roles = pattern.replace(",", " ").split()
        values = [m for m in medians.split(",") if m.strip()]
        if len(roles) != len(values):
            fail(f"--pattern has {len(roles)} runs but --medians has {len(values)} values")
        for i, role in enumerate(roles):
            if role not in ("A", "X", "B"):
                fail(f"--pattern run {i} is {role!r}; each run must be A, X or B")
        runs = [(r, seconds(f"--medians[{i}]", v.strip())) for i, (r, v) in enumerate(zip(roles, values))]
    else:
        for name, value in (("--a", a), ("--x", x), ("--b", b)):
            if value is None:
                fail(f"{name} is required (run median in seconds)")
        runs = [("A", seconds("--a", a)), ("X", seconds("--x", x)), ("B", seconds("--b", b))]
    if kind not in ("candidate", "regate"):
        fail(f"--kind must be candidate or regate, got {kind!r}")
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
        fail(f"--mfu-numerator must be a positive number, got {mfu_numerator}")
    pairs = _read_history(history) if history is not None else None
    try:
        result = verdict_engine.judge_policies(
            [verdict_engine.RunSummary(role=role, order=i, median_step_s=value)
             for i, (role, value) in enumerate(runs)],
            kind=kind,
            policy=policy,
            params=params,
            others=False,
            history=pairs,
            mfu_numerator_pct_s=mfu_numerator,
            control_local_batch_size=control_local_batch,
            control_grad_accum_steps=control_grad_accum,
            candidate_local_batch_size=candidate_local_batch,
            candidate_grad_accum_steps=candidate_grad_accum,
        )[0]
    except ValueError as exc:
        fail(str(exc))
    out = result.to_dict()
    bad = [k for k, v in out.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        fail(f"the medians are too extreme to compare ({', '.join(sorted(bad))} not finite); "
              "give run medians in seconds")
    if as_json:
        echo_json(out)
        return
    print_verdict(out)


def _read_history(path: Path):
    """The control history in ``path`` (a JSON list of lists, or ``{"pairs", "gate_ids"}``)."""
    import json

    from orchestrator.verdict.offline import verdict_from_json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        fail(f"--history {path}: {exc}")
    try:  # validated by the same reader as --batch lines
        verdict_from_json({"pattern": "AXB", "medians_s": [1.0, 1.0, 1.0], "policy": "drift",
                           "history": data})
    except ValueError as exc:
        fail(f"--history {path}: {exc}")
    pairs = data.get("pairs", []) if isinstance(data, dict) else data
    return verdict_engine.history_from_pairs(pairs)


def _judge_batch(path: Path) -> None:
    """One verdict JSON line per input line; a bad line answers an error object, exit 2."""
    import json
    import sys

    from orchestrator.verdict.offline import verdict_from_json

    bad = 0
    try:
        handle = sys.stdin if str(path) == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        fail(f"--batch {path}: {exc}")
    with handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                out = verdict_from_json(json.loads(line))
                typer.echo(json.dumps(out, sort_keys=True, allow_nan=False, default=str))
            except (ValueError, TypeError, RecursionError) as exc:
                bad += 1
                typer.echo(json.dumps({"line": line_no, "error": str(exc)[:500]}))
    if bad:
        typer.echo(f"axbgate: error: {bad} line(s) of {path} could not be judged", err=True)
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Add ``verdict`` to the ``axbgate`` app."""
    app.command("verdict")(verdict_cmd)
