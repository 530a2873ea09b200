"""Gate, run and verdict output models (``*Public``).

Every env mapping they carry is masked (:func:`orchestrator.domain.secrets.mask_env`):
values of secret-looking names never leave the service, whoever reads."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from orchestrator.domain.secrets import mask_env
from orchestrator.schemas.semantics import SemanticVerdictPublic

__all__ = ["GateProgressPublic", "GatePublic", "GatesPublic", "RunProgressPublic", "RunPublic",
           "VerdictPublic"]


class RunPublic(BaseModel):
    """One run of a gate."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    gate_id: int | None
    allocation_id: int | None
    role: str | None
    order: int
    status: str
    source_ref: str | None = None
    source_sha: str | None = None
    source_dirty: bool = False
    env: dict[str, Any] = {}
    command: list[Any] = []
    exit_code: int | None = None
    error: str | None = None
    slowest_rank_step_s: list[float] = []
    num_warmup_steps: int | None = None
    num_measured_steps: int | None = None
    median_step_s: float | None = None
    mfu_pct: float | None = None
    samples_per_s: float | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    world_size: int | None = None
    local_batch_size: int | None = None
    grad_accum_steps: int | None = None
    versions: dict[str, Any] = {}
    clocks: dict[str, Any] = {}
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None

    @model_validator(mode="after")
    def _mask(self) -> RunPublic:
        self.env = mask_env(self.env)
        return self


def _mask_spec(spec: dict[str, Any]) -> dict[str, Any]:
    if isinstance(spec.get("env"), dict):
        return {**spec, "env": mask_env(spec["env"])}
    return spec


class VerdictPublic(BaseModel):
    """A timing verdict with every number the policy computed."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    policy: str
    policy_version: str
    params: dict[str, Any]
    verdict: str
    numbers: dict[str, Any]
    is_primary: bool
    created_at: dt.datetime


class GatePublic(BaseModel):
    """A gate with its runs and verdicts."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    kind: str
    title: str
    family: str | None
    tags: list[str]
    status: str
    status_reason: str | None
    control_spec: dict[str, Any]
    candidate_spec: dict[str, Any]
    workload: dict[str, Any]
    recipe_name: str | None
    recipe: dict[str, Any]
    topology_request: dict[str, Any]
    run_pattern: str
    num_warmup_steps: int
    num_measured_steps: int
    policy: str
    policy_params: dict[str, Any]
    options: dict[str, Any] = {}
    executor: str
    job_ref: str | None
    allocation_id: int | None
    parent_gate_id: int | None
    repository_id: int | None
    idempotency_key: str | None
    created_at: dt.datetime
    submitted_at: dt.datetime | None
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    runs: list[RunPublic] = []
    verdicts: list[VerdictPublic] = []
    semantic_verdicts: list[SemanticVerdictPublic] = []
    """Semantic comparisons of the gate, oldest first (the last one counts; issue 19)."""

    @model_validator(mode="after")
    def _mask(self) -> GatePublic:
        self.control_spec = _mask_spec(self.control_spec)
        self.candidate_spec = _mask_spec(self.candidate_spec)
        return self


class GatesPublic(BaseModel):
    """A page of gates."""

    data: list[GatePublic]
    count: int


class RunProgressPublic(BaseModel):
    """How far one run of a gate has got."""

    order: int
    role: str | None
    status: str
    num_steps: int
    """Step records stored so far (warmup included)."""
    median_step_s: float | None = None


class GateProgressPublic(BaseModel):
    """A gate's status and per-run step counts (for live progress)."""

    id: int
    status: str
    status_reason: str | None
    num_steps_per_run: int
    """Warmup plus measured steps each run is asked for."""
    runs: list[RunProgressPublic]
