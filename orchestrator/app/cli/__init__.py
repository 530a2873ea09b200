"""``axbgate`` command line: one command per verb, thin over the use cases.

Each verb group lives in its own module (``verdict``, ``logs``, ``admin``, ``gate``,
``ledger``, ``repos``) that imports only :mod:`orchestrator.app.cli.common`; this module
builds the Typer app, registers every group and maps errors to exit codes. Every command
that prints results accepts ``--json``. Bad input exits with status 2 and a message naming
the option; a domain error (not found, conflict) exits 2 as well; a failed health gate or
a failed gate exits 1.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.app.cli import admin, gate, ledger, logs, repos, verdict

__all__ = ["app", "main"]

app = typer.Typer(
    name="axbgate",
    help="A/X/B performance gates for GPU training: faster, slower, or noise?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"axbgate {version('axbgate')}")
        except PackageNotFoundError:  # a source tree without an install
            typer.echo("axbgate (not installed)")
        raise typer.Exit(0)


@app.callback(epilog="Examples:\n\n  axbgate gate --repo . --control-ref main --candidate-ref HEAD --recipe ltx2-bench-h200\n\n"
                     "  axbgate ledger --limit 20\n\n  axbgate --log-format json serve --port 8000")
def _root(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
    log_format: Annotated[str | None, typer.Option(
        "--log-format", help="Log lines as 'text' or 'json' (one object per line); default "
                             "AXBGATE_LOG_FORMAT or text.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the axbgate version and exit.")] = False,
) -> None:
    """A/X/B performance gates for GPU training: faster, slower, or noise?"""
    from orchestrator.app.cli.common import configure_logging, fail

    if log_format is not None and log_format not in ("text", "json"):
        fail(f"--log-format must be 'text' or 'json', got {log_format!r}")
    ctx.obj = {"log_format": log_format or _configured_format()}
    configure_logging(level=logging.INFO if verbose else logging.WARNING, fmt=ctx.obj["log_format"])


def _configured_format() -> str:
    """``log_format`` of the settings, ``text`` when the settings do not validate (the
    verb that reads them reports that)."""
    from pydantic import ValidationError

    from orchestrator.settings import get_settings

    try:
        return get_settings().log_format
    except ValidationError:
        return "text"


for _group in (verdict, logs, admin, gate, ledger, repos):
    _group.register(app)


def _crash_file(exc: BaseException) -> Path | None:
    """Write the traceback of an unexpected error under ``<data_dir>/logs`` (or the
    temporary directory when the data directory is unusable); return its path."""
    import datetime as dt
    import os
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"cli-error-{stamp}-{os.getpid()}.log"
    folders = []
    try:
        from orchestrator.settings import get_settings

        folders.append(get_settings().data_dir / "logs")
    except Exception:  # noqa: BLE001, S110 - invalid settings: use the temporary directory
        pass
    folders.append(Path(tempfile.gettempdir()) / "axbgate-logs")
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            return path
        except OSError:
            continue
    return None


def _one_line(exc: BaseException) -> str:
    """A one-line description of an unexpected error (secrets in URLs masked)."""
    from orchestrator.domain.secrets import mask_url, strip_control

    orig = getattr(exc, "orig", None)
    detail = str(orig if orig is not None else exc).strip().splitlines()
    first = detail[0] if detail else ""
    words = [mask_url(w) if "://" in w else w for w in first.split(" ")]
    return strip_control(f"{type(exc).__name__}: {' '.join(words)}" if first else type(exc).__name__)


def _database_hint(exc: BaseException) -> str:
    from sqlalchemy.exc import SQLAlchemyError

    if not isinstance(exc, SQLAlchemyError):
        return ""
    try:
        from orchestrator.domain.secrets import mask_url
        from orchestrator.settings import get_settings

        url = mask_url(get_settings().database_url)
    except Exception:  # noqa: BLE001 - invalid settings say so themselves
        url = "the configured database"
    return f" (database {url}: is it running and reachable? check AXBGATE_DATABASE__URL)"


def _click_exceptions() -> tuple[type[BaseException], ...]:
    """ClickException classes of the click that typer uses (vendored in typer >= 0.16)."""
    found: list[type[BaseException]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(__import__(module, fromlist=["ClickException"]).ClickException)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one clear line for every failure.

    Usage errors exit 2 with click's message; domain and input errors exit 2 through
    :func:`~orchestrator.app.cli.common.fail`; Ctrl-C exits 130; any other error prints
    ``axbgate: error: <type>: <message>`` and the file holding the full traceback, and
    exits 1.

    Returns:
        The process exit status.
    """
    try:
        # Non-standalone mode returns typer.Exit's code instead of raising it.
        rv = app(args=argv, prog_name="axbgate", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        typer.echo("axbgate: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        typer.echo("axbgate: interrupted", err=True)
        return 130
    except SystemExit as exc:  # click's own usage errors, uvicorn's exits
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # noqa: BLE001 - the one place every failure becomes a line
        if isinstance(exc, _click_exceptions()):
            exc.show()
            return getattr(exc, "exit_code", 2)
        path = _crash_file(exc)
        where = f"; full traceback in {path}" if path else ""
        typer.echo(f"axbgate: error: {_one_line(exc)}{_database_hint(exc)}{where}", err=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
