"""Per-topology health criteria: thresholds are data, not code (DESIGN.md section 4.6).

A criteria file is TOML (``health/criteria/*.toml``). It may ``extends = "<name>"``
another shipped file and override any key; unknown keys are rejected so a typo
cannot silently disable a check. ``select_criteria`` picks the shipped file that
matches an allocation's GPU model, GPU count and node count.
"""

from __future__ import annotations

import dataclasses
import logging
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CRITERIA_DIR = Path(__file__).with_name("criteria")
"""Folder of the shipped criteria files."""


@dataclasses.dataclass(frozen=True)
class ClockCriteria:
    """Clock bin, power and clock-event rules."""

    healthy_max_sm_mhz: tuple[int, ...] = ()
    """Max SM clocks (MHz) of the healthy clock bin, e.g. (1980,) for H200."""
    degraded_max_sm_mhz: tuple[int, ...] = ()
    """Max SM clocks (MHz) of the degraded bin: runs allowed, baseline-ineligible."""
    tolerance_mhz: int = 15
    """A reading within this many MHz of a bin value belongs to that bin."""
    power_limit_w: float | None = None
    """Expected enforced power limit per GPU, W; None = compare with the GPU's default."""
    power_limit_tolerance_pct: float = 2.0
    """Enforced limit below expected by more than this percentage warns."""
    fail_reasons: tuple[str, ...] = (
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    )
    """Clock-event reasons that fail when active (idle read or under load)."""
    warn_reasons: tuple[str, ...] = ("sw_power_cap",)
    """Reasons that warn when active under load (ignored at idle)."""


@dataclasses.dataclass(frozen=True)
class GpuCriteria:
    """Per-GPU state rules."""

    idle_policy: str = "warn"
    """``warn`` or ``fail`` when a GPU runs foreign compute processes before the gate."""
    min_nvlink_active_links: int | None = None
    """Fewer active NVLinks per GPU fails; None skips the count (PCIe parts, CPU)."""
    nvlink_error_delta_policy: str = "warn"
    """``warn`` or ``fail`` when NVLink replay/recovery/CRC counters grow during the gate."""
    allowed_recovery_actions: tuple[str, ...] = ("none",)
    """NVML recovery actions that pass; any other fails."""


@dataclasses.dataclass(frozen=True)
class FabricCriteria:
    """NVLink/MNNVL fabric rules (issue 4, "Fabric rules")."""

    required: bool = False
    """The allocation must have a fabric (GPUs in a registered NVLink domain)."""
    sentinel_clique_ids: tuple[int, ...] = (32766,)
    """Clique ids that warn on their own (0x7ffe: DESIGN.md section 4.3)."""


@dataclasses.dataclass(frozen=True)
class CollectiveCriteria:
    """Collective correctness and bandwidth settings (DESIGN.md 4.4, 4.5)."""

    backend: str = "auto"
    """``auto`` (NCCL on CUDA, else gloo), ``nccl`` or ``gloo``."""
    dtype: str = "bfloat16"
    """torch dtype name of the bandwidth buffer."""
    num_elements: int = 128 * 1024 * 1024
    """Elements per rank of the all-reduce buffer (DESIGN.md: 128 Mi)."""
    warmup_iters: int = 8
    timed_iters: int = 128
    ops: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")
    baseline_busbw_gbps: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Healthy busbw per op, GB/s (1e9 B/s); an op without a baseline is reported only."""
    warn_ratio: float = 0.95
    """busbw below ``warn_ratio * baseline`` warns."""
    fail_ratio: float = 0.90
    """busbw below ``fail_ratio * baseline`` fails."""
    localize_on_fail: bool = True
    """When a whole-allocation busbw fails, time disjoint rank pairs to find the slow link."""


@dataclasses.dataclass(frozen=True)
class DeadlineCriteria:
    """Hard deadlines per stage, seconds (DESIGN.md 4: every check has a timeout)."""

    probe_s: float = 60.0
    rendezvous_s: float = 120.0
    correctness_s: float = 60.0
    bandwidth_s: float = 180.0
    load_s: float = 120.0
    gather_s: float = 60.0


@dataclasses.dataclass(frozen=True)
class LoadCriteria:
    """Optional bf16 GEMM load test."""

    enabled: bool = False
    seconds: float = 5.0
    """Wall time of the load per GPU, s."""
    matrix_size: int = 8192
    """Square GEMM side; FLOPs per product 2 * n^3."""
    sample_interval_s: float = 0.25


@dataclasses.dataclass(frozen=True)
class Criteria:
    """One topology's health criteria."""

    name: str
    description: str = ""
    gpu_model: str | None = None
    """Substring the GPU product name must contain (case-insensitive); None = CPU."""
    num_gpus: int | None = None
    """GPUs in the whole allocation (None: any)."""
    num_nodes: int | None = None
    """Nodes (trays) in the allocation (None: any)."""
    interconnect: str = ""
    default_nproc: int = 2
    """Ranks per node when no GPU decides it (CPU/gloo)."""
    clocks: ClockCriteria = dataclasses.field(default_factory=ClockCriteria)
    gpu: GpuCriteria = dataclasses.field(default_factory=GpuCriteria)
    fabric: FabricCriteria = dataclasses.field(default_factory=FabricCriteria)
    collectives: CollectiveCriteria = dataclasses.field(default_factory=CollectiveCriteria)
    deadlines: DeadlineCriteria = dataclasses.field(default_factory=DeadlineCriteria)
    load: LoadCriteria = dataclasses.field(default_factory=LoadCriteria)
    source: str = ""
    """Where the criteria came from (file path), stored with the gate."""

    @property
    def gpus_per_node(self) -> int | None:
        """GPUs per node implied by ``num_gpus`` / ``num_nodes`` (None if unknown)."""
        if self.num_gpus is None or not self.num_nodes:
            return None
        return self.num_gpus // self.num_nodes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy (for the rank workers and the stored gate)."""
        out = dataclasses.asdict(self)
        out["collectives"]["baseline_busbw_gbps"] = dict(self.collectives.baseline_busbw_gbps)
        return out


_SECTIONS: dict[str, type] = {
    "clocks": ClockCriteria,
    "gpu": GpuCriteria,
    "fabric": FabricCriteria,
    "collectives": CollectiveCriteria,
    "deadlines": DeadlineCriteria,
    "load": LoadCriteria,
}


def _build(cls: type, data: Mapping[str, Any], where: str) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(names)}")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from exc


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _raw(path_or_name: str | Path, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], Path]:
    path = Path(path_or_name)
    if not path.suffix and not path.exists():
        path = CRITERIA_DIR / f"{path_or_name}.toml"
    if not path.is_file():
        names = sorted(p.stem for p in CRITERIA_DIR.glob("*.toml"))
        raise ValueError(f"criteria {path_or_name!r} not found; shipped: {names}")
    if str(path) in seen:
        raise ValueError(f"criteria extends cycle: {seen + (str(path),)}")
    data = tomllib.loads(path.read_text())
    parent = data.pop("extends", None)
    if parent is not None:
        base, _ = _raw(parent, seen + (str(path),))
        data = _merge(base, data)
    return data, path


def criteria_from_mapping(data: Mapping[str, Any], *, source: str = "") -> Criteria:
    """Build criteria from a parsed TOML mapping.

    Args:
        data: the top-level table (``extends`` already resolved).
        source: where it came from, stored in ``Criteria.source``.

    Returns:
        The validated criteria.

    Raises:
        ValueError: on unknown keys, wrong types or inconsistent values (ratios not in
            (0, 1], fail ratio above warn ratio, non-positive sizes or deadlines).
    """
    data = dict(data)
    kwargs: dict[str, Any] = {"source": source}
    for key, cls in _SECTIONS.items():
        kwargs[key] = _build(cls, data.pop(key, {}), f"[{key}]")
    match = data.pop("match", {})
    for key in ("gpu_model", "num_gpus", "num_nodes"):
        if key in match:
            kwargs[key] = match.pop(key)
    if match:
        raise ValueError(f"[match]: unknown keys {sorted(match)}")
    top = _build(Criteria, {**data, **{k: v for k, v in kwargs.items()}}, "criteria")
    _validate(top)
    return top


def _validate(c: Criteria) -> None:
    col = c.collectives
    if not 0 < col.fail_ratio <= col.warn_ratio <= 1:
        raise ValueError(
            f"{c.name}: need 0 < fail_ratio <= warn_ratio <= 1, got {col.fail_ratio}, "
            f"{col.warn_ratio}"
        )
    if col.num_elements <= 0 or col.timed_iters <= 0 or col.warmup_iters < 0:
        raise ValueError(f"{c.name}: collective sizes and iteration counts must be positive")
    if col.backend not in {"auto", "nccl", "gloo"}:
        raise ValueError(f"{c.name}: backend must be auto, nccl or gloo, got {col.backend!r}")
    bad = set(col.ops) - {"all_reduce", "all_gather", "reduce_scatter"}
    if bad:
        raise ValueError(f"{c.name}: unknown collective ops {sorted(bad)}")
    for f in dataclasses.fields(c.deadlines):
        if getattr(c.deadlines, f.name) <= 0:
            raise ValueError(f"{c.name}: deadline {f.name} must be > 0")
    if c.gpu.idle_policy not in {"warn", "fail"}:
        raise ValueError(f"{c.name}: idle_policy must be warn or fail")
    if c.gpu.nvlink_error_delta_policy not in {"warn", "fail"}:
        raise ValueError(f"{c.name}: nvlink_error_delta_policy must be warn or fail")
    if c.default_nproc < 1:
        raise ValueError(f"{c.name}: default_nproc must be >= 1")


def load_criteria(
    path_or_name: str | Path, overrides: Mapping[str, Any] | None = None
) -> Criteria:
    """Load a criteria file by path or by shipped name, optionally overridden per gate.

    Args:
        path_or_name: a TOML path, or the stem of a file in ``health/criteria``
            (e.g. ``"h200-x2"``).
        overrides: nested mapping merged over the file (same layout as the TOML).

    Returns:
        The criteria.

    Raises:
        ValueError: when the file is missing or invalid (see ``criteria_from_mapping``).
    """
    data, path = _raw(path_or_name)
    if overrides:
        data = _merge(data, overrides)
    return criteria_from_mapping(data, source=str(path))


def shipped_criteria() -> list[Criteria]:
    """All shipped criteria files, loaded.

    Returns:
        The criteria sorted by name.
    """
    return sorted((load_criteria(p) for p in CRITERIA_DIR.glob("*.toml")), key=lambda c: c.name)


def select_criteria(gpu_model: str | None, num_gpus: int, num_nodes: int) -> Criteria:
    """Pick the shipped criteria for an allocation.

    Args:
        gpu_model: GPU product name as read (``NVIDIA H200``), or None / ``""`` on CPU.
        num_gpus: GPUs in the whole allocation (ranks on CPU).
        num_nodes: nodes (trays) in the allocation.

    Returns:
        The matching criteria: GPU model substring, GPU count and node count all match
        (a criteria field left unset matches anything); the most specific match wins.

    Raises:
        ValueError: when no shipped criteria matches.
    """
    model = (gpu_model or "").lower()
    best: tuple[int, Criteria] | None = None
    for crit in shipped_criteria():
        if crit.gpu_model is None:
            if model:
                continue
        elif crit.gpu_model.lower() not in model:
            continue
        if crit.num_gpus is not None and crit.num_gpus != num_gpus:
            continue
        if crit.num_nodes is not None and crit.num_nodes != num_nodes:
            continue
        score = (crit.num_gpus is not None) + (crit.num_nodes is not None)
        if best is None or score > best[0]:
            best = (score, crit)
    if best is None:
        raise ValueError(
            f"no shipped criteria for gpu_model={gpu_model!r} num_gpus={num_gpus} "
            f"num_nodes={num_nodes}; pass --criteria FILE"
        )
    return best[1]
