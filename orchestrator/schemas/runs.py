"""Models of a gate's allocation and runs in detail (``GET /runs/{id}``,
``GET /allocations/{id}``, the runs of ``GET /gates/{id}``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ConfigDict, model_validator

from orchestrator.domain.api_model import PublicModel
from orchestrator.domain.secrets import mask_env
from orchestrator.schemas.gates import RunPublic

__all__ = ["AllocationPublic", "ArtifactPublic", "HealthCheckPublic", "RunDetailPublic", "RunStepPublic"]


class HealthCheckPublic(PublicModel):
    """One health-gate check."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    name: str
    """Probe name."""
    status: str
    """``PASS``, ``WARN`` or ``FAIL``."""
    host: str | None
    """Host the check ran on."""
    measured: dict[str, Any]
    """What the probe measured (units in the keys)."""
    threshold: dict[str, Any]
    """Criteria the measurement was judged against."""
    message: str | None
    """What the probe found."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""


class AllocationPublic(PublicModel):
    """An allocation with its health report."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    scheduler_job_id: str | None
    """Scheduler job id of the allocation."""
    executor: str
    """Executor that ran the allocation."""
    cluster: str | None
    """Slurm cluster name."""
    hostnames: list[Any]
    """Hosts of the allocation."""
    num_nodes: int
    """Number of nodes."""
    gpu_model: str | None
    """GPU model name."""
    gpus_per_node: int | None
    """GPUs per node."""
    num_gpus: int | None
    """GPUs in the allocation."""
    topology: str | None
    """Interconnect label (NVLink, InfiniBand, TCP, CPU)."""
    clock_bin: str | None
    """Clock bin of the allocation (runs compare only within one bin)."""
    max_sm_clock_mhz: float | None
    """Highest SM clock reported, MHz."""
    power_limit_w: float | None
    """GPU power limit, watts."""
    health_verdict: str
    """Health gate verdict of the allocation: ``healthy``, ``degraded`` or ``failed``."""
    driver_version: str | None
    """NVIDIA driver version."""
    cuda_version: str | None
    """CUDA version."""
    nccl_version: str | None
    """NCCL version."""
    torch_version: str | None
    """PyTorch version."""
    criteria: dict[str, Any]
    """Health criteria the allocation was judged with."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    baseline_eligible: bool = False
    """Health verdict ``healthy`` (every check passed, healthy clock bin)."""
    health_checks: list[HealthCheckPublic] = []
    """Every health probe's result."""


class ArtifactPublic(PublicModel):
    """A kept raw file and its SHA-256."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    run_id: int | None
    """Id of the run."""
    gate_id: int | None
    """Id of the gate this belongs to."""
    allocation_id: int | None
    """Id of the allocation (one scheduler job) the runs ran on."""
    kind: str
    """What the file is (``log``, ``health``, ``export``)."""
    size_bytes: int
    """Size of the file, bytes."""
    sha256: str
    """SHA-256 of the file's content (hex)."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    log_url: str | None = None
    """Where to download it (``/runs/{run_id}/log?artifact_id=...``), when it is a run's."""


class RunStepPublic(PublicModel):
    """One optimizer step as the run reported it."""

    model_config = ConfigDict(from_attributes=True)

    step: int
    """Optimizer step number."""
    slowest_rank_step_s: float | None
    """Slowest rank's seconds; ``None`` when the run printed only its own rank's time
    (harness ``BF16_STEP``: rank 0's ``step_time_sec``, in ``rank_step_s``)."""
    rank_step_s: float | None
    """The printing rank's own step time, seconds (when the slowest rank's is not known)."""
    loss: float | None
    """Training loss at this step."""
    grad_norm: float | None
    """Gradient norm at this step."""
    phase: str | None
    """``warmup`` or ``measured``."""


class RunDetailPublic(RunPublic):
    """A run with provenance, per-step records and artifacts."""

    mfu_numerator_pct_s: float | None = None
    """MFU numerator, percent-seconds (MFU percent times step seconds)."""
    flops_per_sample: int | None = None
    """Model FLOPs per sample (forward and backward)."""
    peak_flops_per_gpu: float | None = None
    """Peak FLOP/s of one GPU used for MFU."""
    provenance: dict[str, Any] = {}
    """Where the run's code and data came from."""
    result_extra: dict[str, Any] = {}
    """Other fields the run's result record carried."""
    semantics: dict[str, Any] | None = None
    """What the run trained (batch, loss/grad-norm series, dtype coverage, probe)."""
    artifacts: list[ArtifactPublic] = []
    """Files of this run."""
    steps: list[RunStepPublic] = []
    """One page of the per-step records (``GET /runs/{id}``; empty in gate views)."""
    num_steps: int | None = None
    """Step records stored for the run (all pages); ``None`` in gate views."""
    num_series_steps: int = 0
    """Entries of the whole per-step series (``slowest_rank_step_s`` may hold one page)."""
    steps_offset: int = 0
    """First step record / series entry of this page."""
    steps_limit: int | None = None
    """Page size asked for; ``None`` in gate views (the whole series is included)."""

    @model_validator(mode="after")
    def _mask_provenance(self) -> RunDetailPublic:
        if isinstance(self.provenance.get("env"), dict):
            self.provenance = {**self.provenance, "env": mask_env(self.provenance["env"])}
        return self
