"""FastAPI dependencies: settings, a database session per request, token and scope checks.

A write route declares the scope it needs (``SubmitTokenDep``, ``DecideTokenDep``,
``AdminTokenDep``): no, unknown or revoked token -> 401; a valid token without the scope
-> 403 naming the scope (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from orchestrator.schemas.views import TokenPublic
from orchestrator.settings import Settings
from orchestrator.usecases.tokens import token_allows, verify_token

__all__ = ["AdminTokenDep", "DecideTokenDep", "ReadAccessDep", "SessionDep", "SettingsDep",
           "SubmitTokenDep"]

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


def require_token(
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
    return require_token(session, credentials)


def require_scope(scope: str):
    """A dependency returning the caller's token when it holds ``scope``.

    Raises (from the dependency):
        HTTPException: 401 without a valid token, 403 when the token lacks ``scope``.
    """

    def _check(token: Annotated[TokenPublic, Depends(require_token)]) -> TokenPublic:
        if not token_allows(token, scope):
            raise HTTPException(
                status_code=403,
                detail=f"token {token.name!r} lacks the {scope!r} scope (it has: "
                       f"{', '.join(token.scopes) or 'none'}); create one with "
                       f"`axbgate token create NAME --scope {scope}`",
            )
        return token

    _check.__name__ = f"require_{scope}_scope"
    return _check


SubmitTokenDep = Annotated[TokenPublic, Depends(require_scope("submit"))]
DecideTokenDep = Annotated[TokenPublic, Depends(require_scope("decide"))]
AdminTokenDep = Annotated[TokenPublic, Depends(require_scope("admin"))]
ReadAccessDep = Annotated[TokenPublic | None, Depends(require_read_access)]
