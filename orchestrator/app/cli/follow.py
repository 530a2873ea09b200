"""Following a gate live (progress bar per run) and printing its final table, for the
``gate`` and ``watch`` verbs, in embedded and remote mode."""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Any

from orchestrator.app.cli.common import print_verdict, rich_text, settings

__all__ = ["follow_gate", "follow_gate_remote", "live_info", "print_gate", "track_run"]

_ENDED = ("succeeded", "failed", "cancelled", "skipped")


def track_run(progress, tasks: dict[int, Any], *, order: int, role: str | None, status: str,
              total: int, completed: int, info: str) -> None:
    """Show one run's progress bar; its clock runs only while the run runs.

    A run's task is added stopped (``pending``), started when the run is first seen past
    pending, and stopped when it ends, so the elapsed column is that run's own time, not
    the time since the gate started.

    Args:
        progress: A ``rich.progress.Progress``.
        tasks: Task id per run order (updated here).
        order: The run's position in the pattern.
        role: ``A``, ``X`` or ``B``.
        status: The run's state.
        total: Steps the run is asked for (warmup plus measured).
        completed: Step records seen so far.
        info: Text shown after the bar.
    """
    if order not in tasks:
        tasks[order] = progress.add_task(f"run {order} {role}", total=total, info="pending", start=False)
    task_id = tasks[order]
    task = next(t for t in progress.tasks if t.id == task_id)
    if status != "pending" and task.start_time is None:
        progress.start_task(task_id)
    if status in _ENDED and task.stop_time is None and task.start_time is not None:
        progress.stop_task(task_id)
    progress.update(task_id, completed=completed, info=info)


def live_info(run, state) -> str:
    """Text after one run's bar: its state, its place in the run budget while it runs (``run
    5 of 6 planned, at most 14``), the ETA of the gate, and its median once measured.

    Args:
        run: A ``RunLivePublic``.
        state: The gate's ``GateLivePublic``.
    """
    if run.median_step_s is not None:
        return f"{run.status} median {run.median_step_s * 1e3:.3f} ms"
    if run.status != "running":
        return run.status
    text = f"running ({run.position})" if run.position else "running"
    if run.num_steps_expected_max and run.num_steps_expected_max > run.num_steps_expected:
        text += f", {run.num_steps_expected}-{run.num_steps_expected_max} steps"
    if state.eta_s is not None:
        text += f", ETA {state.eta_s:.0f} s"
        if state.eta_max_s is not None and state.eta_max_s > state.eta_s + 0.5:
            text += f" (at most {state.eta_max_s:.0f} s with {state.max_runs} runs)"
    return text


_CANCEL_WAIT_S = 60.0
"""How long Ctrl-C waits for the driver to stop so the steps its run printed are kept."""


class _Signalled(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP reached the CLI: the followed gate is cancelled."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.name = signal.Signals(signum).name


def _raise_signalled(signum: int, _frame: Any) -> None:
    raise _Signalled(signum)


_CANCELLING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Installed explicitly: a non-interactive shell starts a background job with SIGINT
ignored, and Python then leaves it ignored, so ``kill -INT`` would do nothing."""


@contextlib.contextmanager
def cancel_on_signals():
    """Within the block, SIGINT (Ctrl-C or ``kill -INT``, even when the CLI was started with
    SIGINT ignored), SIGTERM and SIGHUP raise :class:`_Signalled` (a KeyboardInterrupt), so a
    key press, ``kill``, a closed terminal or a batch system's stop cancel a followed gate
    alike; the previous handlers come back afterwards."""
    previous = {sig: signal.signal(sig, _raise_signalled) for sig in _CANCELLING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _how(exc: KeyboardInterrupt) -> str:
    """``Ctrl-C (SIGINT)``, ``SIGTERM`` or ``SIGHUP``: what stopped the CLI, for the reason."""
    name = exc.name if isinstance(exc, _Signalled) else "SIGINT"
    return "Ctrl-C (SIGINT)" if name == "SIGINT" else name


def _cancelled_steps_kept(current, gate_id: int, cancelled_at: float) -> bool:
    """True once the poller stored the steps of the cancelled gate's runs after its driver
    stopped (or after :data:`_CANCEL_WAIT_S`, when a later pass will)."""
    from orchestrator.executors.plan import GatePaths

    marker = GatePaths.of(current.data_dir, gate_id).steps_collected
    return marker.exists() or time.monotonic() - cancelled_at > _CANCEL_WAIT_S


def follow_gate(engine, current, gate_id: int, *, quiet: bool, poll_s: float = 1.0) -> None:
    """Dispatch and poll one gate in this process until it ends, with a progress bar per run.

    Ctrl-C, SIGTERM and SIGHUP cancel the gate (its job gets SIGTERM) and wait for the
    driver to stop, so the steps its run printed until then are stored.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from orchestrator.db.session import session_scope
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases import gates as use_cases
    from orchestrator.usecases.live import gate_live

    dispatch_pass(engine, current, gate_ids=[gate_id])
    tasks: dict[int, Any] = {}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), disable=quiet, transient=False)
    cancelled, cancelled_at = False, 0.0
    with progress, cancel_on_signals():
        while True:
            try:
                poll_pass(engine, current, gate_ids=[gate_id])
                with session_scope(engine) as session:
                    state = gate_live(session=session, gate_id=gate_id, max_steps=5000,
                                      data_dir=current.data_dir)
                if state.status == "queued":  # another local gate holds this machine
                    dispatch_pass(engine, current, gate_ids=[gate_id])
                for run in state.runs:
                    track_run(progress, tasks, order=run.order, role=run.role, status=run.status,
                              total=run.num_steps_expected, completed=run.num_steps,
                              info=live_info(run, state))
                if state.status in ("succeeded", "failed", "cancelled") and (
                        not cancelled or _cancelled_steps_kept(current, gate_id, cancelled_at)):
                    break
                time.sleep(poll_s)
            except KeyboardInterrupt as exc:
                if cancelled:
                    raise
                cancelled, cancelled_at = True, time.monotonic()
                how = _how(exc)
                with session_scope(engine) as session:
                    use_cases.cancel_gate(session=session, gate_id=gate_id,
                                          reason=f"cancelled from the CLI ({how})")
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

    from orchestrator.schemas.live import GateLivePublic

    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), disable=quiet)
    tasks: dict[int, Any] = {}
    cancelled = False
    with progress, cancel_on_signals():
        while True:
            try:
                view = call("GET", f"/gates/{gate_id}")
                # the gate page's live JSON: step counts under the gate's measurement rule
                state = GateLivePublic.model_validate(call("GET", f"/ledger/gates/{gate_id}/live"))
                for run in state.runs:
                    track_run(progress, tasks, order=run.order, role=run.role, status=run.status,
                              total=run.num_steps_expected, completed=run.num_steps,
                              info=live_info(run, state))
                if view["status"] in ("succeeded", "failed", "cancelled"):
                    return view
                time.sleep(poll_s)
            except KeyboardInterrupt as exc:
                if cancelled:
                    raise
                cancelled = True
                how = _how(exc)
                call("POST", f"/gates/{gate_id}/cancel", json={"reason": f"cancelled from the CLI ({how})"})


def print_gate(gate, report: dict[str, Any], ledger: str | None = None, allocation=None) -> None:
    """Print a gate's final summary: runs, measurement rule and run budget, allocation (job
    id, nodes, health verdict), verdicts and how they disagree, wall time and where its
    ledger and logs are.

    Args:
        gate: A ``GatePublic``.
        report: ``gates.gate_overhead`` (``{}`` when not known).
        ledger: The ledger's database URL (shown masked), or None.
        allocation: The gate's ``AllocationPublic``, or None.
    """
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"gate {gate.id}: {rich_text(gate.title or gate.run_pattern)} [{gate.status}]")
    for col in ("run", "role", "status", "median ms", "MFU %", "warmup+measured", "error"):
        table.add_column(col)
    for run in gate.runs:
        table.add_row(str(run.order), run.role or "-", run.status,
                      f"{run.median_step_s * 1e3:.3f}" if run.median_step_s else "-",
                      f"{run.mfu_pct:.2f}" if run.mfu_pct is not None else "-",
                      f"{run.num_warmup_steps}+{run.num_measured_steps}" if run.num_measured_steps
                      else str(len(run.slowest_rank_step_s)),
                      rich_text((run.error or "")[:60]))
    console.print(table)
    from orchestrator.app.cli.report import (
        allocation_line,
        design_lines,
        measurement_line,
        window_line,
    )

    console.print(rich_text(measurement_line(gate)))
    console.print(rich_text(allocation_line(allocation, executor=gate.executor,
                                            job_ref=gate.job_ref)))
    for line in design_lines(gate):
        console.print(rich_text(line))
    if (wl := window_line(report)) is not None:
        console.print(rich_text(wl))
    if gate.status_reason:
        console.print(f"reason: {rich_text(gate.status_reason)}")
    for run in gate.runs:
        if run.status == "failed" and ledger is not None:
            print_log_tail(console, ledger, gate.id, run)
    primary = None
    for v in sorted(gate.verdicts, key=lambda v: not v.is_primary):
        print_verdict(v.numbers)
        if v.is_primary:
            primary = v
    from orchestrator.usecases.verdict_briefs import disagreement_text

    if text := disagreement_text(gate.verdicts):
        console.print(f"[bold yellow]{rich_text(text)}[/]")
    if primary is not None:
        from orchestrator.verdict import plain_sentence

        console.print(plain_sentence(primary.numbers))
    if gate.semantic_verdicts:
        sem = gate.semantic_verdicts[-1]
        console.print(rich_text(f"semantics: {sem.status}: {sem.numbers.get('reason', '')}"))
        console.print(rich_text(f"decision: {sem.decision or '-'} (timing {sem.timing_verdict or '-'} "
                                f"with semantics {sem.status})"))
    if report.get("allocation_wall_s"):
        print_wall_time(console, report)
    if ledger:
        from orchestrator.domain.secrets import mask_url

        console.print(rich_text(f"ledger: {mask_url(ledger)} (gate {gate.id}); logs: "
                                f"{report.get('gate_dir', '')}"))


def print_log_tail(console, ledger: str, gate_id: int, run, num_lines: int = 12) -> None:
    """Show where a failed run's raw log is and its last lines."""
    from orchestrator.executors.plan import GatePaths

    path = GatePaths.of(settings().data_dir, gate_id).run_log(run.order, run.role or "X")
    if not path.exists():
        return
    lines = path.read_text(errors="replace").splitlines()[-num_lines:]
    console.print(rich_text(f"run {run.order} ({run.role}) log {path}, last {len(lines)} lines:"))
    for line in lines:
        console.print("  " + rich_text(line[:200]))


def print_wall_time(console, report: dict[str, Any]) -> None:
    """Where the allocation's wall time went, its cost and the precision it bought."""
    wall = report["allocation_wall_s"]
    console.print(
        f"allocation wall {wall:.1f} s over {report.get('num_runs', 0)} runs: measured steps "
        f"{report['measured_s']:.1f} s, warmup {report.get('warmup_s', 0.0):.1f} s, per-run "
        f"launch+teardown {report.get('fixed_s', 0.0):.1f} s, health {report['health_s']:.1f} s, "
        f"other {report.get('other_s', 0.0):.1f} s; not measuring: {report['overhead_pct']:.1f} %")
    if report.get("accelerator_s"):
        console.print(f"cost: {report['accelerator_s']:.0f} GPU-seconds "
                      f"({report['num_gpus']} GPUs x {wall:.1f} s) for this decision")
    precision = report.get("median_precision_pct") or {}
    if precision:
        spread = ", ".join(f"run {order}: +/-{pct:.3f} %" for order, pct in sorted(
            (int(k), v) for k, v in precision.items()) if pct is not None)
        console.print(f"run-median precision from its measured steps (95% order-statistic "
                      f"interval): {spread}")
