"""docker-compose.yml, its overrides and the Dockerfiles agree with the settings and with
each other (parsed only; tests/integration/test_compose.py runs them for real)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from orchestrator.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def _expand(value: str) -> str:
    """Compose-style ${VAR:-default} / ${VAR:?msg} with no variables set (msg -> 'x')."""
    value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "x", value)


def _load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def test_compose_services_and_settings(monkeypatch):
    compose = _load("docker-compose.yml")
    assert set(compose["services"]) == {"db", "migrate", "api"}
    migrate, api = compose["services"]["migrate"], compose["services"]["api"]
    # Migrations only in the one-shot service; the api waits for it to succeed and never migrates.
    assert migrate["command"] == ["axbgate", "db", "upgrade"] and migrate["restart"] == "no"
    assert migrate["depends_on"]["db"]["condition"] == "service_healthy"
    assert api["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert api["command"][:2] == ["axbgate", "serve"] and "upgrade" not in " ".join(api["command"])
    assert migrate["image"] == api["image"] and migrate["user"] == api["user"]
    mounts = [_expand(v) for v in api["volumes"]]
    assert "/etc/slurm:/etc/slurm:ro" in mounts and "/run/munge:/run/munge" in mounts
    assert "/shared/axbgate/data:/shared/axbgate/data" in mounts
    assert _expand(api["working_dir"]) == "/shared/axbgate/data"
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["db"]["volumes"]
    assert compose["services"]["db"]["build"]["context"] == "docker/db"
    for key in list(os.environ):
        if key.startswith("AXBGATE_"):
            monkeypatch.delenv(key)
    for key, value in api["environment"].items():
        monkeypatch.setenv(key, _expand(str(value)))
    settings = Settings(_env_file=None)
    assert settings.database_url == "postgresql+psycopg://axbgate:x@db:5432/axbgate"
    assert settings.executor.kind == "slurm" and settings.nightly.enabled
    assert str(settings.data_dir) == "/shared/axbgate/data"


def test_overrides_publish_the_port_or_join_the_host_network():
    override = _load("docker-compose.override.yml")["services"]
    assert override == {"api": {"ports": ["${AXBGATE_PORT:-8000}:8000"]}}
    hostnet = _load("docker/compose.hostnet.yml")["services"]
    assert hostnet["api"]["network_mode"] == "host" and "ports" not in hostnet["api"]
    assert _expand(hostnet["db"]["ports"][0]) == "127.0.0.1:5433:5432"
    url = _expand(hostnet["api"]["environment"]["AXBGATE_DATABASE__URL"])
    assert url == "postgresql+psycopg://axbgate:x@127.0.0.1:5433/axbgate"


def test_dockerfiles_build_from_a_base_named_by_an_argument():
    app = (ROOT / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm\n" in app and "FROM ${BASE_IMAGE} AS deps" in app
    assert "git slurm-client" in app and "python3 python3-venv" in app
    assert 'CMD ["axbgate", "serve", "--host", "0.0.0.0", "--port", "8000"]' in app
    db = (ROOT / "docker/db/Dockerfile").read_text()
    assert "ARG BASE_IMAGE=postgres:16-bookworm\nFROM ${BASE_IMAGE}" in db
    entry = (ROOT / "docker/db/entrypoint.sh").read_text()
    assert "exec docker-entrypoint.sh" in entry and "--auth-host=scram-sha-256" in entry
    assert os.access(ROOT / "docker/db/entrypoint.sh", os.X_OK)
    for name in ("Dockerfile", "docker-compose.yml", "docker-compose.override.yml",
                 "docker/compose.hostnet.yml", "docker/db/Dockerfile", "docker/db/entrypoint.sh"):
        assert (ROOT / name).read_text().isascii(), name
