"""Service settings: one pydantic-settings tree, prefix ``AXBGATE_``.

Nested models per subsystem, as in Prefect's ``settings/models``. Environment variables
use ``__`` between levels: ``AXBGATE_DATABASE__URL``, ``AXBGATE_EXECUTOR__KIND``.
A ``.env`` file in the working directory is read too. Nothing else in the code base
reads ``os.environ`` for configuration; everything goes through :func:`get_settings`.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

logger = logging.getLogger(__name__)

__all__ = [
    "AuthSettings",
    "DatabaseSettings",
    "ExecutorSettings",
    "GateServiceSettings",
    "LimitSettings",
    "NightlySettings",
    "SecuritySettings",
    "Settings",
    "get_settings",
]


def _default_data_dir() -> Path:
    """Return ``$XDG_DATA_HOME/axbgate`` (``~/.local/share/axbgate`` when unset)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "axbgate"


class DatabaseSettings(BaseModel):
    """Where the ledger lives."""

    url: str | None = None
    """SQLAlchemy URL. ``None`` means the embedded SQLite file ``<data_dir>/axbgate.db``.
    PostgreSQL example: ``postgresql+psycopg://postgres@127.0.0.1:5432/axbgate``."""

    echo: bool = False
    """Log every SQL statement (debugging only)."""

    @field_validator("url")
    @classmethod
    def _known_driver(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("sqlite", "postgresql")):
            raise ValueError(
                "database.url must be a sqlite:/// or postgresql+psycopg:// URL "
                f"(got {value.split(':', 1)[0]!r})"
            )
        return value


class ExecutorSettings(BaseModel):
    """Defaults for where gates run."""

    kind: Literal["local", "slurm", "debug"] = "local"
    """Executor used when a gate does not name one."""

    slurm_partition: str | None = None
    """Default Slurm partition (``--partition``)."""

    slurm_account: str | None = None
    """Default Slurm account (``--account``)."""

    time_limit_min: int = Field(default=60, ge=2)
    """Default allocation time limit in minutes. At least 2: submitit asks for a warning
    signal 90 s before the limit, so shorter limits fail early (shared/SLURM_CI.md)."""


class GateServiceSettings(BaseModel):
    """Dispatcher and poller inside ``axbgate serve``."""

    enabled: bool = True
    """Submit queued gates and ingest running ones from the server process."""

    loop_seconds: float = Field(default=2.0, gt=0)
    """Seconds between two passes of the dispatcher and of the poller."""


class NightlySettings(BaseModel):
    """Nightly re-gate scheduler (``orchestrator.runtime.nightly``)."""

    enabled: bool = True
    """Run the scheduler inside ``axbgate serve``."""

    loop_seconds: float = Field(default=60.0, gt=0)
    """Seconds between two housekeeping passes: renew the scheduler lease, sync the
    APScheduler jobs with the tracked repositories, process finished re-gates and
    bisection steps, deliver due webhooks."""

    interval_seconds: float | None = Field(default=None, gt=0)
    """Time-compressed trigger: when set, every tracked repository is checked every this
    many seconds instead of at its cron schedule (tests, demos)."""

    lease_seconds: float = Field(default=180.0, gt=0)
    """How long the scheduler lease lasts without renewal, seconds. Another process takes
    over the scheduler only after the holder missed renewing it for this long."""

    webhook_max_attempts: int = Field(default=5, ge=1, le=20)
    """POST attempts per webhook delivery before it is marked failed."""

    webhook_backoff_seconds: float = Field(default=30.0, gt=0)
    """Delay before the second attempt, seconds; doubled after every failed attempt."""

    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    """HTTP timeout of one webhook POST, seconds."""

    max_attempts: int = Field(default=2, ge=1, le=10)
    """Re-gates of the same (measured head, new head) pair before the scheduler gives up
    (a re-gate that produced no verdict is retried at the next check, then alerted)."""

    public_url: str | None = None
    """Base URL of the web ledger used for links in notifications, e.g.
    ``https://axbgate.example.org``. Unset: ``axbgate serve`` uses the address it listens
    on and ``POST /repos/{id}/check`` the base URL of the request; links stay relative
    only for ``axbgate regate --once`` without it."""

    @model_validator(mode="after")
    def _lease_outlives_loop(self) -> "NightlySettings":
        if self.lease_seconds <= 2 * self.loop_seconds:
            raise ValueError(
                f"nightly.lease_seconds ({self.lease_seconds:g}) must exceed twice "
                f"nightly.loop_seconds ({self.loop_seconds:g}), or the lease expires between renewals"
            )
        return self


class AuthSettings(BaseModel):
    """API authentication (docs/security.md)."""

    read_open: bool = True
    """Read endpoints and pages need no token when true; when false every read needs a
    valid token of any scope (``AXBGATE_AUTH__READ_OPEN=false``)."""


DEFAULT_SECRET_PATTERNS = (
    "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*PASSPHRASE*", "*_KEY", "*_KEY_*", "KEY_*",
    "*APIKEY*", "*CREDENTIAL*", "*PRIVATE*", "*DATABASE_URL*", "*DATABASE__URL*", "*DSN*",
    "*COOKIE*", "*AUTH*",
)
"""Environment-variable names treated as secrets (shell globs, case-insensitive). ``*_KEY``
rather than ``*KEY*`` so that NCCL's ``NCCL_IB_PKEY`` is not taken for one."""

DEFAULT_RUN_ENV_ALLOW = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE",
    "LC_*", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_*", "NCCL_*", "TORCH_*", "PYTORCH_*", "TORCHINDUCTOR_*",
    "TRITON_*", "NVIDIA_*", "NVSHMEM_*", "GLOO_*", "UCX_*", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "SLURM_*", "SLURMD_*", "PMI*", "PMIX_*", "OMPI_*", "HWLOC_*", "VIRTUAL_ENV", "CONDA_PREFIX",
    "SUBMITIT_*",
)
"""Variables of the server's environment a run inherits (shell globs, case-sensitive)."""


class SecuritySettings(BaseModel):
    """Least privilege: what a run inherits, which names are secrets, which files and
    webhook targets requests may name (docs/security.md)."""

    secret_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_PATTERNS))
    """Environment-variable names (globs, case-insensitive) whose values are masked
    wherever they are shown (API, pages, CLI, reports, provenance) and never inherited by
    a run from the server's environment."""

    run_env_allow: list[str] = Field(default_factory=lambda: list(DEFAULT_RUN_ENV_ALLOW))
    """Server variables (globs) a run starts with; everything else of the server's
    environment is dropped before the allocation job is submitted. Names matching
    ``secret_patterns`` are dropped even when allowed here (use ``run_env_passthrough``)."""

    run_env_passthrough: list[str] = Field(default_factory=list)
    """Exact names of server variables passed to every run even when they look secret,
    e.g. ``["WANDB_API_KEY"]``: an explicit decision of the operator."""

    secret_refs: list[str] = Field(default_factory=list)
    """Exact names of server variables a gate may reference as ``secret://NAME`` in its
    env; the value is injected at launch on the allocation and never stored."""

    run_as_user: str | None = None
    """Local executor: run every step (health gate, runs) as this unprivileged account
    (needs a root server; ``subprocess`` drops to its uid, gid and groups)."""

    files_dir: Path | None = None
    """Directory whose ``.toml`` files requests may name as ``workload.recipe`` or
    ``health.criteria`` (besides shipped names); ``None``: shipped names only over the API."""

    webhook_allow_private: bool = False
    """Allow webhook targets on private, loopback, link-local, unspecified or multicast
    addresses (refused by default, at registration and at delivery)."""

    @field_validator("run_env_passthrough", "secret_refs")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        import re

        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment-variable name")
            if name.upper().startswith("AXBGATE_"):
                raise ValueError(f"{name}: the service's own AXBGATE_* settings never reach a run")
        return value

    @field_validator("run_as_user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        import pwd

        try:
            entry = pwd.getpwnam(value)
        except KeyError:
            raise ValueError(f"run_as_user {value!r} is not an account on this machine") from None
        if entry.pw_uid == 0:
            raise ValueError("run_as_user must be an unprivileged account, not uid 0")
        return value


class LimitSettings(BaseModel):
    """Sizes of what the API accepts (record-line bounds are in docs/record-contract.md)."""

    max_body_bytes: int = Field(default=1 << 20, ge=1024, le=1 << 30)
    """Largest request body of every route except the log import, bytes (default 1 MiB):
    ``POST /verdicts/preview`` (unauthenticated), ``POST /gates``, ... A larger body is
    refused with 413 before it is read."""

    max_import_bytes: int = Field(default=512 << 20, ge=1024, le=1 << 40)
    """Largest log ``POST /runs/import`` accepts, bytes (default 512 MiB). The upload is
    streamed to a temporary file, never held in memory; a larger one answers 413."""


class Settings(BaseSettings):
    """All axbgate settings. Build through :func:`get_settings`, never at import time."""

    model_config = SettingsConfigDict(
        env_prefix="AXBGATE_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="forbid",
    )

    data_dir: Path = Field(default_factory=_default_data_dir)
    """Directory holding the embedded SQLite ledger and run artifacts (logs)."""

    server_url: str | None = None
    """When set, the CLI talks to this axbgate server over HTTP instead of the embedded
    database, e.g. ``http://127.0.0.1:8000``."""

    api_token: str | None = None
    """Bearer token the CLI sends for writes in remote mode."""

    log_format: Literal["text", "json"] = "text"
    """Log lines on stderr: ``text`` (time, level, logger, message) or ``json`` (one object
    per line with ``event``, ``gate_id``, ``state``, ``duration_s`` where the code names
    them); ``axbgate --log-format`` overrides it."""

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    gates: GateServiceSettings = Field(default_factory=GateServiceSettings)
    nightly: NightlySettings = Field(default_factory=NightlySettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir_not_empty(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("data_dir is empty: unset AXBGATE_DATA_DIR or give a folder")
        return value

    @model_validator(mode="after")
    def _absolute_data_dir(self) -> "Settings":
        self.data_dir = self.data_dir.expanduser().resolve()
        return self

    def with_public_url(self, base_url: str) -> "Settings":
        """These settings, with ``nightly.public_url`` set to ``base_url`` when unset
        (absolute links in notifications); unchanged when it is set."""
        if self.nightly.public_url:
            return self
        nightly = self.nightly.model_copy(update={"public_url": base_url.rstrip("/")})
        return self.model_copy(update={"nightly": nightly})

    @property
    def database_url(self) -> str:
        """The effective SQLAlchemy URL (embedded SQLite file when none is configured)."""
        if self.database.url:
            return self.database.url
        return f"sqlite:///{self.data_dir / 'axbgate.db'}"

    @property
    def artifacts_dir(self) -> Path:
        """Directory where raw logs and exports are kept (``<data_dir>/artifacts``)."""
        return self.data_dir / "artifacts"


def _warn_unknown_env() -> None:
    """Warn about ``AXBGATE_*`` variables that name no setting (they would be ignored)."""
    known = {f"AXBGATE_{name.upper()}" for name in Settings.model_fields}
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            known |= {f"AXBGATE_{name.upper()}__{sub.upper()}" for sub in annotation.model_fields}
    for key in os.environ:
        if key.startswith("AXBGATE_") and key not in known and not key.startswith("AXBGATE_TEST_"):
            logger.warning("environment variable %s names no axbgate setting and is ignored", key)


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the process-wide settings, read once from the environment and ``.env``.

    Unknown ``AXBGATE_*`` variables are reported with a warning.

    Raises:
        pydantic.ValidationError: A setting has an invalid value; the message names it.
    """
    _warn_unknown_env()
    return Settings()
