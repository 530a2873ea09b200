"""FastAPI dependencies: settings, a database session per request, token checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from orchestrator.schemas.views import TokenPublic
from orchestrator.settings import Settings
from orchestrator.usecases.tokens import verify_token

__all__ = ["ReadAccessDep", "SessionDep", "SettingsDep", "WriteTokenDep"]

_bearer = HTTPBearer(auto_error=False, description="API token from `axbgate token create`.")


def get_app_settings(request: Request) -> Settings:
    """Return the settings the app was built with."""
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """Yield a session for one request; routes commit, anything else is rolled back."""
    session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
SessionDep = Annotated[Session, Depends(get_session)]


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status_code=401, detail=message, headers={"WWW-Authenticate": "Bearer"})


def require_write_token(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TokenPublic:
    """Return the caller's token, or answer 401.

    Raises:
        HTTPException: 401 when the bearer token is missing, unknown or revoked.
    """
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized("this endpoint needs 'Authorization: Bearer <token>'")
    token = verify_token(session=session, secret=credentials.credentials)
    if token is None:
        raise _unauthorized("unknown or revoked token")
    return token


def require_read_access(
    settings: SettingsDep,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TokenPublic | None:
    """Allow reads when ``auth.read_open`` is set; otherwise require a valid token.

    Raises:
        HTTPException: 401 when reads are closed and no valid token was sent.
    """
    if settings.auth.read_open:
        return None
    return require_write_token(session, credentials)


WriteTokenDep = Annotated[TokenPublic, Depends(require_write_token)]
ReadAccessDep = Annotated[TokenPublic | None, Depends(require_read_access)]
