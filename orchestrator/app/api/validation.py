"""Checks that keep request values storable on both database backends."""

from __future__ import annotations

import math
from typing import Any

from orchestrator.domain.errors import ValidationFailed

__all__ = ["ensure_server_executor", "ensure_storable"]


def ensure_storable(value: Any, path: str = "") -> None:
    """Reject strings with NUL bytes and non-finite floats anywhere in ``value``.

    PostgreSQL text and JSONB cannot hold U+0000, and JSON has no NaN or infinity, so
    such values would fail (or corrupt the ledger) only at insert or read time.

    Args:
        value: A JSON-like tree (dicts, lists, scalars).
        path: Dotted path of ``value`` for the error message.

    Raises:
        ValidationFailed: Naming the first offending field.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationFailed(path or "body", "NUL characters are not allowed")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationFailed(path or "body", "numbers must be finite")
    elif isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            ensure_storable(str(key), sub)
            ensure_storable(item, sub)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            ensure_storable(item, f"{path}.{i}" if path else str(i))


def ensure_server_executor(requested: str | None, default: str, field: str) -> None:
    """Refuse the ``debug`` executor in requests to the server.

    ``debug`` runs the gate's driver inside the process that dispatches it, which only
    the embedded CLI can do; the server never claims such gates.

    Args:
        requested: The executor the request names (``None``: the server's default).
        default: The server's default executor (``executor.kind``).
        field: Request field for the error (e.g. ``"executor"``).

    Raises:
        ValidationFailed: The effective executor is ``debug``.
    """
    if (requested or default) != "debug":
        return
    if requested == "debug":
        raise ValidationFailed(field, "the debug executor runs a gate inside the submitting "
                                      "process and is for the embedded CLI only; use local or slurm")
    raise ValidationFailed(field, "this server's default executor is debug "
                                  "(AXBGATE_EXECUTOR__KIND), which it cannot run; name local or slurm")
