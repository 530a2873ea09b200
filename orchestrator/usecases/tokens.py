"""Use cases for API write tokens: create, revoke, verify.

Tokens are random (:func:`secrets.token_urlsafe`, 32 bytes of entropy); the ledger keeps
only their SHA-256, so a leaked database does not leak usable tokens.
"""

from __future__ import annotations

import hashlib
import logging
import secrets

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.errors import Conflict, ValidationFailed
from orchestrator.schemas.views import TokenPublic

__all__ = ["create_token", "hash_token", "revoke_token", "verify_token"]

logger = logging.getLogger(__name__)

_TOKEN_BYTES = 32


def hash_token(secret: str) -> str:
    """Return the hex SHA-256 of a token secret (UTF-8)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_token(*, session: Session, name: str) -> tuple[TokenPublic, str]:
    """Create a write token.

    Args:
        session: Open session (the caller commits).
        name: Unique name among active tokens, e.g. ``"ci"`` or ``"alice"``.

    Returns:
        ``(token, secret)``; the secret is shown once and never stored.

    Raises:
        ValidationFailed: The name is empty or longer than 255 characters.
        Conflict: An active token already has that name.
    """
    name = name.strip()
    if not name or len(name) > 255 or "\x00" in name:
        raise ValidationFailed("name", "a token name must be 1-255 characters")
    if name.isdigit():
        raise ValidationFailed("name", "a token name may not be all digits (ids are)")
    if store.tokens.active_tokens_named(session=session, name=name):
        raise Conflict(f"an active token named {name!r} exists; revoke it first")
    secret = secrets.token_urlsafe(_TOKEN_BYTES)
    row = store.tokens.add_token(session=session, name=name, token_sha256=hash_token(secret))
    logger.info("token=%s name=%s created", row.id, name)
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


def verify_token(*, session: Session, secret: str) -> TokenPublic | None:
    """Return the active token matching ``secret``, or ``None``."""
    if not secret:
        return None
    row = store.tokens.find_active_token(session=session, token_sha256=hash_token(secret))
    return TokenPublic.model_validate(row) if row is not None else None
