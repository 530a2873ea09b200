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


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


for _group in (verdict, logs, admin, gate, ledger, repos):
    _group.register(app)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point.

    Returns:
        The process exit status.
    """
    try:
        # Non-standalone mode returns typer.Exit's code instead of raising it.
        rv = app(args=argv, prog_name="axbgate", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # click's own usage errors
        return int(exc.code or 0)
    except Exception as exc:  # click usage errors raised in non-standalone mode
        try:  # recent typer vendors click as typer._click
            from typer._click import exceptions as click_exceptions
        except ImportError:
            from click import exceptions as click_exceptions

        if isinstance(exc, click_exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click_exceptions.Abort):
            return 130
        raise


if __name__ == "__main__":
    sys.exit(main())
