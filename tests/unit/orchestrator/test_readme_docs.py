"""README is short and its pointers resolve; the documented ``POST /gates`` body is a valid
request of the real API model (issue 25)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_readme_is_short_and_keeps_its_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    assert "```\nbash scripts/demo.sh\n```" in text and "```\nbash scripts/test.sh\n```" in text
    assert ".venv/bin/axbgate" in text
    assert "DESIGN.md" not in text  # the repository's copy is docs/design.md


def test_every_docs_link_of_the_readme_resolves_and_each_appears_once():
    text = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)", text)
    assert {"docs/verdicts.md", "docs/server.md", "docs/security.md", "docs/deployment.md",
            "docs/multi-node.md", "docs/integrations.md", "docs/design.md"} <= set(links)
    for link in links:
        assert (REPO / link).is_file(), f"README links {link}, which does not exist"
    assert len(links) == len(set(links)), "each docs page is linked once"


def test_post_gates_example_body_is_a_valid_gate_request():
    from orchestrator.domain.gate_spec import GateCreate

    text = (REPO / "docs" / "server.md").read_text()
    body = json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))
    gate = GateCreate.model_validate(body)
    assert gate.workload.recipe == "tiny" and gate.candidate.env == {"NCCL_ALGO": "Ring"}
    assert gate.run_pattern == "A A X B"  # the sequential default the docs describe


def test_post_gates_example_body_is_accepted_by_the_api(tmp_path):
    from fastapi.testclient import TestClient

    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import Settings
    from orchestrator.usecases.tokens import SCOPES, create_token

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    app = create_app(Settings(data_dir=tmp_path / "data", database={"url": url},
                              gates={"enabled": False}, nightly={"enabled": False}))
    body = json.loads(re.search(r"```json\n(.*?)```",
                                (REPO / "docs" / "server.md").read_text(), re.S).group(1))
    with TestClient(app) as client:
        session = app.state.session_factory()
        _row, secret = create_token(session=session, name="docs", scopes=SCOPES)
        session.commit()
        resp = client.post("/gates", json=body, headers={"Authorization": f"Bearer {secret}"})
    assert resp.status_code == 201, resp.text
    assert resp.json()["title"] == "NCCL ring all-reduce" and resp.json()["status"] == "queued"
