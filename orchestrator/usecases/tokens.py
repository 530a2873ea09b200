"""Use cases for API tokens: create, list, revoke, verify.

Tokens are random (:func:`secrets.token_urlsafe`, 32 bytes of entropy); the ledger keeps
only their SHA-256, so a leaked database does not leak usable tokens. Each token carries
scopes (docs/security.md): ``read`` (reads when ``auth.read_open`` is false; every token
may read), ``submit`` (submit, cancel and import gates, check a tracked branch),
``decide`` (record decisions) and ``admin`` (everything, including tracked repositories
and their webhooks).
"""

from __future__ import annotations

import hashlib
import logging
import secrets

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.errors import Conflict, ValidationFailed
from orchestrator.schemas.views import TokenPublic

__all__ = ["DEFAULT_SCOPES", "SCOPES", "create_token", "hash_token", "list_tokens", "revoke_token",
           "token_allows", "verify_token"]

logger = logging.getLogger(__name__)

_TOKEN_BYTES = 32
SCOPES = ("read", "submit", "decide", "admin")
"""Every scope a token may hold."""
DEFAULT_SCOPES = ("read", "submit", "decide")
"""Scopes of a token created without naming any (everything but ``admin``)."""


def token_allows(token: TokenPublic, scope: str) -> bool:
    """True when ``token`` may act in ``scope`` (``admin`` may do everything, every
    token may read)."""
    return scope == "read" or scope in token.scopes or "admin" in token.scopes


def hash_token(secret: str) -> str:
    """Return the hex SHA-256 of a token secret (UTF-8)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_token(*, session: Session, name: str,
                 scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES) -> tuple[TokenPublic, str]:
    """Create an API token.

    Args:
        session: Open session (the caller commits).
        name: Unique name among active tokens, e.g. ``"ci"`` or ``"alice"``; decisions
            recorded with the token carry this name.
        scopes: Any of :data:`SCOPES` (default :data:`DEFAULT_SCOPES`).

    Returns:
        ``(token, secret)``; the secret is shown once and never stored.

    Raises:
        ValidationFailed: The name is empty, longer than 255 characters or holds control
            characters, or a scope is unknown or none is given.
        Conflict: An active token already has that name.
    """
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        raise ValidationFailed("scope", f"unknown scope(s) {', '.join(map(repr, unknown))}; "
                                        f"choose from {', '.join(SCOPES)}")
    if not scopes:
        raise ValidationFailed("scope", f"give at least one scope of {', '.join(SCOPES)}")
    name = name.strip()
    if not name or len(name) > 255 or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        raise ValidationFailed("name", "a token name must be 1-255 characters without control characters")
    if name.isdigit():
        raise ValidationFailed("name", "a token name may not be all digits (ids are)")
    if store.tokens.active_tokens_named(session=session, name=name):
        raise Conflict(f"an active token named {name!r} exists; revoke it first")
    secret = secrets.token_urlsafe(_TOKEN_BYTES)
    ordered = [s for s in SCOPES if s in scopes]
    row = store.tokens.add_token(session=session, name=name, token_sha256=hash_token(secret),
                                 scopes=ordered)
    logger.info("token=%s name=%s scopes=%s created", row.id, name, ",".join(ordered))
    return TokenPublic.model_validate(row), secret


def revoke_token(*, session: Session, ident: str) -> list[TokenPublic]:
    """Revoke the active token with id or name ``ident``.

    Raises:
        NotFound: No active token matches.
    """
    rows = store.tokens.revoke_tokens(session=session, ident=ident.strip())
    for row in rows:
        logger.info("token=%s name=%s revoked", row.id, row.name)
    return [TokenPublic.model_validate(r) for r in rows]


def list_tokens(*, session: Session) -> list[TokenPublic]:
    """Every token (revoked ones too), oldest first; never a secret."""
    return [TokenPublic.model_validate(r) for r in store.tokens.list_tokens(session=session)]


def verify_token(*, session: Session, secret: str) -> TokenPublic | None:
    """Return the active token matching ``secret``, or ``None``."""
    if not secret:
        return None
    row = store.tokens.find_active_token(session=session, token_sha256=hash_token(secret))
    return TokenPublic.model_validate(row) if row is not None else None
