"""Record-contract parser: a pure function from log text to records.

Reads the product dialect (``AXBGATE_STEP``, ``AXBGATE_TIMING``, ``AXBGATE_RESULT``,
``AXBGATE_PROVENANCE``, ``AXBGATE_HEALTH``, ``AXBGATE_ALLOCATION``) and the existing LTX-2
MFU harness dialect (``BF16_STEP``, ``BF16_TIMING``, ``BF16_RESULT``, ``BF16_SEMANTICS``,
``HEALTH_GATE``). The contract is specified in ``docs/record-contract.md`` (DESIGN.md
section 7). Unknown keys are kept in ``extra`` dictionaries, never dropped. No I/O here:
callers read the file and hash it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from orchestrator.domain.errors import RecordError
from orchestrator.domain.record_types import HealthRecord, ParsedLog, StepRecord

__all__ = [
    "RECORD_PREFIXES",
    "HealthRecord",
    "ParsedLog",
    "RecordParser",
    "StepRecord",
    "health_check_rows",
    "parse",
    "step_row",
]

RECORD_PREFIXES = (
    "AXBGATE_STEP",
    "AXBGATE_TIMING",
    "AXBGATE_RESULT",
    "AXBGATE_PROVENANCE",
    "AXBGATE_HEALTH",
    "AXBGATE_ALLOCATION",
    "AXBGATE_TIMELINE",
    "BF16_STEP",
    "BF16_TIMING",
    "BF16_RESULT",
    "BF16_SEMANTICS",
    "HEALTH_GATE",
)

# A prefix may follow a launcher tag such as "[rank0]:" or "[default0]:" but must start
# a whitespace/colon-delimited token, so "XBF16_STEP" is not a record, and must be
# followed by a JSON value, so prose that mentions a prefix is not a record either.
_LINE_RE = re.compile(
    r"(?:^|[\s:\]])(?P<prefix>" + "|".join(RECORD_PREFIXES) + r")\b(?P<sep>[\s:=]*)(?P<body>[\[{].*)$"
)

_HEALTH_STATUSES = ("PASS", "WARN", "FAIL", "HANG")

# Harness keys (DESIGN.md section 7) -> product names.
_HARNESS_RESULT_KEYS = {
    "true_wall_median_step_sec": "median_step_s",
    "true_wall_model_mfu_percent": "mfu_pct",
    "samples_per_second_from_true_wall_median": "samples_per_s",
    "peak_allocated_max_rank_bytes": "peak_allocated_bytes",
    "peak_reserved_max_rank_bytes": "peak_reserved_bytes",
    "local_batch_size": "local_batch_size",
    "gradient_accumulation_steps": "grad_accum_steps",
    "world_size": "world_size",
}
_HARNESS_STEP_TIME_KEYS = ("true_wall_slowest_rank_sec", "slowest_rank_step_sec", "step_sec")
_HARNESS_WARMUP_KEYS = ("warmup_steps", "num_warmup_steps")
_HARNESS_MEASURED_KEYS = ("measured_steps", "num_measured_steps")








def _float(obj: dict[str, Any], key: str, line_no: int, *, required: bool) -> float | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(line_no, f"missing required key {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(line_no, f"key {key!r} must be a number, got {value!r}")
    return float(value)


def _int(obj: dict[str, Any], key: str, line_no: int, *, required: bool) -> int | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(line_no, f"missing required key {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise RecordError(line_no, f"key {key!r} must be an integer, got {value!r}")
    return int(value)


def _float_list(value: Any, key: str, line_no: int) -> list[float]:
    if not isinstance(value, list) or not value:
        raise RecordError(line_no, f"key {key!r} must be a non-empty list of numbers")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise RecordError(line_no, f"{key}[{i}] must be a number, got {item!r}")
        out.append(float(item))
    return out


def _first_key(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in obj), None)


def _parse_step(obj: dict[str, Any], line_no: int, harness: bool) -> StepRecord:
    known = {"v", "step", "slowest_rank_step_s", "rank_step_s", "loss", "grad_norm", "phase"}
    if harness:
        time_key = _first_key(obj, _HARNESS_STEP_TIME_KEYS)
        if time_key is None:
            raise RecordError(
                line_no, f"BF16_STEP needs one of {', '.join(_HARNESS_STEP_TIME_KEYS)}"
            )
        slowest = _float(obj, time_key, line_no, required=True)
        known |= {time_key}
    else:
        slowest = _float(obj, "slowest_rank_step_s", line_no, required=True)
    assert slowest is not None
    if not math.isfinite(slowest) or slowest <= 0:
        raise RecordError(line_no, f"step time must be a positive finite number, got {slowest}")
    phase = obj.get("phase")
    if phase is None and isinstance(obj.get("warmup"), bool):
        phase = "warmup" if obj["warmup"] else "measured"
        known.add("warmup")
    return StepRecord(
        line_no=line_no,
        step=_int(obj, "step", line_no, required=True),  # type: ignore[arg-type]
        slowest_rank_step_s=slowest,
        rank_step_s=_float(obj, "rank_step_s", line_no, required=False),
        # loss and grad_norm may be NaN/inf in JSON ("NaN"): kept as floats so the
        # run can be failed for it, not rejected as unparsable.
        loss=_float(obj, "loss", line_no, required=False),
        grad_norm=_float(obj, "grad_norm", line_no, required=False),
        phase=phase,
        extra={k: v for k, v in obj.items() if k not in known},
    )


def _parse_timing(obj: dict[str, Any], line_no: int, harness: bool) -> dict[str, Any]:
    if harness:
        key = _first_key(obj, _HARNESS_STEP_TIME_KEYS + ("slowest_rank_step_s",))
        warm_key = _first_key(obj, _HARNESS_WARMUP_KEYS)
        meas_key = _first_key(obj, _HARNESS_MEASURED_KEYS)
    else:
        key, warm_key, meas_key = "slowest_rank_step_s", "num_warmup_steps", "num_measured_steps"
        for required in (key, warm_key, meas_key):
            if required not in obj:
                raise RecordError(line_no, f"AXBGATE_TIMING is missing required key {required!r}")
    timing: dict[str, Any] = {
        "slowest_rank_step_s": _float_list(obj[key], key, line_no) if key else None,
        "num_warmup_steps": _int(obj, warm_key, line_no, required=False) if warm_key else None,
        "num_measured_steps": _int(obj, meas_key, line_no, required=False) if meas_key else None,
    }
    for name in ("num_warmup_steps", "num_measured_steps"):
        if timing[name] is not None and timing[name] < 0:
            raise RecordError(line_no, f"{name} must be >= 0, got {timing[name]}")
    if timing["slowest_rank_step_s"] and any(
        not math.isfinite(t) or t <= 0 for t in timing["slowest_rank_step_s"]
    ):
        raise RecordError(line_no, "every slowest_rank_step_s must be a positive finite number")
    if "per_rank_step_s" in obj:
        timing["per_rank_step_s"] = obj["per_rank_step_s"]
    used = {key, warm_key, meas_key, "per_rank_step_s", "v"}
    timing["extra"] = {k: v for k, v in obj.items() if k not in used}
    return timing


def _parse_result(obj: dict[str, Any], line_no: int, harness: bool) -> dict[str, Any]:
    if harness:
        result = {_HARNESS_RESULT_KEYS.get(k, k): v for k, v in obj.items()}
    else:
        result = dict(obj)
        for required in ("median_step_s", "world_size", "local_batch_size", "grad_accum_steps"):
            if result.get(required) is None and result.get("status") != "failed":
                raise RecordError(line_no, f"AXBGATE_RESULT is missing required key {required!r}")
    for key in ("median_step_s", "mfu_pct", "samples_per_s"):
        if key in result and result[key] is not None:
            _float(result, key, line_no, required=True)
    for key in ("world_size", "local_batch_size", "grad_accum_steps"):
        if key in result and result[key] is not None:
            _int(result, key, line_no, required=True)
    result.pop("v", None)
    return result


def _parse_health(obj: dict[str, Any], line_no: int, harness: bool) -> HealthRecord:
    if harness:
        check = obj.get("phase") or obj.get("check")
        if not isinstance(check, str):
            raise RecordError(line_no, "HEALTH_GATE needs a string 'phase'")
        status = obj.get("status")
        measured = {
            k: obj[k]
            for k in ("slowest_rank_bus_gbps", "p50_ms", "p95_ms", "value", "expected")
            if k in obj
        }
        threshold = {}
    else:
        check = obj.get("check")
        if not isinstance(check, str) or not check:
            raise RecordError(line_no, "AXBGATE_HEALTH is missing required key 'check'")
        status = obj.get("status")
        if status is None:
            raise RecordError(line_no, "AXBGATE_HEALTH is missing required key 'status'")
        measured = obj.get("measured") or {}
        threshold = obj.get("threshold") or {}
    if status is not None:
        status = str(status).upper()
        if status not in _HEALTH_STATUSES:
            raise RecordError(
                line_no, f"health status must be one of {', '.join(_HEALTH_STATUSES)}, got {status!r}"
            )
    return HealthRecord(
        line_no=line_no,
        check=check,
        status=status,
        measured=measured,
        threshold=threshold,
        message=obj.get("message"),
        host=obj.get("host"),
        raw=obj,
    )


def _load_json(body: str, prefix: str, line_no: int) -> dict[str, Any]:
    body = body.strip()
    if not body.startswith("{"):
        raise RecordError(line_no, f"{prefix} must be followed by a JSON object")
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise RecordError(line_no, f"{prefix}: invalid JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(obj, dict):
        raise RecordError(line_no, f"{prefix} must be followed by a JSON object")
    return obj


class RecordParser:
    """Incremental parser: feed lines as a run prints them, then :meth:`finish`.

    The driver feeds every complete output line while the run is going (so step
    records can be streamed to the gate folder as they arrive) and gets the whole
    :class:`ParsedLog` at the end: each line is parsed exactly once.

    The first malformed record line is remembered (``error``) and later lines are still
    read, so what was printed before the bad line is kept; :meth:`finish` raises it.
    """

    def __init__(self) -> None:
        self.parsed = ParsedLog()
        self.error: RecordError | None = None
        self._dialects: set[str] = set()
        self._line_no = 0

    def feed(self, line: str) -> StepRecord | None:
        """Parse one line (without its newline).

        Returns:
            The step record when the line is a valid step record, else ``None``.
        """
        self._line_no += 1
        if "_" not in line:
            return None
        match = _LINE_RE.search(line)
        if match is None:
            return None
        try:
            return self._record(match, self._line_no)
        except RecordError as exc:
            if self.error is None:
                self.error = exc
            return None

    def _record(self, match: re.Match[str], line_no: int) -> StepRecord | None:
        parsed = self.parsed
        prefix = match["prefix"]
        obj = _load_json(match["body"], prefix, line_no)
        harness = not prefix.startswith("AXBGATE_")
        self._dialects.add("bf16" if harness else "axbgate")
        parsed.num_record_lines += 1
        kind = prefix.split("_", 1)[1] if prefix != "HEALTH_GATE" else "HEALTH"
        if kind == "STEP":
            step = _parse_step(obj, line_no, harness)
            parsed.steps.append(step)
            return step
        if kind == "TIMING":
            if parsed.timing is not None:
                raise RecordError(line_no, f"second {prefix} record (one per run)")
            parsed.timing = _parse_timing(obj, line_no, harness)
        elif kind == "RESULT":
            if parsed.result is not None:
                raise RecordError(line_no, f"second {prefix} record (one per run)")
            parsed.result = _parse_result(obj, line_no, harness)
        elif kind in ("PROVENANCE", "SEMANTICS"):
            parsed.provenance.update({k: v for k, v in obj.items() if k != "v"})
        elif kind == "HEALTH":
            parsed.health.append(_parse_health(obj, line_no, harness))
        elif kind == "TIMELINE":
            parsed.timeline = {k: v for k, v in obj.items()
                               if k != "v" and isinstance(v, (int, float)) and not isinstance(v, bool)}
        elif kind == "ALLOCATION":
            if "health_verdict" not in obj:
                raise RecordError(line_no, "AXBGATE_ALLOCATION is missing 'health_verdict'")
            parsed.allocation = {k: v for k, v in obj.items() if k != "v"}
        return None

    def finish(self) -> ParsedLog:
        """Close the log and return what it held.

        Raises:
            RecordError: The first malformed record line (names the 1-based line).
        """
        if self.error is not None:
            raise self.error
        parsed = self.parsed
        if parsed.timing is not None and parsed.timing["slowest_rank_step_s"] is None:
            # Harness timing record without the list: fall back to the step lines.
            parsed.timing["slowest_rank_step_s"] = (
                [s.slowest_rank_step_s for s in sorted(parsed.steps, key=lambda s: s.step)] or None
            )
        if parsed.timing is not None and parsed.result is not None:
            # Harness logs may carry counts only on the result record.
            for key, keys in (
                ("num_warmup_steps", _HARNESS_WARMUP_KEYS),
                ("num_measured_steps", _HARNESS_MEASURED_KEYS),
            ):
                if parsed.timing.get(key) is None:
                    found = _first_key(parsed.result, keys)
                    if found is not None:
                        parsed.timing[key] = int(parsed.result[found])
        dialects = self._dialects
        parsed.dialect = None if not dialects else ("mixed" if len(dialects) > 1 else next(iter(dialects)))
        return parsed


def parse(text: str) -> ParsedLog:
    """Parse every record line of a run log.

    Args:
        text: The whole log as text (any mix of record and non-record lines).

    Returns:
        A :class:`ParsedLog`. Non-record lines are ignored.

    Raises:
        RecordError: A record line is malformed (bad JSON, missing or mistyped required
            key, unknown health status, a second timing or result record); the error
            names the 1-based line number.
    """
    parser = RecordParser()
    for line in text.splitlines():
        parser.feed(line)
    return parser.finish()


def step_row(step: StepRecord) -> dict[str, Any]:
    """The stored form of a step record (``run_steps`` columns), JSON-safe."""
    return {"step": step.step, "slowest_rank_step_s": step.slowest_rank_step_s,
            "rank_step_s": step.rank_step_s, "loss": step.loss, "grad_norm": step.grad_norm,
            "phase": step.phase}


def health_check_rows(parsed: ParsedLog) -> list[dict[str, Any]]:
    """Health-check row values from the parsed ``AXBGATE_HEALTH`` / ``HEALTH_GATE`` records.

    A harness line without a status is stored as ``PASS`` (the harness prints only checks
    that completed; failures abort it).
    """
    return [
        {
            "name": h.check,
            "status": h.status or "PASS",
            "host": h.host,
            "measured": h.measured,
            "threshold": h.threshold,
            "message": h.message,
            "raw": h.raw,
        }
        for h in parsed.health
    ]
