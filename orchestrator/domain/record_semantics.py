"""Semantics records of both dialects, read into ONE stored form (pure).

``AXBGATE_SEMANTICS`` (the bundled trainer, ``trainer/semantics.py``) and the harness's
``BF16_SEMANTICS`` (shared/seed_harness: per-rank probes, the rank-0 metric series, the
Ada-gradient probe and the optimizer probe) both become the dict stored in
``runs.semantics`` and judged by ``orchestrator.verdict.semantics``
(docs/record-contract.md, "Semantics"):

``source``, ``local_batch_size``, ``grad_accum_steps``, ``world_size``,
``global_batch_size``, ``samples_per_step``, ``tokens_per_step`` (ints or None when the
log does not say), ``precision`` (object), ``series_first_step`` (int), ``loss`` and
``grad_norm`` (lists of numbers, one per step from ``series_first_step``; may be empty),
``dtypes`` (coverage object or None), ``probe`` (``{"step", "tensors": {name: {"sha256",
"l2_norm", "sum", "max_abs", ...}}}`` or None).
"""

from __future__ import annotations

from typing import Any

from orchestrator.domain.errors import RecordError

__all__ = ["complete_semantics", "harness_semantics", "parse_semantics"]

_BATCH_KEYS = ("local_batch_size", "grad_accum_steps", "world_size", "global_batch_size",
               "samples_per_step", "tokens_per_step")
_MAX_PROBE_TENSORS = 4096


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers(value: Any, key: str, line_no: int) -> list[float]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(_is_number(v) for v in value):
        raise RecordError(line_no, f"AXBGATE_SEMANTICS key {key!r} must be a list of numbers")
    return [float(v) for v in value]


def _count(value: Any, key: str, line_no: int, prefix: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecordError(line_no, f"{prefix} key {key!r} must be an integer >= 1, got {str(value)[:40]!r}")
    return value


def _object(value: Any, key: str, line_no: int) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise RecordError(line_no, f"AXBGATE_SEMANTICS key {key!r} must be an object")
    return value


def _probe(value: Any, line_no: int) -> dict[str, Any] | None:
    probe = _object(value, "probe", line_no)
    if probe is None:
        return None
    tensors = probe.get("tensors")
    step = probe.get("step")
    if not isinstance(tensors, dict) or len(tensors) > _MAX_PROBE_TENSORS or isinstance(step, bool) \
            or not isinstance(step, int):
        raise RecordError(line_no, "AXBGATE_SEMANTICS probe needs an integer 'step' and an object "
                                   f"'tensors' (at most {_MAX_PROBE_TENSORS})")
    for name, summary in tensors.items():
        if not isinstance(summary, dict):
            raise RecordError(line_no, f"AXBGATE_SEMANTICS probe tensor {name[:80]!r} must be an object")
    return {"step": step, "tensors": tensors}


def parse_semantics(obj: dict[str, Any], line_no: int) -> dict[str, Any]:
    """Read an ``AXBGATE_SEMANTICS`` record into the stored form.

    Raises:
        RecordError: A batch key that is not an integer >= 1, a series that is not a list
            of numbers, a ``dtypes``/``precision``/``probe`` that is not an object.
    """
    out: dict[str, Any] = {"source": "AXBGATE_SEMANTICS"}
    for key in _BATCH_KEYS:
        out[key] = _count(obj.get(key), key, line_no, "AXBGATE_SEMANTICS")
    first = obj.get("series_first_step", 0)
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise RecordError(line_no, "AXBGATE_SEMANTICS key 'series_first_step' must be an integer >= 0")
    out["series_first_step"] = first
    out["loss"] = _numbers(obj.get("loss"), "loss", line_no)
    out["grad_norm"] = _numbers(obj.get("grad_norm"), "grad_norm", line_no)
    out["precision"] = _object(obj.get("precision"), "precision", line_no) or {}
    out["dtypes"] = _object(obj.get("dtypes"), "dtypes", line_no)
    out["probe"] = _probe(obj.get("probe"), line_no)
    return out


def _harness_series(obj: dict[str, Any]) -> tuple[int, list[float], list[float]]:
    """Loss and gradient-norm series from ``rank0_metric_series`` (tracker steps, 1-based)
    or the grad-norm variant's ``rank0_grad_norm_series``."""
    series = obj.get("rank0_metric_series")
    points: dict[int, dict[str, float]] = {}
    if isinstance(series, dict):
        for step, metrics in series.items():
            if str(step).isdigit() and isinstance(metrics, dict):
                loss = metrics.get("total_loss", metrics.get("finetune_loss"))
                norm = next((v for k, v in sorted(metrics.items()) if k.startswith("grad_norm")), None)
                points[int(step)] = {"loss": loss, "grad_norm": norm}
    for rec in obj.get("rank0_grad_norm_series") or []:
        if isinstance(rec, dict) and isinstance(rec.get("step"), int) and _is_number(rec.get("value")):
            points.setdefault(rec["step"], {})["grad_norm"] = rec["value"]
    if not points:
        return 0, [], []
    steps = sorted(points)
    contiguous = steps == list(range(steps[0], steps[0] + len(steps)))

    def column(name: str) -> list[float]:
        values = [points[s].get(name) for s in steps]
        return [float(v) for v in values] if contiguous and all(_is_number(v) for v in values) else []

    return steps[0], column("loss"), column("grad_norm")


def _harness_dtypes(optimizer: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    """Dtype coverage from the optimizer probe (every trainable parameter was checked by
    the harness, so each listed dtype set covers them all)."""
    declared = obj.get("master_dtype")
    if not isinstance(optimizer, dict) or not optimizer.get("parameter_dtypes"):
        return {"declared_master_dtype": declared} if isinstance(declared, str) else None
    count, numel = optimizer.get("parameter_count"), optimizer.get("parameter_numel")

    def table(dtypes: Any) -> dict[str, Any]:
        names = [str(d).replace("torch.", "") for d in (dtypes or [])]
        share = len(names) == 1
        return {n: {"params": count if share else None, "numel": numel if share else None} for n in names}

    states = {k: table(v) for k, v in (optimizer.get("state_dtypes") or {}).items()
              if k in ("exp_avg", "exp_avg_sq")}
    for state, missing in (optimizer.get("missing_state") or {}).items():
        if state in states and missing:
            states[state]["missing"] = {"params": missing, "numel": None}
    return {"param_dtypes": table(optimizer.get("parameter_dtypes")), "state_dtypes": states,
            "num_trainable_params": count, "trainable_numel": numel,
            "declared_master_dtype": "float32" if not optimizer.get("te_fp32_master") else "float32 (TE)",
            "optimizer": optimizer.get("class")}


def _harness_probe(rank0: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any] | None:
    ada = rank0.get("ada_grad_probe")
    if not isinstance(ada, dict) or not isinstance(ada.get("parameters"), dict):
        return None
    tensors = {}
    for name, item in list(ada["parameters"].items())[:_MAX_PROBE_TENSORS]:
        if not isinstance(item, dict) or not item.get("present", True):
            tensors[f"grad:{name}"] = {"present": False}
            continue
        summary = {k: item[k] for k in ("sha256", "l2_norm", "max_abs", "dtype", "shape", "numel")
                   if k in item}
        if _is_number(item.get("mean")) and _is_number(item.get("numel")):
            summary["sum"] = item["mean"] * item["numel"]
        tensors[f"grad:{name}"] = summary
    step = ada.get("step", obj.get("gradient_probe_step"))
    return {"step": step if isinstance(step, int) else 0, "tensors": tensors}


def harness_semantics(obj: dict[str, Any]) -> dict[str, Any]:
    """Read a harness ``BF16_SEMANTICS`` record into the stored form (rank 0's view).

    Batch keys stay None here: the harness prints them on ``BF16_RESULT``
    (:func:`complete_semantics` fills them). Never raises: a key of an unexpected shape
    leaves that part empty (the harness prints many variants).
    """
    by_rank = obj.get("by_rank") if isinstance(obj.get("by_rank"), list) else []
    rank0 = next((r for r in by_rank if isinstance(r, dict) and r.get("rank", 0) == 0), {})
    first, loss, norm = _harness_series(obj)
    precision = {k: obj[k] for k in ("param_dtype", "reduce_dtype", "master_dtype") if isinstance(obj.get(k), str)}
    return {"source": "BF16_SEMANTICS", **dict.fromkeys(_BATCH_KEYS), "precision": precision,
            "series_first_step": first, "loss": loss, "grad_norm": norm,
            "dtypes": _harness_dtypes(rank0.get("optimizer_probe"), obj),
            "probe": _harness_probe(rank0, obj)}


def complete_semantics(semantics: dict[str, Any] | None, result: dict[str, Any] | None,
                       num_video_tokens: int | None = None) -> dict[str, Any] | None:
    """Fill the batch keys a semantics record left out from the run's result record.

    Global batch = local batch x gradient accumulation x world size (data parallel over
    every rank); a harness result without ``gradient_accumulation_steps`` accumulated 1.

    Args:
        semantics: The stored form, or None (no semantics record: stays None).
        result: The run's result record (product key names) or None.
        num_video_tokens: Tokens per sample when known (tokens per step).

    Returns:
        The completed stored form (a copy), or None.
    """
    if semantics is None:
        return None
    out = dict(semantics)
    result = result or {}
    for key in ("local_batch_size", "grad_accum_steps", "world_size"):
        if out.get(key) is None and isinstance(result.get(key), int):
            out[key] = result[key]
    if out.get("grad_accum_steps") is None and out.get("local_batch_size") is not None:
        out["grad_accum_steps"] = 1
    if out.get("global_batch_size") is None and all(
            isinstance(out.get(k), int) for k in ("local_batch_size", "grad_accum_steps", "world_size")):
        out["global_batch_size"] = out["local_batch_size"] * out["grad_accum_steps"] * out["world_size"]
    if out.get("samples_per_step") is None:
        out["samples_per_step"] = out.get("global_batch_size")
    if out.get("tokens_per_step") is None and num_video_tokens and out.get("samples_per_step"):
        out["tokens_per_step"] = out["samples_per_step"] * num_video_tokens
    return out
