"""Fixtures of the API tests (shared with integration/)."""

from tests.api_fixtures import api_settings, app, auth, client, db_session, seeded, token  # noqa: F401
