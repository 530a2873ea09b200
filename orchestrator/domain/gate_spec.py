"""The gate request: what to compare, how to run it, how to judge it (validated strictly).

Every string that later reaches a process (git refs, environment variables, recipe
overrides, command templates) is validated here and only ever used as one element of an
argument list, never joined into a shell string.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from axbgate_record.rule import ENV_NAMES as MEASURE_ENV_NAMES
from orchestrator.domain.api_model import ApiModel
from orchestrator.domain.gate_options import GateOptions, HealthSpec
from orchestrator.domain.secrets import parse_secret_ref

__all__ = [
    "GateCreate",
    "GateOptions",
    "HealthSpec",
    "MIN_WINDOW_STEPS",
    "SideSpec",
    "SourceSpec",
    "TopologySpec",
    "WorkloadSpec",
    "parse_pattern",
]

# git-check-ref-format rules that matter here, plus plain SHAs and rev suffixes (~N, ^N).
_REF_RE = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)[A-Za-z0-9._/+-]+(?:[~^][0-9]*)*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OVERRIDE_RE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+=[^\x00\n\r]*$")
_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")
COMMAND_PLACEHOLDERS = frozenset(
    {"warmup_steps", "measured_steps", "total_steps", "source_dir", "role", "run_index", "nproc",
     "out_dir", "nnodes", "nproc_per_node"}
)
# sbatch options axbgate/submitit set themselves (topology fields, log paths, signal).
_SLURM_OWNED = frozenset(
    {"nodes", "ntasks", "ntasks_per_node", "cpus_per_task", "gpus_per_node", "time", "partition",
     "account", "qos", "job_name", "output", "error", "signal", "wrap", "chdir", "open_mode",
     "export", "export_file", "get_user_env", "uid", "gid"}
)
# Variables the launcher owns; a gate may not override them (DESIGN.md section 5).
# The gate's measurement rule (AXBGATE_WARMUP_MODE, ...) is the driver's too: a side may
# not measure itself by another rule (docs/record-contract.md).
RESERVED_ENV = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
     "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", *MEASURE_ENV_NAMES}
)


MIN_WINDOW_STEPS = 3
"""Fewest steps a requested time window measures when the request names no step count
(stated in ``--help``: a median needs a few steps; one slow step of 3 moves it by one rank)."""


def parse_pattern(pattern: str) -> list[str]:
    """Split a run pattern like ``"A X B"`` or ``"AXBXA"`` into roles.

    Raises:
        ValueError: A role other than A/X/B, no A, no X, fewer than two controls, or an X
            not bracketed by controls on both sides.
    """
    roles = [c for c in pattern.replace(",", " ").replace(" ", "").upper()]
    bad = [r for r in roles if r not in "AXB"]
    if bad:
        raise ValueError(f"run_pattern may hold only A, X and B, got {''.join(bad)!r}")
    if "A" not in roles or "X" not in roles or sum(r != "X" for r in roles) < 2:
        raise ValueError("run_pattern needs an A, an X and at least two controls (e.g. 'A X B')")
    if roles[0] == "X" or roles[-1] == "X":
        raise ValueError("every X in run_pattern must have a control before and after it")
    if len(roles) > 21:
        raise ValueError("run_pattern may hold at most 21 runs")
    return roles


class SourceSpec(ApiModel):
    """Where a side's code comes from."""

    model_config = ConfigDict(extra="forbid")

    repo: str | None = None
    """Path (or URL) of a git repository; ``None`` means the installed axbgate tree."""
    ref: str | None = None
    """Git ref (branch, tag, SHA, ``HEAD~1``); resolved to a full SHA at submission."""
    sha: str | None = None
    """Resolved full SHA (filled in by the service; a client may pin it)."""

    @field_validator("ref")
    @classmethod
    def _ref(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 200 or not _REF_RE.match(value)):
            raise ValueError(
                f"{value!r} is not a valid git ref: use a branch, tag, SHA or REF~N, "
                "not starting with '-'"
            )
        return value

    @field_validator("sha")
    @classmethod
    def _sha(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", value):
            raise ValueError("sha must be a full 40- or 64-hex-digit commit id")
        return value

    @model_validator(mode="after")
    def _ref_needs_repo(self) -> "SourceSpec":
        if self.ref is not None and self.repo is None:
            raise ValueError("source.ref needs source.repo (the repository to resolve it in)")
        return self


class SideSpec(ApiModel):
    """One side of the comparison (control or candidate)."""

    model_config = ConfigDict(extra="forbid")

    source: SourceSpec = Field(default_factory=SourceSpec)
    """Where the side's code comes from (repository, ref); empty: the workload as given."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment overrides for every run of this side. A value ``secret://NAME`` is a
    secret reference: the run gets the server variable ``NAME`` (one the operator lists in
    ``security.secret_refs``), injected at launch and never stored. Values of names that
    look secret (``security.secret_patterns``) are masked wherever they are shown."""
    recipe_overrides: list[str] = Field(default_factory=list)
    """``section.key=value`` overrides of the bundled trainer's recipe."""

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, val in value.items():
            if not _ENV_NAME_RE.match(name):
                raise ValueError(f"environment variable name {name!r} is invalid ([A-Za-z_][A-Za-z0-9_]*)")
            if name in RESERVED_ENV:
                raise ValueError(f"environment variable {name} is set by the launcher and cannot be overridden")
            if "\x00" in val or len(val) > 4096:
                raise ValueError(f"value of {name} must be at most 4096 characters without NUL bytes")
            parse_secret_ref(val)
        return value

    @field_validator("recipe_overrides")
    @classmethod
    def _overrides(cls, value: list[str]) -> list[str]:
        for item in value:
            if not _OVERRIDE_RE.match(item):
                raise ValueError(f"recipe override {item!r} must look like section.key=value")
        return value


class WorkloadSpec(ApiModel):
    """What is measured: the bundled trainer's recipe or an external command."""

    model_config = ConfigDict(extra="forbid")

    recipe: str | None = None
    """Bundled trainer recipe name (``tiny``, ``ltx2-full``, ...) or path to a TOML file."""
    command: list[str] | None = None
    """External harness argv template printing the record contract (or, with
    ``log_format``, a framework's own log). Placeholders: ``{warmup_steps}``,
    ``{measured_steps}``, ``{total_steps}`` (warmup + measured under a fixed rule, else the
    most steps a run may take), ``{source_dir}``, ``{role}``, ``{run_index}``, ``{nproc}``
    (all ranks), ``{nnodes}``, ``{nproc_per_node}``, ``{out_dir}``. Every run also gets the
    rule as ``AXBGATE_*`` variables (docs/record-contract.md). How often it starts is
    ``launch``."""
    launch: Literal["per_node", "per_rank", "batch"] = "per_node"
    """How a ``command`` is started (docs/multi-node.md): ``per_node`` once per node (a
    launcher such as torchrun; under Slurm ``srun`` with one task per node), ``per_rank``
    once per rank (``srun`` with every rank's task; locally ``torch.distributed.run
    --no-python``), ``batch`` once, in the allocation's batch step on node 0. The bundled
    trainer (``recipe``) always starts one process per rank."""
    log_format: Literal["record", "torchtitan", "megatron"] = "record"
    """How a ``command``'s output is read: ``record`` (the record contract: the bundled
    trainer, ``axbgate_record.StepTimer`` and its HF/Lightning callbacks), ``torchtitan`` or
    ``megatron`` (their own per-step log lines, no code change; docs/integrations.md says
    what each can and cannot know). An adapter needs a fixed warmup that ends on a logged
    step and a count of measured steps; pass ``{total_steps}`` as the framework's step count."""

    def stored(self) -> dict[str, Any]:
        """The form kept in ``gates.workload``: ``log_format`` only when not the default, so
        the control identity of gates stored before the field existed stays the same."""
        data = self.model_dump(mode="json")
        if data.get("log_format") == "record":
            data.pop("log_format")
        return data

    @model_validator(mode="after")
    def _one_of(self) -> "WorkloadSpec":
        if (self.recipe is None) == (self.command is None):
            raise ValueError("workload needs exactly one of recipe or command")
        if self.recipe is not None and self.log_format != "record":
            raise ValueError(f"workload.log_format {self.log_format!r} reads an external command's "
                             "log; the bundled trainer (workload.recipe) prints the record contract")
        if self.command is not None:
            if not self.command or not self.command[0]:
                raise ValueError("workload.command must be a non-empty argv list")
            for arg in self.command:
                if "\x00" in arg:
                    raise ValueError("workload.command arguments may not contain NUL bytes")
                for name in _PLACEHOLDER_RE.findall(arg):
                    if name not in COMMAND_PLACEHOLDERS:
                        raise ValueError(
                            f"unknown placeholder {{{name}}} in workload.command; "
                            f"valid: {', '.join(sorted(COMMAND_PLACEHOLDERS))}"
                        )
        return self


class TopologySpec(ApiModel):
    """The allocation a gate asks for."""

    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(1, ge=1, le=1024)
    """Nodes to allocate."""
    gpus_per_node: int = Field(0, ge=0, le=16)
    """0 means CPU ranks (gloo)."""
    ntasks_per_node: int | None = Field(None, ge=1, le=256)
    """Ranks per node; defaults to ``gpus_per_node`` (or 2 on CPU)."""
    cpus_per_task: int = Field(1, ge=1, le=256)
    """CPUs per task."""
    partition: str | None = Field(None, pattern=r"^[A-Za-z0-9_.,-]+$")
    """Slurm partition (None: the service default)."""
    account: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    """Slurm account (None: the service default)."""
    qos: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    """Slurm QOS (None: none)."""
    time_limit_min: int = Field(60, ge=2, le=10080)
    """Allocation time limit, minutes (at least 2: submitit's 90 s warning signal)."""
    queue_deadline_s: float | None = Field(None, gt=0)
    """Cancel the gate if the allocation has not started after this many seconds."""
    resubmit_on_preemption: bool = False
    """When Slurm preempts the allocation, fail this gate and queue a copy once (a new gate:
    its own allocation, runs and verdict; runs of two allocations are never judged together)."""
    preamble: bool = True
    """Compute the launch preamble (socket interface, raw-IP ``MASTER_ADDR``) for every
    step. ``false`` only to diagnose: ``MASTER_ADDR`` is then node 0's hostname and no
    socket interface is set, which fails on hosts mapping their own name to 127.0.1.1."""
    extra_slurm: dict[str, str] = Field(default_factory=dict)
    """Extra sbatch parameters (``constraint``, ``exclusive``, ...), passed to submitit."""

    @field_validator("extra_slurm")
    @classmethod
    def _extra(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            if key in _SLURM_OWNED:
                raise ValueError(f"extra_slurm may not set {key!r}: axbgate sets it from the topology")
            if not re.fullmatch(r"[a-z][a-z0-9_]*", key):
                raise ValueError(f"extra_slurm key {key!r} must be a sbatch option name like 'constraint'")
            if not re.fullmatch(r"[A-Za-z0-9_.,:=+@%/-]*", val):
                raise ValueError(f"extra_slurm value for {key} holds characters sbatch does not need")
        return value

    @property
    def ranks_per_node(self) -> int:
        """Processes per node for each run."""
        return self.ntasks_per_node or (self.gpus_per_node or 2)

    @property
    def world_size(self) -> int:
        """Total ranks of each run."""
        return self.ranks_per_node * self.nodes


class GateCreate(ApiModel):
    """A gate request (``POST /gates``, ``axbgate gate``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "title": "fused attention", "family": "attention",
        "control": {"source": {"repo": "https://git.example.com/ltx2.git", "ref": "main"}},
        "candidate": {"source": {"repo": "https://git.example.com/ltx2.git", "ref": "fused-attn"}},
        "workload": {"recipe": "ltx2-bench-h200"}, "warmup_steps": 10, "measured_steps": 20,
        "executor": "slurm", "topology": {"nodes": 1, "partition": "h200"}}]})

    title: str = Field("", max_length=255)
    """Free-text title."""
    kind: Literal["candidate", "regate", "bisect"] = "candidate"
    """``candidate`` (a change under test), ``regate`` or ``bisect``."""
    family: str | None = Field(None, max_length=255)
    """Family name grouping related gates (history and stopping points)."""
    tags: list[str] = Field(default_factory=list, max_length=32)
    """Free-form labels."""
    control: SideSpec = Field(default_factory=SideSpec)
    """The control side (A and B runs)."""
    candidate: SideSpec = Field(default_factory=SideSpec)
    """The candidate side (X runs)."""
    workload: WorkloadSpec = Field(default_factory=lambda: WorkloadSpec(recipe="tiny"))
    """What each run executes: a bundled recipe or an external command."""
    topology: TopologySpec = Field(default_factory=TopologySpec)
    """What to allocate."""
    run_pattern: str = "A X B"
    """Order of runs on the allocation, e.g. ``A X B``."""
    warmup_steps: int = Field(10, ge=0, le=100000)
    """Warmup steps per run (not measured)."""
    measured_steps: int = Field(20, ge=1, le=100000)
    """Measured steps per run."""
    policy: str = "sequential"
    """Primary verdict policy (DESIGN.md section 3): ``sequential`` (default: calibrated,
    extends the pattern while undecided), ``drift`` (the campaign rule) or ``ratio-ci``;
    every gate stores all three side by side."""
    policy_params: dict[str, Any] = Field(default_factory=dict)
    """Parameters of the primary policy (empty: the DESIGN defaults)."""
    executor: Literal["local", "slurm", "debug"] | None = None
    """``None``: the service's default executor."""
    health: HealthSpec = Field(default_factory=HealthSpec)
    """Health gate before the runs."""
    run_timeout_s: float = Field(1800.0, gt=0)
    """Deadline of each run, seconds; a run past it is killed and fails the gate."""
    max_log_bytes: int = Field(2 * 1024**3, ge=1024**2, le=64 * 1024**3)
    """Output a run may write, bytes (default 2 GiB); a run past it is killed and fails."""
    max_extend: int = Field(0, ge=0, le=5)
    """While the verdict is ``inconclusive``, append ``X B`` up to this many times."""
    fork_server: bool = True
    """Local bundled-trainer runs are forked from a process that imported torch once per
    allocation (each run is still a fresh set of processes); False: torchrun per run."""
    warmup_mode: Literal["fixed", "steady"] = "fixed"
    """``fixed``: every run warms up exactly ``warmup_steps``; ``steady``: warmup ends when
    the last 5 slowest-rank step times agree within 1% (at least ``warmup_steps``, at most
    ``max_warmup_steps``). Every run of the gate uses the same rule."""
    max_warmup_steps: int = Field(50, ge=1, le=100000)
    """Most warmup steps under ``steady`` (the run measures from there even if unsettled)."""
    measured_seconds: float | None = Field(None, gt=0, le=86400)
    """Measured window in seconds of step time, sized once per run at the steady-state
    step time: ceil(seconds / step time) steps, at least ``measured_steps`` when the
    request gives it, else at least ``MIN_WINDOW_STEPS`` (3); None: exactly
    ``measured_steps``."""
    auto_window: bool | None = None
    """``True``: the allocation measures its conditioning run, then gives every later run
    the window that minimises expected GPU-seconds per decision (``domain.cost_model``;
    sequential candidate gates on the bundled trainer). ``None`` (default): the same when
    neither the request nor the recipe names a window. ``False``: never."""
    max_window_s: float = Field(60.0, gt=0, le=3600)
    """Longest window the cost model may choose, seconds of steps (default 60)."""
    declare_changes: list[Literal["batch"]] = Field(default_factory=list, max_length=1)
    """Semantic changes the candidate makes on purpose (``batch``: another global batch):
    the gate is then judged per sample instead of ``not comparable`` (issue 19)."""
    semantic_floor_prefix_steps: int | None = Field(None, ge=1, le=100)
    """Compared steps at the start of the semantic comparison that share one floor, the
    largest A-vs-B difference among them; later steps use the running maximum up to
    themselves (``orchestrator.verdict.semantics``). None: the control recipe's ``[measure]
    semantic_floor_prefix_steps``, else the policy default (5)."""
    design_seed: int | None = Field(None, ge=0, le=2**31 - 1)
    """Seed of the randomised run order of a ``sequential`` candidate gate (its mirrored
    X C C X / C X X C blocks, ``orchestrator.verdict.design``); None: drawn when the gate is
    stored. Stored and shown with the gate, so its planned pattern can be reproduced."""

    @field_validator("run_pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        return " ".join(parse_pattern(value))

    def options(self) -> GateOptions:
        """The request's run options, as stored in ``Gate.options``."""
        return GateOptions(health=self.health, run_timeout_s=self.run_timeout_s,
                           max_log_bytes=self.max_log_bytes, max_extend=self.max_extend,
                           warmup_mode=self.warmup_mode, max_warmup_steps=self.max_warmup_steps,
                           measured_seconds=self.measured_seconds, fork_server=self.fork_server,
                           declare_changes=self.declare_changes,
                           auto_window=bool(self.auto_window), max_window_s=self.max_window_s,
                           semantic_floor_prefix_steps=self.semantic_floor_prefix_steps)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        for tag in value:
            if not re.fullmatch(r"[A-Za-z0-9_.:/+-]{1,64}", tag):
                raise ValueError(f"tag {tag!r} must be 1-64 characters of letters, digits, _.:/+-")
        return value

    @model_validator(mode="after")
    def _policy(self) -> "GateCreate":
        from orchestrator.verdict import get_policy, initial_roles

        try:
            policy = get_policy(self.policy, **self.policy_params)
        except ValueError as exc:
            raise ValueError(f"policy: {exc}") from None
        if self.policy == "sequential" and self.kind == "candidate":
            planned = " ".join(initial_roles(policy))  # type: ignore[arg-type]
            if "run_pattern" in self.model_fields_set and self.run_pattern != planned:
                raise ValueError(
                    f"run_pattern: the sequential policy plans its own pattern ({planned}, "
                    "extended while undecided); leave run_pattern out, or choose policy "
                    "'drift' or 'ratio-ci' for a fixed pattern")
            self.run_pattern = planned
        if self.measured_seconds is not None and "measured_steps" not in self.model_fields_set \
                and self.measured_steps != MIN_WINDOW_STEPS:
            # a requested time window is honoured: no hidden floor of the default 20 steps
            self.measured_steps = MIN_WINDOW_STEPS
        if self.auto_window and (self.measured_seconds is not None
                                 or "measured_steps" in self.model_fields_set):
            raise ValueError("auto_window: the cost model chooses the window; leave "
                             "measured_steps and measured_seconds out, or set auto_window false")
        if self.warmup_mode == "steady" and self.max_warmup_steps < max(self.warmup_steps, 2):
            raise ValueError("max_warmup_steps must be at least warmup_steps (and 2) under "
                             "warmup_mode 'steady'")
        if self.workload.command is not None and (
            self.control.recipe_overrides or self.candidate.recipe_overrides
        ):
            raise ValueError("recipe_overrides apply to the bundled trainer, not to workload.command")
        from orchestrator.domain.framework_logs import check_gate_log_format

        check_gate_log_format(self.workload.log_format, self.workload.command,
                              self.warmup_mode, self.measured_seconds)
        return self
