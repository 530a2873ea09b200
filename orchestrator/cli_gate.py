"""``axbgate gate``: submit a gate, follow it live, print the verdict table.

Embedded mode (no ``AXBGATE_SERVER_URL``): the gate is stored in the local ledger and
this process dispatches it to the executor and polls it until it ends. Remote mode: the
request goes to the server's API and this process watches it over HTTP.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from sqlalchemy.orm import Session

from orchestrator.gate_spec import GateCreate

__all__ = ["build_gate_request", "follow_gate", "follow_gate_remote", "format_pydantic_error"]


def format_pydantic_error(exc: ValidationError) -> str:
    """One line per error: ``field.path: message``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )


def _pairs(option: str, items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{option} takes NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key] = value
    return out


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


def follow_gate(engine, settings, gate_id: int, *, quiet: bool, poll_s: float = 1.0) -> None:
    """Dispatch and poll one gate in this process until it ends, with a progress bar per run.

    Ctrl-C cancels the gate (its job gets SIGTERM) and waits for the driver to stop.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from orchestrator import gates as use_cases
    from orchestrator.db.models import Gate
    from orchestrator.services.gates import dispatch_pass, poll_pass

    dispatch_pass(engine, settings, gate_ids=[gate_id])
    tasks: dict[int, Any] = {}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), disable=quiet, transient=False)
    cancelled = False
    with progress:
        while True:
            try:
                poll_pass(engine, settings, gate_ids=[gate_id])
                with Session(engine) as session:
                    gate = session.get(Gate, gate_id)
                    if gate.status == "queued":  # another local gate holds this machine
                        dispatch_pass(engine, settings, gate_ids=[gate_id])
                    total = gate.num_warmup_steps + gate.num_measured_steps
                    for run in sorted(gate.runs, key=lambda r: r.order):
                        if run.order not in tasks:
                            tasks[run.order] = progress.add_task(
                                f"run {run.order} {run.role}", total=total, info="pending")
                        info = run.status if run.median_step_s is None else (
                            f"{run.status} median {run.median_step_s * 1e3:.3f} ms")
                        progress.update(tasks[run.order], completed=len(run.steps), info=info)
                    if gate.status in ("succeeded", "failed", "cancelled"):
                        break
                time.sleep(poll_s)
            except KeyboardInterrupt:
                if cancelled:
                    raise
                cancelled = True
                with Session(engine) as session:
                    use_cases.cancel_gate(session=session, gate_id=gate_id, reason="cancelled from the CLI (Ctrl-C)")
                    session.commit()
                poll_pass(engine, settings, gate_ids=[gate_id])


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
