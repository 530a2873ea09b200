"""Offline re-judging: one JSON object in, one verdict dict out (``--history`` / ``--batch``).

Input object (keys; only ``pattern`` and ``medians_s`` are required):

| key                     | type                                  | meaning                                  |
|-------------------------|---------------------------------------|------------------------------------------|
| ``id``                  | str, int or null                      | echoed in the output (batch bookkeeping) |
| ``pattern``             | str of A/X/B                          | roles in pattern order                   |
| ``medians_s``           | list of numbers                       | run medians, seconds, one per role       |
| ``kind``                | ``candidate`` / ``regate``            | default ``candidate``                    |
| ``policy``              | policy name                           | default: the default policy              |
| ``params``              | object                                | policy parameters                        |
| ``history``             | list of lists, or {pairs, gate_ids}   | control history (``ControlHistory``)     |
| ``median_se_s``         | list of numbers or nulls              | per-run median standard error, seconds   |
| ``num_measured_steps``  | list of ints or nulls                 | per-run measured steps                   |
| ``multimodal``          | list of bools or nulls                | per-run multimodality flag               |
| ``failed``              | list of bools                         | per-run failure flag                     |
| ``mfu_numerator_pct_s`` | number                                | MFU numerator, percent-seconds/sample    |
| ``health_failed``       | bool                                  | the allocation's health gate failed      |

Output: ``Verdict.to_dict()`` (plus ``id`` when given). Every bad field raises a
ValueError that names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.verdict.model import ControlHistory, GateMeasurement, RunSummary
from orchestrator.verdict.registry import DEFAULT_POLICY_NAME, get_policy, judge

_KEYS = ("id", "pattern", "medians_s", "kind", "policy", "params", "history", "median_se_s",
         "num_measured_steps", "multimodal", "failed", "mfu_numerator_pct_s", "health_failed")
_PER_RUN = ("median_se_s", "num_measured_steps", "multimodal", "failed")


def _per_run(obj: Mapping[str, Any], key: str, count: int) -> list[Any]:
    values = obj.get(key)
    if values is None:
        return [None] * count
    if not isinstance(values, list) or len(values) != count:
        raise ValueError(
            f"{key} must be a list with one entry per run ({count}), got {values!r}"
        )
    return values


def _history(value: Any) -> ControlHistory | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"pairs", "gate_ids"})
        if unknown:
            raise ValueError(f"history has unknown key(s) {unknown}; valid: pairs, gate_ids")
        pairs, ids = value.get("pairs", []), value.get("gate_ids", [])
    else:
        pairs, ids = value, []
    if not isinstance(pairs, list) or not all(isinstance(p, list) for p in pairs):
        raise ValueError(f"history pairs must be a list of lists of medians, got {pairs!r}")
    if not isinstance(ids, list):
        raise ValueError(f"history gate_ids must be a list, got {ids!r}")  # noqa: TRY004
    try:
        return ControlHistory(pairs=tuple(tuple(p) for p in pairs), gate_ids=tuple(ids))
    except ValueError as exc:
        raise ValueError(f"history: {exc}") from None


def _measurement(obj: Mapping[str, Any]) -> GateMeasurement:
    pattern = obj.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be a non-empty string of A, X and B, got {pattern!r}")
    medians = obj.get("medians_s")
    if not isinstance(medians, list) or len(medians) != len(pattern):
        raise ValueError(
            f"medians_s must be a list of {len(pattern)} run medians (one per role of "
            f"pattern {pattern!r}), got {medians!r}"
        )
    spread = {key: _per_run(obj, key, len(pattern)) for key in _PER_RUN}
    runs = []
    for i, (role, median) in enumerate(zip(pattern, medians)):
        failed = spread["failed"][i]
        try:
            runs.append(RunSummary(
                role=role,  # type: ignore[arg-type]
                order=i,
                median_step_s=float("nan") if failed and median is None else median,
                failed=bool(failed) if failed is not None else False,
                median_se_s=spread["median_se_s"][i],
                num_measured_steps=spread["num_measured_steps"][i],
                multimodal=spread["multimodal"][i],
            ))
        except ValueError as exc:
            raise ValueError(f"run {i} ({role}): {exc}") from None
    try:
        return GateMeasurement(
            runs=tuple(runs),
            kind=obj.get("kind", "candidate"),
            mfu_numerator_pct_s=obj.get("mfu_numerator_pct_s"),
            health_failed=obj.get("health_failed", False),
        )
    except ValueError as exc:
        raise ValueError(f"pattern {pattern!r}: {exc}") from None


def verdict_from_json(obj: Any) -> dict[str, Any]:
    """Judge one gate described by a JSON object (module docstring for the keys).

    Args:
        obj: The decoded JSON object.

    Returns:
        The verdict as ``Verdict.to_dict()``, with ``id`` echoed when given.

    Raises:
        ValueError: Naming the field, for a non-object, an unknown key, a missing or
            malformed field, an unknown policy or parameter, or an invalid gate.
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"each gate must be a JSON object, got {type(obj).__name__}")  # noqa: TRY004
    unknown = sorted(set(obj) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; valid keys: {', '.join(_KEYS)}")
    params = obj.get("params") or {}
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be an object, got {params!r}")  # noqa: TRY004
    name = obj.get("policy") or DEFAULT_POLICY_NAME
    if not isinstance(name, str):
        raise ValueError(f"policy must be a policy name, got {name!r}")  # noqa: TRY004
    policy = get_policy(name, **params)
    measurement = _measurement(obj)
    history = _history(obj.get("history"))
    out = judge(measurement, policy, history=history).to_dict()
    if "id" in obj:
        out = {"id": obj["id"], **out}
    return out
