"""nvidia-smi reader: the fallback when NVML cannot be loaded (DESIGN.md section 4.2).

Two text formats are parsed, both pure functions so tests feed recorded output:

- ``nvidia-smi -q``: the indented "key : value" report (one ``GPU <bus id>`` section per
  GPU), which also carries the ``Fabric`` block, remapped rows and recovery action;
- ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``: one CSV row
  per GPU, cheap enough to poll while a load runs.

The tool itself warns that its text is not a stable interface, so every field that
is missing or reads ``N/A`` becomes ``None`` (unknown), never a default.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence

from health.readings import (
    SMI_REASON_LABELS,
    FabricReading,
    GpuReading,
    decode_clock_event_reasons,
)

logger = logging.getLogger(__name__)

#: Fields asked of ``--query-gpu``, in the order ``parse_query_gpu_csv`` reads them.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "clocks.max.sm",
    "clocks.sm",
    "clocks.mem",
    "power.limit",
    "power.default_limit",
    "power.draw",
    "temperature.gpu",
    "clocks_event_reasons.active",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
)

_UNKNOWN = {"", "n/a", "[n/a]", "[not supported]", "not supported", "unknown", "[unknown error]"}
#: nvidia-smi health labels -> ``readings.FABRIC_HEALTH_FIELDS`` names.
_SMI_HEALTH_NAMES = {
    "route_recovery_in_progress": "route_recovery",
    "incorrect_configuration": "incorrect_configuration",
}
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_GPU_HEADER = re.compile(r"GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")


@dataclasses.dataclass
class _Node:
    key: str
    value: str | None
    children: list[_Node] = dataclasses.field(default_factory=list)

    def get(self, *path: str) -> _Node | None:
        node: _Node | None = self
        for part in path:
            assert node is not None
            node = next((c for c in node.children if c.key.lower() == part.lower()), None)
            if node is None:
                return None
        return node

    def text(self, *path: str) -> str | None:
        node = self.get(*path)
        if node is None or node.value is None or node.value.strip().lower() in _UNKNOWN:
            return None
        return node.value.strip()


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = _NUMBER.search(text)
    return float(match.group()) if match else None


def _int(text: str | None) -> int | None:
    value = _number(text)
    return None if value is None else int(value)


def _yes(text: str | None) -> bool | None:
    if text is None:
        return None
    return text.strip().lower() in {"yes", "true", "active", "enabled"}


def _tree(text: str) -> tuple[_Node, list[_Node]]:
    """Parse the indented report into a header node and one node per GPU section."""
    header = _Node("header", None)
    gpus: list[_Node] = []
    stack: list[tuple[int, _Node]] = [(-1, header)]
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, value = raw.strip().partition(":")
        node = _Node(key.strip(), value.strip() if sep else None)
        if indent == 0 and _GPU_HEADER.match(raw.strip()):
            node = _Node(raw.strip(), None)
            gpus.append(node)
            stack = [(0, node)]
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return header, gpus


def _fabric(section: _Node) -> FabricReading | None:
    fab = section.get("Fabric")
    if fab is None:
        return None
    health: dict[str, str] = {}
    block = fab.get("Health")
    if block is not None:
        for child in block.children:
            if child.value is None or child.value.strip().lower() in _UNKNOWN:
                continue
            name = re.sub(r"[^a-z0-9]+", "_", child.key.lower()).strip("_")
            value = re.sub(r"[^a-z0-9]+", "_", child.value.strip().lower()).strip("_")
            if name == "bandwidth":
                # nvidia-smi prints the DEGRADED_BW field as Full / Degraded.
                name, value = "degraded_bw", {"full": "false", "degraded": "true"}.get(value, value)
            health[_SMI_HEALTH_NAMES.get(name, name)] = value
    clique = fab.text("CliqueId")
    return FabricReading(
        state=fab.text("State") or "Not Supported",
        status=fab.text("Status"),
        clique_id=int(clique, 0) if clique is not None and _NUMBER.match(clique) else None,
        cluster_uuid=fab.text("ClusterUUID"),
        health=health,
    )


def _reasons(section: _Node) -> tuple[str, ...] | None:
    block = section.get("Clocks Event Reasons") or section.get("Clocks Throttle Reasons")
    if block is None:
        return None
    active: list[str] = []

    def walk(node: _Node) -> None:
        for child in node.children:
            name = SMI_REASON_LABELS.get(child.key.lower())
            if name is not None and child.value is not None and child.value.lower() == "active":
                active.append(name)
            walk(child)

    walk(block)
    return tuple(active)


def _processes(section: _Node) -> tuple[int, ...]:
    """Compute (type C or M+C) process ids; Type is nested under Process ID in recent
    drivers and a sibling after it in older ones."""
    block = section.get("Processes")
    if block is None:
        return ()
    pids = []
    kids = block.children
    for i, child in enumerate(kids):
        if child.key.lower() != "process id" or not child.value:
            continue
        kind = child.text("Type")
        if kind is None:
            nxt = next((k for k in kids[i + 1 :] if k.key.lower() in ("type", "process id")), None)
            kind = nxt.value if nxt is not None and nxt.key.lower() == "type" else None
        if kind is None or "C" in kind:
            pids.append(int(child.value))
    return tuple(sorted(pids))


def parse_smi_q(text: str) -> list[GpuReading]:
    """Parse the text of ``nvidia-smi -q`` into readings.

    Args:
        text: the whole report (all GPUs), as printed.

    Returns:
        One ``GpuReading`` per ``GPU <bus id>`` section, indexed 0.. in report order
        (nvidia-smi prints in NVML index order). NVLink fields stay ``None``: the
        report does not carry them (``SmiReader`` adds the active-link count from
        ``nvidia-smi nvlink -s``).

    Raises:
        ValueError: if the text holds no GPU section.
    """
    header, sections = _tree(text)
    if not sections:
        raise ValueError("no 'GPU <bus id>' section in nvidia-smi -q output")
    driver = header.text("Driver Version")
    cuda = header.text("CUDA Version")
    readings = []
    for index, sec in enumerate(sections):
        action = sec.text("GPU Recovery Action")
        readings.append(
            GpuReading(
                index=index,
                name=sec.text("Product Name") or "unknown",
                uuid=sec.text("GPU UUID"),
                pci_bus_id=sec.key.split(" ", 1)[1].strip(),
                driver_version=driver,
                cuda_version=cuda,
                max_sm_clock_mhz=_int(sec.text("Max Clocks", "SM")),
                sm_clock_mhz=_int(sec.text("Clocks", "SM")),
                mem_clock_mhz=_int(sec.text("Clocks", "Memory")),
                power_limit_w=_number(
                    sec.text("GPU Power Readings", "Current Power Limit")
                    or sec.text("Power Readings", "Enforced Power Limit")
                ),
                default_power_limit_w=_number(
                    sec.text("GPU Power Readings", "Default Power Limit")
                    or sec.text("Power Readings", "Default Power Limit")
                ),
                power_draw_w=_number(
                    sec.text("GPU Power Readings", "Instantaneous Power Draw")
                    or sec.text("GPU Power Readings", "Power Draw")
                    or sec.text("Power Readings", "Power Draw")
                ),
                temperature_c=_int(sec.text("Temperature", "GPU Current Temp")),
                clock_event_reasons=_reasons(sec),
                ecc_uncorrected_volatile=_ecc_sum(sec, "Volatile"),
                ecc_uncorrected_aggregate=_ecc_sum(sec, "Aggregate"),
                remapped_rows_uncorrectable=_int(sec.text("Remapped Rows", "Uncorrectable Error")),
                remapped_rows_pending=_yes(sec.text("Remapped Rows", "Pending")),
                remapped_rows_failure=_yes(sec.text("Remapped Rows", "Remapping Failure Occurred")),
                recovery_action=(
                    None if action is None else re.sub(r"[^a-z0-9]+", "_", action.lower())
                ),
                num_compute_processes=len(_processes(sec)),
                compute_pids=_processes(sec),
                fabric=_fabric(sec),
            )
        )
    return readings


def _ecc_sum(section: _Node, kind: str) -> int | None:
    block = section.get("ECC Errors", kind)
    if block is None:
        return None
    values = [
        _int(c.value)
        for c in block.children
        if "uncorr" in c.key.lower() and c.value and c.value.strip().lower() not in _UNKNOWN
    ]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def parse_query_gpu_csv(text: str) -> list[GpuReading]:
    """Parse ``--query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits`` output.

    Args:
        text: one CSV row per GPU, columns in ``QUERY_FIELDS`` order.

    Returns:
        One reading per row; fabric, ECC detail and process fields stay ``None``.

    Raises:
        ValueError: if a row does not have ``len(QUERY_FIELDS)`` columns.
    """
    readings = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(QUERY_FIELDS):
            raise ValueError(f"expected {len(QUERY_FIELDS)} columns, got {len(cols)}: {line!r}")
        row = {
            f: (None if c.lower() in _UNKNOWN else c)
            for f, c in zip(QUERY_FIELDS, cols, strict=True)
        }
        mask = row["clocks_event_reasons.active"]
        readings.append(
            GpuReading(
                index=int(row["index"] or 0),
                name=row["name"] or "unknown",
                uuid=row["uuid"],
                pci_bus_id=row["pci.bus_id"],
                driver_version=row["driver_version"],
                max_sm_clock_mhz=_int(row["clocks.max.sm"]),
                sm_clock_mhz=_int(row["clocks.sm"]),
                mem_clock_mhz=_int(row["clocks.mem"]),
                power_limit_w=_number(row["power.limit"]),
                default_power_limit_w=_number(row["power.default_limit"]),
                power_draw_w=_number(row["power.draw"]),
                temperature_c=_int(row["temperature.gpu"]),
                clock_event_reasons=(
                    None if mask is None else decode_clock_event_reasons(int(mask, 16))
                ),
                ecc_uncorrected_volatile=_int(row["ecc.errors.uncorrected.volatile.total"]),
                ecc_uncorrected_aggregate=_int(row["ecc.errors.uncorrected.aggregate.total"]),
            )
        )
    return readings


def parse_nvlink_status(text: str) -> dict[int, int]:
    """Parse ``nvidia-smi nvlink -s`` into active-link counts.

    Args:
        text: the output: a ``GPU <i>: <name> (UUID: ...)`` line per GPU followed by
            ``Link <n>: <speed> GB/s`` lines (``<inactive>`` for a down link).

    Returns:
        GPU index -> number of links with a speed.
    """
    counts: dict[int, int] = {}
    current: int | None = None
    for line in text.splitlines():
        head = re.match(r"GPU (\d+):", line.strip())
        if head:
            current = int(head.group(1))
            counts[current] = 0
            continue
        link = re.match(r"Link \d+:\s*(.*)$", line.strip())
        if link and current is not None and _NUMBER.match(link.group(1)):
            counts[current] += 1
    return counts


class SmiReader:
    """Reads GPUs by running ``nvidia-smi -q`` (fallback when NVML is unavailable)."""

    source = "nvidia-smi"

    def __init__(
        self,
        executable: str = "nvidia-smi",
        timeout_s: float = 30.0,
        runner: Callable[[Sequence[str]], str] | None = None,
    ) -> None:
        """Create a reader.

        Args:
            executable: the nvidia-smi program name or path.
            timeout_s: seconds one nvidia-smi call may take before it counts as failed.
            runner: returns nvidia-smi's stdout for an argument list, raising
                RuntimeError on failure; None runs the program. Tests pass recorded
                output here.
        """
        self._exe = executable
        self._timeout_s = timeout_s
        self._runner = runner

    def _run(self, *args: str) -> str:
        if self._runner is not None:
            return self._runner(args)
        if shutil.which(self._exe) is None:
            raise RuntimeError(f"{self._exe} not found on PATH")
        try:
            proc = subprocess.run(
                [self._exe, *args], capture_output=True, text=True, timeout=self._timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"{self._exe} {' '.join(args)} timed out") from exc
        if proc.returncode != 0:
            raise RuntimeError(f"{self._exe} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def read(self) -> list[GpuReading]:
        """Run ``nvidia-smi -q`` (and ``nvlink -s`` for link counts) and parse them.

        Returns:
            One reading per GPU.

        Raises:
            RuntimeError: when nvidia-smi is missing, fails or times out.
        """
        readings = parse_smi_q(self._run("-q"))
        try:
            links = parse_nvlink_status(self._run("nvlink", "-s"))
        except RuntimeError as exc:
            logger.info("nvidia-smi nvlink -s unavailable: %s", exc)
            return readings
        return [
            dataclasses.replace(r, nvlink_active_links=links[r.index]) if r.index in links else r
            for r in readings
        ]

    def read_query(self) -> list[GpuReading]:
        """Run the cheap ``--query-gpu`` form (used for sampling under load).

        Returns:
            One reading per GPU.

        Raises:
            RuntimeError: when nvidia-smi is missing, fails or times out.
        """
        fields = ",".join(QUERY_FIELDS)
        return parse_query_gpu_csv(
            self._run(f"--query-gpu={fields}", "--format=csv,noheader,nounits")
        )
