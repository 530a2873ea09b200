"""Property-based run of every operation in the published OpenAPI schema: no input makes
the API answer 5xx (bounded: a few examples per operation, well under a minute)."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from fastapi.testclient import TestClient


@pytest.fixture
def schema_client(app, token, seeded):
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, token


def test_no_5xx_for_any_generated_request(schema_client):
    client, token = schema_client
    schema = schemathesis.openapi.from_dict(client.app.openapi())
    failures: list[str] = []
    num_cases = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        strategy = operation.as_strategy()

        @hypothesis.settings(
            max_examples=25,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(hypothesis.HealthCheck),
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        )
        @hypothesis.given(case=strategy)
        def check(case):
            nonlocal num_cases
            num_cases += 1
            kwargs = case.as_transport_kwargs(base_url="http://testserver")
            headers = dict(kwargs.pop("headers", None) or {})
            headers.setdefault("Authorization", f"Bearer {token}")
            kwargs.pop("base_url", None)
            resp = client.request(headers=headers, **kwargs)
            if resp.status_code >= 500:
                failures.append(f"{case.operation.label}: {resp.status_code} {kwargs} {resp.text[:300]}")

        check()
    assert num_cases > 50
    assert failures == []
