"""API fixtures (imported by the integration and browser conftests): an app per database backend,
a TestClient, a write token, seed data."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def api_settings(db_url, tmp_path):
    """Settings pointing at the migrated ``db_url`` and a fresh data directory."""
    from orchestrator.settings import Settings

    # No dispatcher/poller/scheduler: API tests look at the ledger, they do not run gates.
    return Settings(data_dir=tmp_path / "data", database={"url": db_url}, gates={"enabled": False},
                    nightly={"enabled": False})


@pytest.fixture
def app(api_settings):
    """The application under test."""
    from orchestrator.app.api import create_app

    return create_app(api_settings)


@pytest.fixture
def client(app):
    """A TestClient with the lifespan running."""
    with TestClient(app) as c:
        yield c


@pytest.fixture
def db_session(app):
    """A session on the app's database (commit to make rows visible to the API)."""
    session = app.state.session_factory()
    yield session
    session.rollback()
    session.close()


@pytest.fixture
def token(db_session) -> str:
    """A valid token secret named ``tester`` holding every scope (read, submit, decide, admin)."""
    from orchestrator.usecases.tokens import SCOPES, create_token

    _row, secret = create_token(session=db_session, name="tester", scopes=SCOPES)
    db_session.commit()
    return secret


@pytest.fixture
def auth(token) -> dict[str, str]:
    """Authorization header with the write token."""
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def seeded(db_session, api_settings) -> dict[str, int]:
    """The small ledger of :func:`tests.ledger_factories.seed_ledger`, committed."""
    from tests.ledger_factories import seed_ledger

    ids = seed_ledger(db_session, api_settings.artifacts_dir)
    db_session.commit()
    return ids
