"""The OpenAPI document explains itself: every schema field has a description, request
models carry examples that validate, and every route declares the errors it can answer
with the one shared error body (which real error answers match)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from orchestrator.app.api import create_app
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.schemas.errors import ErrorPublic
from orchestrator.schemas.repos import RepoCreate, RepoUpdate
from orchestrator.schemas.views import CancelRequest, DecisionCreate, VerdictPreviewCreate
from orchestrator.settings import Settings

ERROR_REF = "#/components/schemas/ErrorPublic"


@pytest.fixture
def app(tmp_path):
    return create_app(Settings(data_dir=tmp_path / "data", gates={"enabled": False},
                               nightly={"enabled": False}))


@pytest.fixture
def spec(app):
    return app.openapi()


def test_every_schema_field_has_a_description(spec):
    fields = [(name, prop, body.get("description"))
              for name, schema in spec["components"]["schemas"].items()
              for prop, body in schema.get("properties", {}).items()]
    assert len(fields) > 400
    assert [f"{n}.{p}" for n, p, d in fields if not (d and d.strip())] == []
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # ours replaces it


@pytest.mark.parametrize("model", [GateCreate, DecisionCreate, CancelRequest, VerdictPreviewCreate,
                                   RepoCreate, RepoUpdate])
def test_request_models_carry_examples_that_validate(spec, model):
    examples = spec["components"]["schemas"][model.__name__]["examples"]
    assert examples
    for example in examples:
        model.model_validate(example)


def _responses(spec, method: str, path: str) -> dict:
    return spec["paths"][path][method]["responses"]


def test_routes_declare_their_errors_with_the_shared_body(spec):
    expected = {
        ("post", "/gates"): {"401", "403", "409", "422"},
        ("get", "/gates"): {"401", "422"},
        ("get", "/gates/{gate_id}"): {"401", "404", "422"},
        ("post", "/gates/{gate_id}/cancel"): {"401", "403", "404", "409", "422"},
        ("post", "/gates/{gate_id}/decisions"): {"401", "403", "404", "409", "422"},
        ("delete", "/repos/{repo_id}"): {"401", "403", "404", "409", "422"},
        ("get", "/runs/{run_id}"): {"401", "404", "422"},
    }
    for (method, path), codes in expected.items():
        declared = {c for c in _responses(spec, method, path) if c.startswith("4")}
        assert declared == codes, (method, path, declared)
    num_errors = 0
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for code, body in op["responses"].items():
                if code.startswith("4"):
                    num_errors += 1
                    assert body["content"]["application/json"]["schema"]["$ref"] == ERROR_REF, (path, code)
                    ErrorPublic.model_validate(body["content"]["application/json"]["example"])
                    assert body["description"]
    assert num_errors >= 60


def test_real_error_answers_match_the_declared_body(app):
    with TestClient(app) as client:
        missing = client.get("/gates/999")
        invalid = client.get("/gates", params={"limit": "many"})
        unauthorized = client.post("/gates", json={})
    assert missing.status_code == 404
    assert ErrorPublic.model_validate(missing.json()).detail[0].type == "not_found"
    assert invalid.status_code == 422
    assert ErrorPublic.model_validate(invalid.json()).detail[0].loc == ["query", "limit"]
    assert unauthorized.status_code == 401
    assert ErrorPublic.model_validate(unauthorized.json()).detail[0].loc == []
