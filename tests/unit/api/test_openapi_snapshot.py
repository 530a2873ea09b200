"""The published OpenAPI schema is a contract: a change must update the snapshot on purpose
(``AXBGATE_TEST_UPDATE_SNAPSHOT=1 pytest tests/unit/api/test_openapi_snapshot.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

SNAPSHOT = Path(__file__).parent / "openapi_snapshot.json"


def test_openapi_matches_snapshot(tmp_path):
    from orchestrator.app.api import create_app
    from orchestrator.settings import Settings

    schema = create_app(Settings(data_dir=tmp_path)).openapi()
    text = json.dumps(schema, indent=1, sort_keys=True) + "\n"
    if os.environ.get("AXBGATE_TEST_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(text)
    assert SNAPSHOT.read_text() == text, "OpenAPI changed; review and update the snapshot"
    assert set(schema["paths"]) >= {
        "/gates", "/gates/{gate_id}", "/gates/{gate_id}/cancel", "/gates/{gate_id}/decisions",
        "/runs/{run_id}", "/runs/{run_id}/log", "/runs/import", "/allocations/{allocation_id}",
        "/stopping-points", "/verdicts/preview", "/healthz", "/readyz",
    }
