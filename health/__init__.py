"""Health gate: prove an allocation before any timing counts (DESIGN.md sections 4, 5).

Probes (one module each, reporting only): ``inventory``, ``network``, ``clocks``
(NVML reader ``nvml`` with the ``smi`` nvidia-smi fallback, both producing
``readings.GpuReading``), ``fabric``, ``collectives``, ``load``. Decisions:
``criteria`` (data files in ``health/criteria/``) and the pure ``judge`` (with
``gpu_rules`` and ``outcome``). Launch: the pure ``preamble`` and the single
hard-timeout wrapper ``timeouts``. ``gate.run_health_gate`` spawns or becomes the
ranks (``rank``), collects ``results`` and returns a ``report.HealthReport``;
``cli.main`` is ``python -m health`` / ``axbgate health``.

This package never imports ``orchestrator`` or ``trainer``.
"""

from health.criteria import Criteria, load_criteria, select_criteria
from health.gate import run_health_gate
from health.judge import CheckOutcome, allocation_verdict, judge
from health.preamble import NodeAddressFacts, Preamble, build_preamble, derive_master_port
from health.report import HealthReport
from health.results import GateResults

__all__ = [
    "CheckOutcome",
    "Criteria",
    "GateResults",
    "HealthReport",
    "NodeAddressFacts",
    "Preamble",
    "allocation_verdict",
    "build_preamble",
    "derive_master_port",
    "judge",
    "load_criteria",
    "run_health_gate",
    "select_criteria",
]
