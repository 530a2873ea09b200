"""docker-compose.yml and the Dockerfile agree with the settings (no docker engine in CI)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from orchestrator.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def _expand(value: str) -> str:
    """Compose-style ${VAR:-default} / ${VAR:?msg} with no variables set (msg -> 'x')."""
    value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "x", value)


def test_compose_services_and_settings(monkeypatch):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"db", "api"}
    api = compose["services"]["api"]
    assert api["depends_on"]["db"]["condition"] == "service_healthy"
    assert "axbgate db upgrade && exec axbgate serve" in api["command"][-1]
    mounts = [_expand(v) for v in api["volumes"]]
    assert "/etc/slurm:/etc/slurm:ro" in mounts and "/run/munge:/run/munge" in mounts
    assert any(m.endswith("/data:/shared/axbgate/data") for m in mounts)
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["db"]["volumes"]
    for key in list(__import__("os").environ):
        if key.startswith("AXBGATE_"):
            monkeypatch.delenv(key)
    for key, value in api["environment"].items():
        monkeypatch.setenv(key, _expand(str(value)))
    settings = Settings(_env_file=None)
    assert settings.database_url == "postgresql+psycopg://axbgate:x@db:5432/axbgate"
    assert settings.executor.kind == "slurm" and settings.nightly.enabled
    assert str(settings.data_dir) == "/shared/axbgate/data"


def test_dockerfile_installs_git_and_slurm_client_and_serves():
    text = (ROOT / "Dockerfile").read_text()
    assert "git slurm-client" in text
    assert 'CMD ["axbgate", "serve", "--host", "0.0.0.0", "--port", "8000"]' in text
    assert text.isascii() and (ROOT / "docker-compose.yml").read_text().isascii()
