"""What every ``axbgate`` verb module shares: settings, the ledger engine, the HTTP client
of remote mode, and the one place where errors become exit codes.

Verb modules import this module and nothing else of the CLI; ``__init__`` imports the verb
modules and registers their commands, so no import runs upward (STYLE.md section 4).
Exit codes: 2 for bad input or a domain error (not found, conflict), 1 for a gate or
health gate that failed.
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

import typer
from pydantic import ValidationError

from orchestrator.app.logsetup import configure_logging

__all__ = [
    "clean",
    "configure_logging",
    "echo_json",
    "embedded",
    "fail",
    "format_pydantic_error",
    "is_remote",
    "open_engine",
    "pairs",
    "print_verdict",
    "remote_call",
    "rich_text",
    "seconds",
    "settings",
]


def clean(text: Any) -> str:
    """``text`` without terminal control characters (ANSI escapes, C0 except tab and
    newline, C1) and with URL credentials masked (``user:***@``, ``?token=***``): every
    user-supplied string printed on a terminal goes through this."""
    from orchestrator.domain.secrets import mask_text, strip_control

    return mask_text(strip_control(text))


def rich_text(text: Any) -> str:
    """``text`` cleaned of control characters and with Rich markup escaped (table cells)."""
    from rich.markup import escape

    return escape(clean(text))


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``axbgate: error: MESSAGE`` on stderr and exit with ``code``."""
    typer.echo(f"axbgate: error: {clean(message)}", err=True)
    raise typer.Exit(code)


def seconds(option: str, raw: str) -> float:
    """Parse a run median given on the command line, in seconds (exits 2 when invalid)."""
    try:
        value = float(raw)
    except ValueError:
        fail(f"{option} must be a number of seconds, got {raw!r}")
    if not math.isfinite(value) or value <= 0:
        fail(f"{option} must be a positive finite number of seconds, got {raw!r}")
    return value


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (NaN refused: every number we print is finite), with
    URL credentials masked in every string (:func:`orchestrator.domain.secrets.mask_urls_deep`)."""
    from orchestrator.domain.secrets import mask_urls_deep

    typer.echo(json.dumps(mask_urls_deep(obj), indent=2, sort_keys=True, allow_nan=False, default=str))


def format_pydantic_error(exc: ValidationError) -> str:
    """One clause per error: ``field.path: message``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )


def pairs(option: str, items: list[str]) -> dict[str, str]:
    """``["A=1", "B=2"]`` -> ``{"A": "1", "B": "2"}``; exits 2 on an item without ``=``."""
    out = {}
    for item in items:
        if "=" not in item:
            fail(f"{option} takes NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key] = value
    return out


def settings():
    """The process settings; invalid ``AXBGATE_*`` values exit 2 naming the variable."""
    from orchestrator.domain.secrets import configure_masking
    from orchestrator.settings import get_settings

    try:
        current = get_settings()
        configure_masking(current.security.secret_patterns)
        return current
    except ValidationError as exc:
        errors = "; ".join(
            f"AXBGATE_{'__'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        fail(f"invalid settings: {errors}")


def open_engine():
    """The ledger engine, its schema brought to the newest revision (embedded mode)."""
    from sqlalchemy.exc import SQLAlchemyError

    from orchestrator.db.migrate import ensure_schema
    from orchestrator.db.session import get_engine

    current = settings()
    try:
        ensure_schema(current.database_url)
    except RuntimeError as exc:
        fail(str(exc))
    except SQLAlchemyError as exc:
        first = str(exc.orig if getattr(exc, "orig", None) else exc).splitlines()[0]
        from orchestrator.domain.secrets import mask_url

        fail(f"cannot open the ledger database {mask_url(current.database_url)}: {first} "
             "(check AXBGATE_DATABASE__URL, or AXBGATE_DATA_DIR for the embedded SQLite file)")
    except OSError as exc:
        fail(f"cannot create the ledger under {current.data_dir}: {exc} (set AXBGATE_DATA_DIR "
             "to a writable folder)")
    return get_engine(current.database_url, current.database.echo)


def is_remote() -> bool:
    """True when ``AXBGATE_SERVER_URL`` points the verbs at a server."""
    return bool(settings().server_url)


def remote_call(method: str, path: str, **kwargs: Any) -> Any:
    """Call the configured server (writes send ``api_token``).

    Returns:
        The response JSON, or ``None`` for an empty (204) answer.

    Exits 2 with the server's message on a 4xx/5xx answer or when it cannot be reached.
    """
    import httpx

    current = settings()
    headers = {"Authorization": f"Bearer {current.api_token}"} if current.api_token else {}
    try:
        resp = httpx.request(method, current.server_url.rstrip("/") + path, headers=headers,
                             timeout=30, **kwargs)
    except httpx.HTTPError as exc:
        fail(f"cannot reach {current.server_url}: {exc}")
    if resp.status_code >= 400:
        try:
            body = resp.json()["detail"]
            detail = body if isinstance(body, str) else "; ".join(
                (f"{'.'.join(str(p) for p in d.get('loc') or [])}: " if d.get("loc") else "")
                + str(d.get("msg"))
                for d in body
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            detail = resp.text[:500]
        fail(f"server answered {resp.status_code}: {detail}")
    if resp.status_code == 204 or not resp.content:
        return None
    return resp.json()


def embedded(fn):
    """Run ``fn(session)`` in one committed transaction on the ledger; domain errors exit 2."""
    from orchestrator.db.session import session_scope
    from orchestrator.domain.errors import AxbgateError

    engine = open_engine()
    try:
        with session_scope(engine) as session:
            return fn(session)
    except AxbgateError as exc:
        fail(str(exc))


def print_verdict(out: dict[str, Any]) -> None:
    """Print one verdict's numbers (``Verdict.to_dict()``) as a two-column table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"verdict ({out['policy']} v{out['policy_version']})", show_header=False)
    rows = [
        ("control midpoint", f"{out['midpoint_s']:.9f} s"),
        ("drift", f"{out['drift_pct']:.6f} %"),
        ("delta", f"{out['delta_ms']:+.6f} ms / {out['delta_pct']:+.6f} %"),
    ]
    if out.get("threshold_pct"):
        rows.append(("acts beyond +/-", f"{out['threshold_pct']:.6f} %"))
    if out.get("mfu_points") is not None:
        rows.append(("MFU control / candidate",
                     f"{out['mfu_control_pct']:.3f} % / {out['mfu_candidate_pct']:.3f} %"))
        rows.append(("MFU points", f"{out['mfu_points']:+.3f}"))
    for key in ("ci_low_pct", "ci_high_pct", "mde_pct"):
        if out.get(key) is not None:
            rows.append((key, f"{out[key]:+.4f} %"))
    if out.get("calibration"):
        rows.append(("calibration", f"{out['calibration']}: {out.get('num_gate_control_pairs', 0)} "
                                    f"control pairs of this gate, {out.get('num_history_pairs', 0)} from "
                                    f"{out.get('num_history_gates', 0)} earlier gates"))
    rows.append(("timing verdict", str(out["verdict"]).upper()))
    if out.get("reason"):
        rows.append(("reason", rich_text(out["reason"])))
    for key, value in rows:
        table.add_row(key, value)
    Console().print(table)
