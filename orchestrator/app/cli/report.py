"""Markdown reports of the ledger or one gate, ready to paste into a pull request."""

from __future__ import annotations

import math
from typing import Any

from orchestrator.schemas.views import GateSummaryPublic, GateViewPublic, StoppingPointPublic

__all__ = ["allocation_line", "gate_markdown", "ledger_markdown", "measurement_line"]


def _f(value: Any, spec: str, scale: float = 1.0, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{format(value * scale, spec)}{suffix}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _side(s) -> str:
    sha = s.sha_short or "?"
    return sha + (" " + " ".join(f"`{o}`" for o in s.overrides) if s.overrides else "")


def _summary_rows(gates: list[GateSummaryPublic]) -> list[list[Any]]:
    return [
        [
            f"#{g.id}",
            g.title or "(untitled)",
            ", ".join(g.tags),
            g.kind,
            _side(g.control),
            _side(g.candidate),
            g.topology or "-",
            _f(g.midpoint_s, ".3f", 1000.0, " ms"),
            f"{_f(g.delta_ms, '+.3f', 1.0, ' ms')} ({_f(g.delta_pct, '+.3f', 1.0, ' %')})",
            _f(g.drift_pct, ".3f", 1.0, " %"),
            _f(g.mfu_points, "+.2f"),
            g.verdict or "-",
            (g.decision or "-") + ("" if g.decision_recorded or not g.decision else " (verdict)"),
            "yes" if g.baseline_eligible else "no",
        ]
        for g in gates
    ]


_SUMMARY_HEADER = [
    "gate", "title", "tags", "kind", "control", "candidate", "topology", "midpoint",
    "delta", "drift", "MFU pts", "timing verdict", "decision", "eligible",
]


def ledger_markdown(
    gates: list[GateSummaryPublic], points: list[StoppingPointPublic], *, title: str = "Ledger"
) -> str:
    """Render ledger rows and the stopping-point table as Markdown.

    Args:
        gates: Ledger rows, newest first.
        points: Stopping points.
        title: Heading text.

    Returns:
        Markdown text ending in a newline.
    """
    out = [f"## {title}", ""]
    if points:
        out += ["### Stopping points", ""]
        out.append(
            _table(
                ["topology", "recipe", "best candidate median", "gate", "candidate", "accepted gates"],
                [
                    [p.topology, p.recipe, _f(p.candidate_s, ".3f", 1000.0, " ms"),
                     f"#{p.gate.id} {p.gate.title}", p.gate.candidate.sha_short or "-", p.num_accepted]
                    for p in points
                ],
            )
        )
        out.append("")
    out += ["### Gates", "", _table(_SUMMARY_HEADER, _summary_rows(gates)), ""]
    out.append(
        "Delta = median(X) - (median(A) + median(B)) / 2; drift = |A - B| / midpoint; "
        "MFU points = MFU(X) - MFU(midpoint)."
    )
    return "\n".join(out) + "\n"


def _interval(numbers: dict[str, Any]) -> str:
    """The delta's confidence interval in percent, ``[low, high] %``, or ``-``."""
    low, high = numbers.get("ci_low_pct"), numbers.get("ci_high_pct")
    if low is None or high is None:
        return "-"
    return f"[{_f(low, '+.3f')}, {_f(high, '+.3f')}] %"


def _disagreement(verdicts) -> str:
    """A warning line when the policies of one gate reach different verdicts, else ``""``
    (the text of :func:`~orchestrator.usecases.verdict_briefs.disagreement_text`)."""
    from orchestrator.usecases.verdict_briefs import disagreement_text

    text = disagreement_text(verdicts)
    return text.replace("Policies disagree", "**Policies disagree**", 1) if text else ""


def measurement_line(gate) -> str:
    """``measurement: <the gate's rule in words>; runs: 6 of at most 14`` for a gate
    (``GatePublic`` or ``GateViewPublic``), from its stored rule and run budget."""
    from orchestrator.usecases.run_plan import measurement_rule, run_budget

    rule = measurement_rule(num_warmup_steps=gate.num_warmup_steps,
                            num_measured_steps=gate.num_measured_steps, options=gate.options)
    budget = run_budget(policy=gate.policy, policy_params=gate.policy_params, kind=gate.kind,
                        run_pattern=gate.run_pattern, num_runs=len(gate.runs),
                        max_extend=int((gate.options or {}).get("max_extend") or 0))
    runs = f"{budget.num_runs_planned} runs"
    if budget.max_runs > budget.num_runs_planned:
        runs += f" (at most {budget.max_runs})"
    counts = sorted({(r.num_warmup_steps, r.num_measured_steps) for r in gate.runs
                     if r.num_measured_steps})
    measured = ""
    if counts:
        measured = "; measured " + ", ".join(f"{w}+{m}" for w, m in counts) + " steps (warmup+measured)"
    return f"measurement: {rule.describe()}; {runs}{measured}"


_HEALTH_MEANS = {
    "healthy": "results baseline-eligible",
    "degraded": "runs allowed, results not baseline-eligible",
    "failed": "no runs",
}


def allocation_line(allocation, *, executor: str | None = None, job_ref: str | None = None) -> str:
    """``allocation: slurm job 113 on 2 nodes (n1, n2), health degraded (runs allowed, ...)``.

    Args:
        allocation: An ``AllocationPublic`` or None (the gate never started).
        executor: The gate's executor, when there is no allocation yet.
        job_ref: The gate's scheduler job id (or local controller pid).
    """
    if allocation is None:
        if job_ref:
            return f"allocation: {executor or 'job'} job {job_ref} (no health reading yet)"
        return "allocation: none yet"
    job = allocation.scheduler_job_id or job_ref or "-"
    hosts = [str(h) for h in allocation.hostnames or []]
    shown = ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
    nodes = f"{allocation.num_nodes} node{'s' if allocation.num_nodes != 1 else ''}"
    where = f"{nodes} ({shown})" if shown else nodes
    topology = f", {allocation.topology}" if allocation.topology else ""
    verdict = allocation.health_verdict or "unknown"
    means = f" ({_HEALTH_MEANS[verdict]})" if verdict in _HEALTH_MEANS else ""
    return (f"allocation: {allocation.executor} job {job} on {where}{topology}, health "
            f"{verdict}{means}")


def semantic_lines(view: GateViewPublic) -> list[str]:
    """The semantic verdict next to the timing verdict: status, reason, floor, findings."""
    sem = view.semantic_verdict
    if sem is None:
        return []
    n = sem.numbers
    out = [f"**Semantics:** {sem.status}. {n.get('reason', '')}"]
    floor = n.get("floor") or {}
    if floor:
        out.append(
            f"- control floor (A vs B): {'bitwise equal' if floor.get('deterministic') else 'not bitwise equal'}; "
            f"loss {_f(floor.get('loss_rel'), '.3g')}, grad norm {_f(floor.get('grad_norm_rel'), '.3g')} "
            f"(relative, over {floor.get('num_steps_compared', '-')} steps); tolerance loss "
            f"{_f(floor.get('loss_tolerance_rel'), '.3g')}, grad norm {_f(floor.get('grad_norm_tolerance_rel'), '.3g')}"
            + (f"; probe at step {floor['probe_step']}: {floor.get('probe_tensors')} tensors"
               if floor.get("probe_compared") else ""))
    batch = n.get("batch") or {}
    if batch:
        out.append(f"- samples per step: control {batch.get('control', {}).get('samples_per_step')}, "
                   f"candidate {batch.get('candidate', {}).get('samples_per_step')}"
                   + (" (batch change declared: timing compared per sample)" if batch.get("declared") else ""))
    for finding in (n.get("findings") or [])[:10]:
        where = f" at step {finding['step']}" if finding.get("step") is not None else ""
        out.append(f"- {finding.get('kind')}: {finding.get('quantity')}{where}: control "
                   f"{finding.get('control')}, candidate {finding.get('candidate')}")
    return out + [""]


def design_lines(gate) -> list[str]:
    """What the sequential policy did with the run order: seed, planned pattern, runs left
    out and measured again, two-state fit, split guard (from the primary verdict)."""
    out = []
    if getattr(gate, "design_seed", None) is not None:
        out.append(f"run order: mirrored blocks, design seed {gate.design_seed}, planned "
                   f"`{gate.planned_pattern or '-'}`")
    primary = next((v for v in gate.verdicts if v.is_primary), None)
    numbers = (primary.numbers or {}) if primary is not None else {}
    for reason in numbers.get("excluded_reasons") or []:
        out.append(f"outlier left out and measured again: {reason}")
    if numbers.get("two_state_fit"):
        out.append("runs fell into two states: the state is a covariate of the fit")
    if numbers.get("split_guard_held"):
        out.append("an accept/reject was held back: the split could have been two run states")
    if numbers.get("early_look"):
        out.append("decided at the early look a consistent history opens")
    return out


def window_line(report: dict) -> str | None:
    """The cost model's window of the gate (``status.json`` ``window``), or None."""
    w = (report or {}).get("window") or {}
    if w.get("source") != "cost-model":
        return None
    return (f"window: {w['measured_steps']} steps chosen by the cost model after run "
            f"{w['calibration_run']} (fixed cost {w['fixed_s']:.1f} s/run, step "
            f"{w['step_s'] * 1e3:.1f} ms, expected run sigma {w['run_sigma'] * 100:.3f} %, "
            f"{w['runs_per_decision']:.1f} runs per decision, ~{w['expected_gpu_s']:.0f} "
            f"GPU-s of runs)")


def gate_markdown(view: GateViewPublic) -> str:
    """Render one gate (medians, deltas, drift, MFU, verdicts, hashes) as Markdown."""
    g, s = view, view.summary
    out = [f"## Gate #{g.id}: {g.title or '(untitled)'}", ""]
    out.append(
        f"{g.kind}, pattern `{g.run_pattern}`, topology {s.topology or '-'}, "
        f"{'baseline-eligible' if s.baseline_eligible else 'not baseline-eligible'}."
    )
    out += ["", f"- control (A, B): {_side(s.control)}", f"- candidate (X): {_side(s.candidate)}"]
    out.append(f"- {measurement_line(g)}")
    out.append(f"- {allocation_line(view.allocation, executor=g.executor, job_ref=g.job_ref)}")
    out += [f"- {line}" for line in design_lines(g)]
    out.append(f"- status: **{g.status}**" + (f" ({g.status_reason})" if g.status_reason else ""))
    out.append("")
    out.append(
        _table(
            ["run", "role", "status", "source", "median", "MFU", "peak allocated", "error"],
            [
                [r.order, r.role, r.status, (r.source_sha or "-")[:10],
                 _f(r.median_step_s, ".3f", 1000.0, " ms"), _f(r.mfu_pct, ".2f", 1.0, " %"),
                 _f(r.peak_allocated_bytes, ".2f", 1 / 2**30, " GiB"), r.error or ""]
                for r in view.runs
            ],
        )
    )
    out.append("")
    out.append(_table(
        ["policy", "verdict", "midpoint", "delta", "interval", "drift", "threshold", "MFU pts", "reason"],
        [[v.policy + (" (primary)" if v.is_primary else ""), v.verdict,
          _f(v.numbers.get("midpoint_s"), ".3f", 1000.0, " ms"),
          f"{_f(v.numbers.get('delta_ms'), '+.3f', 1.0, ' ms')} "
          f"({_f(v.numbers.get('delta_pct'), '+.3f', 1.0, ' %')})",
          _interval(v.numbers), _f(v.numbers.get("drift_pct"), ".3f", 1.0, " %"),
          _f(v.numbers.get("threshold_pct"), ".3f", 1.0, " %"), _f(v.numbers.get("mfu_points"), "+.2f"),
          v.numbers.get("reason") or ""]
         for v in sorted(g.verdicts, key=lambda v: not v.is_primary)],
    ))
    out.append("")
    disagreement = _disagreement(g.verdicts)
    if disagreement:
        out += [disagreement, ""]
    out += semantic_lines(view)
    decision = s.decision or "-"
    basis = " (timing verdict and semantics)" if view.semantic_verdict else " (timing verdict)"
    out.append(f"**Decision:** {decision}" + ("" if s.decision_recorded else basis))
    for d in view.decisions:
        out.append(f"- {d.created_at:%Y-%m-%d %H:%M} {d.decided_by}: {d.decision}. {d.reason}"
                   + (f" (note: {d.note})" if d.note else ""))
    if view.artifacts:
        # Name runs by their position in the pattern (the run table's #), not row ids.
        label = {r.id: f"{r.order} ({r.role})" for r in view.runs}
        out += ["", _table(["artifact", "run", "sha256", "bytes"],
                           [[a.kind, label.get(a.run_id, "-"), f"`{a.sha256}`", a.size_bytes]
                            for a in view.artifacts])]
    return "\n".join(out) + "\n"
