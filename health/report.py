"""``HealthReport``: the judged gate, as records, JSON and a table."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from health.inventory import InventoryFacts
from health.judge import FAILED, HANG, CheckOutcome
from health.results import GateResults
from health.timeouts import EXIT_FAILED, EXIT_HANG, EXIT_OK

logger = logging.getLogger(__name__)

HEALTH_PREFIX = "AXBGATE_HEALTH"
ALLOCATION_PREFIX = "AXBGATE_ALLOCATION"


@dataclasses.dataclass(frozen=True)
class HealthReport:
    """The outcome of one health gate on one allocation (or this machine)."""

    checks: tuple[CheckOutcome, ...]
    verdict: str
    """``healthy`` / ``degraded`` / ``failed``."""
    inventory: InventoryFacts | None
    criteria_name: str
    criteria_source: str
    topology: str
    """``<nodes>x<GPUs per node> <model> <interconnect>``, e.g. ``1x2 H200 NVLink``."""
    clock_bin: str | None = None
    """Bin of the lowest max SM clock (``healthy``/``degraded``/``unknown``)."""
    max_sm_clock_mhz: int | None = None
    """Lowest max SM clock over the allocation's GPUs, MHz."""
    power_limit_w: float | None = None
    """Lowest enforced power limit over the GPUs, W."""
    duration_s: float = 0.0
    """Wall time of the whole gate, s."""
    results: GateResults | None = None
    """The raw measurements (kept for the JSON output and debugging)."""
    node_rank: int = 0
    """Which node produced this report; node 0's is the allocation's record."""

    @property
    def hung(self) -> bool:
        """True when any check is HANG."""
        return any(c.status == HANG for c in self.checks)

    @property
    def exit_code(self) -> int:
        """CLI exit status: 3 on a hang, 1 on failed, else 0 (degraded runs are allowed)."""
        if self.hung:
            return EXIT_HANG
        return EXIT_FAILED if self.verdict == FAILED else EXIT_OK

    def allocation_record(self) -> dict[str, Any]:
        """The ``AXBGATE_ALLOCATION`` object (docs/record-contract.md).

        Returns:
            The record with unknown optional keys left out.
        """
        inv = self.inventory
        rec: dict[str, Any] = {"v": 1, "health_verdict": self.verdict}
        if inv is not None:
            per_node = set(inv.gpus_per_node)
            rec.update(
                hostnames=list(inv.hostnames),
                num_nodes=inv.num_nodes,
                gpu_model=inv.gpu_model,
                gpus_per_node=per_node.pop() if len(per_node) == 1 else list(inv.gpus_per_node),
                num_gpus=inv.num_gpus,
                driver_version=inv.driver_version,
                cuda_version=inv.cuda_version,
                nccl_version=inv.nccl_version,
                torch_version=inv.torch_version,
                scheduler_job_id=inv.scheduler_job_id,
                cluster=inv.cluster,
            )
        rec.update(
            topology=self.topology,
            clock_bin=self.clock_bin,
            max_sm_clock_mhz=self.max_sm_clock_mhz,
            power_limit_w=self.power_limit_w,
            criteria=self.criteria_name,
            duration_s=round(self.duration_s, 3),
        )
        return {k: v for k, v in rec.items() if v is not None}

    def to_records(self) -> list[str]:
        """Record-contract lines: one ``AXBGATE_HEALTH`` per check, then the allocation.

        Returns:
            Lines ``"<PREFIX> <json>"`` without newlines.
        """
        lines = [
            f"{HEALTH_PREFIX} {json.dumps(c.to_record(), sort_keys=True)}" for c in self.checks
        ]
        lines.append(f"{ALLOCATION_PREFIX} {json.dumps(self.allocation_record(), sort_keys=True)}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the CLI's ``--json`` output).

        Returns:
            Verdict, allocation record, checks and rank exits.
        """
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "criteria": self.criteria_name,
            "criteria_source": self.criteria_source,
            "allocation": self.allocation_record(),
            "inventory": None if self.inventory is None else dataclasses.asdict(self.inventory),
            "checks": [c.to_record() for c in self.checks],
        }
        if self.results is not None:
            out["stage_seconds"] = dict(self.results.stage_seconds)
            out["ranks"] = [dataclasses.asdict(x) for x in self.results.rank_exits]
        return out

    def format_table(self) -> str:
        """Human-readable table of the checks and the verdict.

        Returns:
            Multi-line text.
        """
        rows = [("STATUS", "CHECK", "WHERE", "MESSAGE")]
        for c in self.checks:
            where = c.host or "-"
            if c.gpu_index is not None:
                where += f":gpu{c.gpu_index}"
            rows.append((c.status, c.check, where, c.message.replace("\n", " ")[:110]))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        text = [
            "  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows
        ]
        text.append("")
        text.append(
            f"allocation: {self.verdict}  topology: {self.topology}  criteria: "
            f"{self.criteria_name}  clock bin: {self.clock_bin}  "
            f"gate time: {self.duration_s:.1f} s"
        )
        return "\n".join(text)
