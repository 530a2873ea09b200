"""Operator verbs: ``health`` (this machine's health gate), ``db`` (migrations), ``serve``
(API, web ledger and services) and ``token`` (API tokens)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.app.cli.common import (
    clean,
    configure_logging,
    echo_json,
    embedded,
    open_engine,
    settings,
)

__all__ = ["register"]

db_app = typer.Typer(help="Ledger database schema (Alembic migrations).", no_args_is_help=True)
token_app = typer.Typer(help="API tokens with scopes (stored as SHA-256; docs/security.md).",
                        no_args_is_help=True)


def health_cmd(ctx: typer.Context) -> None:
    """Run the health gate on this machine or allocation (`axbgate health --help`).

    Options: --criteria FILE|NAME, --json (one JSON object only), --records (add the
    AXBGATE_* record lines), --nproc N, --nodes H0,H1, --node-rank R,
    --job-id ID, --interface IFACE. Exit status 0 healthy/degraded, non-zero failed or hang.
    """
    from health.cli import main as health_main

    raise typer.Exit(health_main(list(ctx.args)))


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Apply migrations up to REVISION (default: newest)."""
    from orchestrator.db.migrate import current_revision, upgrade

    url = settings().database_url
    upgrade(url, revision)
    typer.echo(f"database at revision {current_revision(url)}")


@db_app.command("downgrade")
def db_downgrade(revision: Annotated[str, typer.Argument()]) -> None:
    """Revert migrations down to REVISION ('base' empties the schema)."""
    from orchestrator.db.migrate import current_revision, downgrade

    url = settings().database_url
    downgrade(url, revision)
    typer.echo(f"database at revision {current_revision(url)}")


@db_app.command("current")
def db_current() -> None:
    """Print the revision the database is at."""
    from orchestrator.db.migrate import current_revision, head_revision

    url = settings().database_url
    typer.echo(f"current={current_revision(url)} head={head_revision()}")



def listen_url(host: str, port: int) -> str:
    """The base URL clients reach ``serve`` at: ``http://HOST:PORT``, with a wildcard
    address (``0.0.0.0``, ``::``) replaced by this machine's fully qualified name."""
    import socket

    name = socket.getfqdn() if host in ("0.0.0.0", "::", "") else host
    name = f"[{name}]" if ":" in name else name
    return f"http://{name}:{port}"


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
) -> None:
    """Start the API and the web ledger (uvicorn); the embedded default needs no setup.

    Logs at INFO: service start/stop, dispatcher, poller and nightly scheduler events (gate
    id, state, durations) and the access lines; `axbgate --log-format json serve` writes one
    JSON object per line.

    Example: axbgate --log-format json serve --host 0.0.0.0 --port 8000
    """
    import logging

    import uvicorn

    from orchestrator.app.api import create_app

    current = settings().with_public_url(listen_url(host, port))
    open_engine()  # the database answers and its schema is current, or one clear line
    fmt = (ctx.obj or {}).get("log_format") or current.log_format
    configure_logging(level=logging.INFO, fmt=fmt)
    logging.getLogger("orchestrator.serve").info(
        "axbgate serving http://%s:%d/ledger (API docs at /docs; data dir %s)", host, port,
        current.data_dir,
        extra={"event": "serve.start", "host": host, "port": port})
    uvicorn.run(create_app(current), host=host, port=port, log_level="info", log_config=None)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="Who or what uses the token, e.g. 'ci'; decisions "
                                             "recorded with it carry this name.")],
    scope: Annotated[list[str] | None, typer.Option(
        "--scope", help="read, submit, decide or admin (repeat; default: read, submit, decide).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Create an API token and print its secret once (only its SHA-256 is stored)."""
    from orchestrator.usecases.tokens import DEFAULT_SCOPES, create_token

    scopes = tuple(scope) if scope else DEFAULT_SCOPES
    token, secret = embedded(lambda s: create_token(session=s, name=name, scopes=scopes))
    if as_json:
        echo_json({**token.model_dump(mode="json"), "token": secret})
        return
    typer.echo(clean(f"token {token.id} ({token.name}, scopes {', '.join(token.scopes)}); "
                     "shown once, store it now:"))
    typer.echo(secret)


@token_app.command("list")
def token_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """List tokens (id, name, scopes, created, revoked); never a secret."""
    from orchestrator.usecases.tokens import list_tokens

    rows = embedded(lambda s: list_tokens(session=s))
    if as_json:
        echo_json([r.model_dump(mode="json") for r in rows])
        return
    for r in rows:
        state = f"revoked {r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "active"
        typer.echo(clean(f"{r.id}\t{r.name}\t{','.join(r.scopes)}\t{r.created_at:%Y-%m-%d %H:%M}\t{state}"))


@token_app.command("revoke")
def token_revoke(
    ident: Annotated[str, typer.Argument(help="Token id or name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """Revoke the active token with this id or name."""
    from orchestrator.usecases.tokens import revoke_token

    rows = embedded(lambda s: revoke_token(session=s, ident=ident))
    if as_json:
        echo_json([r.model_dump(mode="json") for r in rows])
        return
    for r in rows:
        typer.echo(clean(f"revoked token {r.id} ({r.name})"))


def register(app: typer.Typer) -> None:
    """Add ``health``, ``db``, ``serve`` and ``token`` to the ``axbgate`` app."""
    app.command(
        "health",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(health_cmd)
    app.add_typer(db_app, name="db")
    app.command("serve")(serve)
    app.add_typer(token_app, name="token")
