"""API tokens: only the SHA-256 of a token is stored."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from orchestrator.db.base import utcnow
from orchestrator.db.models import ApiToken
from orchestrator.domain.errors import NotFound

__all__ = ["active_tokens_named", "add_token", "find_active_token", "list_tokens", "revoke_tokens"]


def add_token(*, session: Session, name: str, token_sha256: str, scopes: list[str]) -> ApiToken:
    """Insert a token row.

    Args:
        session: Open session.
        name: Human name of the token (who or what uses it).
        token_sha256: Hex SHA-256 of the secret.
        scopes: What the token may do.

    Returns:
        The flushed :class:`ApiToken`.
    """
    row = ApiToken(name=name, token_sha256=token_sha256, scopes=list(scopes))
    session.add(row)
    session.flush()
    return row


def active_tokens_named(*, session: Session, name: str) -> list[ApiToken]:
    """Return the tokens called ``name`` that are not revoked."""
    return list(
        session.scalars(
            select(ApiToken).where(ApiToken.name == name, ApiToken.revoked_at.is_(None))
        )
    )


def find_active_token(*, session: Session, token_sha256: str) -> ApiToken | None:
    """Return the unrevoked token with this hash, or ``None``."""
    return session.scalars(
        select(ApiToken).where(
            ApiToken.token_sha256 == token_sha256, ApiToken.revoked_at.is_(None)
        )
    ).first()


def list_tokens(*, session: Session) -> list[ApiToken]:
    """Return every token row, oldest first."""
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_tokens(*, session: Session, ident: str) -> list[ApiToken]:
    """Revoke the active token(s) whose id or name is ``ident``.

    Args:
        session: Open session.
        ident: A decimal token id or a token name.

    Returns:
        The revoked rows.

    Raises:
        NotFound: No active token has that id or name.
    """
    cond = ApiToken.name == ident
    if ident.isdigit() and len(ident) < 19:
        cond = or_(cond, ApiToken.id == int(ident))
    rows = list(session.scalars(select(ApiToken).where(cond, ApiToken.revoked_at.is_(None))))
    if not rows:
        raise NotFound("token", ident)
    now = utcnow()
    for row in rows:
        row.revoked_at = now
    session.flush()
    return rows
