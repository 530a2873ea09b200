"""Process logging: plain text or one JSON object per line (``--log-format json`` or
``AXBGATE_LOG_FORMAT=json``), for the CLI and ``axbgate serve`` (uvicorn's loggers included).

A JSON line holds ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
``message`` and every ``extra=`` field the code passed: the dispatcher, poller and
scheduler name the ``event`` (``gate.dispatched``, ``run.ended``, ``gate.finished``,
``repo.checked``, ...), ``gate_id``, ``state`` and ``duration_s`` (seconds). An exception
adds ``exception`` (the formatted traceback).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging"]

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _plain(value: Any) -> Any:
    """A JSON-safe form of an ``extra`` value (non-finite floats and objects as text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (keys above), sorted, no newline inside."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one line of JSON."""
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = _plain(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, sort_keys=True, ensure_ascii=True)


def configure_logging(*, level: int = logging.WARNING, fmt: str = "text") -> None:
    """Send every logger's records to stderr in ``fmt`` at ``level`` and above.

    Like :func:`logging.basicConfig`, it leaves a process whose root logger already has
    handlers from someone else (an embedding program, pytest's log capture) alone; a
    second call replaces the handler of the first (switching format or level). uvicorn's
    ``uvicorn``, ``uvicorn.error`` and ``uvicorn.access`` loggers propagate to the root.

    Args:
        level: Lowest level shown (``logging.INFO`` for ``serve`` and ``-v``).
        fmt: ``text`` or ``json``.

    Raises:
        ValueError: ``fmt`` is not one of :data:`LOG_FORMATS`.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, "axbgate_handler", False)]
    if len(ours) < len(root.handlers):
        return
    for old in ours:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.axbgate_handler = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers.clear()
        uv.propagate = True
        uv.setLevel(logging.NOTSET)
