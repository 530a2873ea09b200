"""From one decoded record object to its typed fields, for both dialects (pure).

The product dialect (``AXBGATE_*``) is specified in docs/record-contract.md. The harness
dialect is the LTX-2 MFU campaign's (the files in shared/seed_harness print it): every
variant prints ``BF16_STEP {"step", "step_time_sec"}`` with rank 0's OWN step time; the
fuller variants add ``BF16_TIMING`` (``true_wall_slowest_rank_sec``: the authoritative
per-step slowest-rank wall times, warmup included; ``internal_slowest_rank_sec``: the
trainer timer's), ``BF16_SEMANTICS`` and a ``BF16_RESULT`` whose keys differ per variant
(``median_step_sec`` / ``model_mfu_percent`` / ``samples_per_second`` in the short ones,
``true_wall_*`` / ``internal_*`` / peak memory / batch in the full ones). The probe
prints one ``HEALTH_GATE`` line per rank and phase.
"""

from __future__ import annotations

import math
from typing import Any

from orchestrator.domain.errors import RecordError
from orchestrator.domain.record_limits import check_int64
from orchestrator.domain.record_types import HealthRecord, StepRecord

__all__ = [
    "HARNESS_MEASURED_KEYS",
    "HARNESS_WARMUP_KEYS",
    "HEALTH_VERDICTS",
    "check_provenance",
    "parse_allocation",
    "parse_health",
    "parse_result",
    "parse_step",
    "parse_timing",
]

_HEALTH_STATUSES = ("PASS", "WARN", "FAIL", "HANG")

# Harness BF16_RESULT keys -> product names. The true-wall numbers win; the short
# variants' keys are read only when the true-wall ones are absent.
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
_HARNESS_RESULT_FALLBACK = {
    "median_step_sec": "median_step_s",
    "model_mfu_percent": "mfu_pct",
    "samples_per_second": "samples_per_s",
}
# Per-step slowest-rank keys (the first present wins); internal_slowest_rank_sec is the
# trainer timer's series, used only when no wall-clock series was printed.
_HARNESS_SLOWEST_KEYS = ("true_wall_slowest_rank_sec", "slowest_rank_step_sec", "step_sec")
_HARNESS_TIMING_KEYS = _HARNESS_SLOWEST_KEYS + ("slowest_rank_step_s", "internal_slowest_rank_sec")
HARNESS_WARMUP_KEYS = ("warmup_steps", "num_warmup_steps")
HARNESS_MEASURED_KEYS = ("measured_steps", "num_measured_steps")
_HEALTH_TEXT_KEYS = ("phase", "check", "status", "host", "message")


def _float(obj: dict[str, Any], key: str, line_no: int, *, required: bool) -> float | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(line_no, f"missing required key {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(line_no, f"key {key!r} must be a number, got {str(value)[:80]!r}")
    return float(value)


def _int(obj: dict[str, Any], key: str, line_no: int, *, required: bool) -> int | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(line_no, f"missing required key {key!r}")
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not value.is_integer())):
        raise RecordError(line_no, f"key {key!r} must be an integer, got {str(value)[:80]!r}")
    try:
        return check_int64(int(value))
    except ValueError as exc:
        raise RecordError(line_no, f"key {key!r}: {exc}") from None


def _float_list(value: Any, key: str, line_no: int) -> list[float]:
    if not isinstance(value, list) or not value:
        raise RecordError(line_no, f"key {key!r} must be a non-empty list of numbers")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise RecordError(line_no, f"{key}[{i}] must be a number, got {str(item)[:80]!r}")
        item = float(item)
        if not math.isfinite(item) or item <= 0:
            raise RecordError(line_no, f"{key}[{i}] must be a positive finite number of seconds, "
                                       f"got {item}")
        out.append(item)
    return out


def _first_key(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in obj), None)


def _step_seconds(value: float | None, key: str, line_no: int) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise RecordError(line_no, f"{key} must be a positive finite number of seconds, got {value}")
    return value


_STEP_KNOWN = frozenset({"v", "step", "slowest_rank_step_s", "rank_step_s", "loss", "grad_norm", "phase",
                         "lr"})
_INF = math.inf
_INT64_MAX = 2**63 - 1
_PHASES = frozenset({"warmup", "measured"})


def _step_index(obj: dict[str, Any], line_no: int) -> int:
    step = obj.get("step")
    if type(step) is not int or not 0 <= step <= 2**63 - 1:
        step = _int(obj, "step", line_no, required=True)
        if step is None or step < 0:
            raise RecordError(line_no, f"step must be >= 0, got {step}")
    return step


def _seconds(obj: dict[str, Any], key: str | None, line_no: int, required: bool) -> float | None:
    value = obj.get(key) if key else None
    if type(value) is float and 0.0 < value < _INF:  # the common case, checked fast
        return value
    if key is None:
        return None
    return _step_seconds(_float(obj, key, line_no, required=required), key, line_no)


def _optional_float(obj: dict[str, Any], key: str, line_no: int) -> float | None:
    value = obj.get(key)
    return value if value is None or type(value) is float else _float(obj, key, line_no, required=False)


def parse_step(obj: dict[str, Any], line_no: int, harness: bool) -> StepRecord:
    """Fields of an ``AXBGATE_STEP`` / ``BF16_STEP`` record.

    ``BF16_STEP`` carries rank 0's own ``step_time_sec`` (stored as ``rank_step_s``); a
    slowest-rank key (``true_wall_slowest_rank_sec``, ...) is read when present. Only the
    fields below are stored; other keys are kept in ``extra`` unchecked.

    Raises:
        RecordError: A required key is missing, or a value has the wrong type or range.
    """
    if not harness:  # the bundled trainer's lines: every field checked in one expression
        step, slowest, rank = obj.get("step"), obj.get("slowest_rank_step_s"), obj.get("rank_step_s")
        loss, grad_norm, phase = obj.get("loss"), obj.get("grad_norm"), obj.get("phase")
        if (type(step) is int and 0 <= step <= _INT64_MAX and type(slowest) is float and 0.0 < slowest < _INF
                and (rank is None or (type(rank) is float and 0.0 < rank < _INF))
                and (loss is None or type(loss) is float) and (grad_norm is None or type(grad_norm) is float)
                and (phase is None or phase in _PHASES)):
            extra = {} if _STEP_KNOWN.issuperset(obj) else {k: v for k, v in obj.items() if k not in _STEP_KNOWN}
            return StepRecord(line_no, step, slowest, rank, loss, grad_norm, phase, extra)
    known = _STEP_KNOWN
    time_key: str | None = "slowest_rank_step_s"
    rank_key = "rank_step_s"
    if harness:
        time_key = _first_key(obj, _HARNESS_SLOWEST_KEYS)
        rank_key = "step_time_sec" if "step_time_sec" in obj else "rank_step_s"
        if time_key is None and rank_key not in obj:
            raise RecordError(line_no, "BF16_STEP needs step_time_sec (rank 0's step time) or "
                                       f"one of {', '.join(_HARNESS_SLOWEST_KEYS)}")
        known = known | {time_key or "", rank_key}
    phase = obj.get("phase")
    if phase is None and isinstance(obj.get("warmup"), bool):
        phase = "warmup" if obj["warmup"] else "measured"
        known = known | {"warmup"}
    if phase is not None and not (isinstance(phase, str) and len(phase) <= 16
                                  and phase.isascii() and phase.isprintable()):
        raise RecordError(line_no, "phase must be printable ASCII of at most 16 characters, "
                                   f"got {str(phase)[:40]!r}")
    return StepRecord(
        line_no=line_no,
        step=_step_index(obj, line_no),
        slowest_rank_step_s=_seconds(obj, time_key, line_no, required=not harness),
        rank_step_s=_seconds(obj, rank_key, line_no, required=False),
        # loss and grad_norm may be NaN/inf in JSON ("NaN"): kept as floats so the
        # run can be failed for it, not rejected as unparsable.
        loss=_optional_float(obj, "loss", line_no),
        grad_norm=_optional_float(obj, "grad_norm", line_no),
        phase=phase,
        extra={} if known.issuperset(obj) else {k: v for k, v in obj.items() if k not in known},
    )


def parse_timing(obj: dict[str, Any], line_no: int, harness: bool) -> dict[str, Any]:
    """Fields of an ``AXBGATE_TIMING`` / ``BF16_TIMING`` record.

    The per-step list may be omitted when every step was printed as a step record (it
    must be, past about 50,000 steps: a record line is at most 1 MiB).

    Raises:
        RecordError: A count is missing (product dialect), negative or mistyped, or a
            per-step time is not a positive finite number.
    """
    if harness:
        key = _first_key(obj, _HARNESS_TIMING_KEYS)
        warm_key = _first_key(obj, HARNESS_WARMUP_KEYS)
        meas_key = _first_key(obj, HARNESS_MEASURED_KEYS)
    else:
        key = "slowest_rank_step_s" if "slowest_rank_step_s" in obj else None
        warm_key, meas_key = "num_warmup_steps", "num_measured_steps"
        for required in (warm_key, meas_key):
            if required not in obj:
                raise RecordError(line_no, f"AXBGATE_TIMING is missing required key {required!r}")
    timing: dict[str, Any] = {
        "slowest_rank_step_s": _float_list(obj[key], key, line_no) if key else None,
        "series_key": key,
        "num_warmup_steps": _int(obj, warm_key, line_no, required=False) if warm_key else None,
        "num_measured_steps": _int(obj, meas_key, line_no, required=False) if meas_key else None,
    }
    for name in ("num_warmup_steps", "num_measured_steps"):
        if timing[name] is not None and timing[name] < 0:
            raise RecordError(line_no, f"{name} must be >= 0, got {timing[name]}")
    if key != "internal_slowest_rank_sec" and "internal_slowest_rank_sec" in obj:
        timing["internal_slowest_rank_s"] = _float_list(
            obj["internal_slowest_rank_sec"], "internal_slowest_rank_sec", line_no)
    if "per_rank_step_s" in obj:
        timing["per_rank_step_s"] = obj["per_rank_step_s"]
    used = {key, warm_key, meas_key, "per_rank_step_s", "internal_slowest_rank_sec", "v"}
    timing["extra"] = {k: v for k, v in obj.items() if k not in used}
    return timing


def parse_result(obj: dict[str, Any], line_no: int, harness: bool) -> dict[str, Any]:
    """Fields of an ``AXBGATE_RESULT`` / ``BF16_RESULT`` record, with product key names.

    Raises:
        RecordError: A required key is missing (product dialect) or a known number has
            the wrong type.
    """
    if harness:
        result = {_HARNESS_RESULT_KEYS.get(k, k): v for k, v in obj.items()}
        for src, dst in _HARNESS_RESULT_FALLBACK.items():
            if dst not in result and src in obj:
                result[dst] = obj[src]
    else:
        result = dict(obj)
        for required in ("median_step_s", "world_size", "local_batch_size", "grad_accum_steps"):
            if result.get(required) is None and result.get("status") != "failed":
                raise RecordError(line_no, f"AXBGATE_RESULT is missing required key {required!r}")
    for key in ("median_step_s", "mfu_pct", "samples_per_s", "mfu_numerator_pct_s",
                "peak_flops_per_gpu"):
        if result.get(key) is not None:
            result[key] = _float(result, key, line_no, required=True)
    for key in ("world_size", "local_batch_size", "grad_accum_steps", "peak_allocated_bytes",
                "peak_reserved_bytes", "flops_per_sample"):
        if result.get(key) is not None:
            result[key] = _int(result, key, line_no, required=True)
    if result.get("status") is not None and not isinstance(result["status"], str):
        raise RecordError(line_no, "status must be a string ('ok' or 'failed')")
    result.pop("v", None)
    return result


def _harness_health(obj: dict[str, Any], line_no: int) -> tuple[str, str | None, dict, str | None]:
    check = obj.get("phase") or obj.get("check")
    if not isinstance(check, str) or not check or len(check) > 64:
        raise RecordError(line_no, "HEALTH_GATE needs a string 'phase' (at most 64 characters)")
    status = obj.get("status")
    measured = {k: v for k, v in obj.items() if k not in _HEALTH_TEXT_KEYS}
    message = None
    world, total = obj.get("world_size"), obj.get("sum")
    if (status is None and check == "scalar" and isinstance(world, int)
            and isinstance(total, (int, float)) and not isinstance(total, bool)):
        # The probe all-reduces rank + 1 on every rank: the exact sum is n(n+1)/2.
        expected = world * (world + 1) / 2
        measured["expected"] = expected
        if total != expected:
            status, message = "FAIL", f"scalar all-reduce summed to {total}, expected {expected:g}"
    return check, status, measured, message


def parse_health(obj: dict[str, Any], line_no: int, harness: bool) -> HealthRecord:
    """Fields of an ``AXBGATE_HEALTH`` / ``HEALTH_GATE`` record.

    A ``HEALTH_GATE`` line keeps every number it carries in ``measured`` (``rank``,
    ``slowest_rank_bus_gbps``, ``p50_ms``, ``p95_ms``, ``mean_ms``, ``sum``, ...); a
    scalar line whose sum is not n(n+1)/2 is a ``FAIL``.

    Raises:
        RecordError: No check name, no status (product dialect) or an unknown status.
    """
    if harness:
        check, status, measured, message = _harness_health(obj, line_no)
        threshold: dict[str, Any] = {}
    else:
        check = obj.get("check")
        if not isinstance(check, str) or not check or len(check) > 64:
            raise RecordError(line_no, "AXBGATE_HEALTH is missing required key 'check' "
                                       "(a string of at most 64 characters)")
        status = obj.get("status")
        if status is None:
            raise RecordError(line_no, "AXBGATE_HEALTH is missing required key 'status'")
        measured = obj.get("measured") or {}
        threshold = obj.get("threshold") or {}
        message = obj.get("message")
    if status is not None:
        status = str(status).upper()
        if status not in _HEALTH_STATUSES:
            raise RecordError(
                line_no, f"health status must be one of {', '.join(_HEALTH_STATUSES)}, got {status[:20]!r}"
            )
    host = obj.get("host")
    return HealthRecord(
        line_no=line_no,
        check=check,
        status=status,
        measured=measured if isinstance(measured, dict) else {"value": measured},
        threshold=threshold if isinstance(threshold, dict) else {"value": threshold},
        message=message if isinstance(message, str) or message is None else str(message),
        host=host[:255] if isinstance(host, str) else None,
        raw=obj,
    )


_ALLOCATION_TEXT = {"scheduler_job_id": 64, "executor": 16, "cluster": 128, "gpu_model": 128,
                    "topology": 128, "clock_bin": 32, "driver_version": 64, "cuda_version": 64,
                    "nccl_version": 64, "torch_version": 64}
_ALLOCATION_INTS = ("num_nodes", "gpus_per_node", "num_gpus")
_ALLOCATION_FLOATS = ("max_sm_clock_mhz", "power_limit_w")
HEALTH_VERDICTS = ("healthy", "degraded", "failed", "unknown")


def _text(obj: dict[str, Any], key: str, max_chars: int, line_no: int, prefix: str) -> None:
    value = obj.get(key)
    if value is not None and (not isinstance(value, str) or len(value) > max_chars):
        raise RecordError(line_no, f"{prefix} key {key!r} must be a string of at most {max_chars} "
                                   f"characters, got {str(value)[:80]!r}")


def parse_allocation(obj: dict[str, Any], line_no: int) -> dict[str, Any]:
    """Fields of an ``AXBGATE_ALLOCATION`` record, checked against what the ledger stores.

    Raises:
        RecordError: No or an unknown ``health_verdict``, or a known key of the wrong
            type or length (docs/record-contract.md).
    """
    prefix = "AXBGATE_ALLOCATION"
    if obj.get("health_verdict") not in HEALTH_VERDICTS:
        raise RecordError(line_no, f"{prefix} needs 'health_verdict', one of {', '.join(HEALTH_VERDICTS)}")
    for key, max_chars in _ALLOCATION_TEXT.items():
        _text(obj, key, max_chars, line_no, prefix)
    for key in _ALLOCATION_INTS:
        value = _int(obj, key, line_no, required=False)
        if value is not None and value < 0:
            raise RecordError(line_no, f"{prefix} key {key!r} must be >= 0, got {value}")
    for key in _ALLOCATION_FLOATS:
        _float(obj, key, line_no, required=False)
    hosts = obj.get("hostnames")
    if hosts is not None and (not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts)):
        raise RecordError(line_no, f"{prefix} key 'hostnames' must be a list of strings")
    criteria = obj.get("criteria")
    if criteria is not None and not isinstance(criteria, (dict, str)):
        raise RecordError(line_no, f"{prefix} key 'criteria' must be an object or a name")
    return {k: v for k, v in obj.items() if k != "v"}


def check_provenance(obj: dict[str, Any], line_no: int, prefix: str) -> dict[str, Any]:
    """Provenance keys the ledger stores in columns, checked (the rest is kept as is).

    Raises:
        RecordError: ``source_sha`` is not a string of at most 64 characters,
            ``source_dirty`` not a boolean, ``env`` not an object or ``command`` not a list.
    """
    _text(obj, "source_sha", 64, line_no, prefix)
    for key, kind, name in (("source_dirty", bool, "a boolean"), ("env", dict, "an object"),
                            ("command", list, "a list")):
        if obj.get(key) is not None and not isinstance(obj[key], kind):
            raise RecordError(line_no, f"{prefix} key {key!r} must be {name}")
    return {k: v for k, v in obj.items() if k != "v"}
