"""Domain errors -> HTTP, exactly once. Every error body has the same JSON shape::

    {"detail": [{"loc": ["body", "candidate", "env"], "msg": "...", "type": "..."}]}

``NotFound`` -> 404, ``Conflict`` / ``InvalidTransition`` -> 409, ``ValidationFailed``
and ``RecordError`` -> 422 with the field path, request validation -> 422. A value the
database refuses (``DataError``) is bad input too and answers 422, never 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from orchestrator.domain.errors import Conflict, NotFound, RecordError, ValidationFailed
from orchestrator.domain.secrets import mask_text

__all__ = ["error_body", "install_error_handlers"]

logger = logging.getLogger(__name__)


def error_body(loc: list[Any], msg: str, type_: str) -> dict[str, Any]:
    """Return the JSON error body with one entry (URL credentials in ``msg`` masked)."""
    return {"detail": [{"loc": loc, "msg": mask_text(msg), "type": type_}]}


def _json_loc(loc: Any) -> list[Any]:
    return [p if isinstance(p, (str, int)) else str(p) for p in (loc or ())]


async def _request_validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [
        {"loc": _json_loc(e.get("loc")), "msg": mask_text(str(e.get("msg", ""))), "type": str(e.get("type", ""))}
        for e in exc.errors()
    ]
    return JSONResponse(status_code=422, content={"detail": errors})


async def _not_found(_request: Request, exc: NotFound) -> JSONResponse:
    return JSONResponse(
        status_code=404, content=error_body(["path", f"{exc.entity}_id"], str(exc), "not_found")
    )


async def _conflict(_request: Request, exc: Conflict) -> JSONResponse:
    type_ = "invalid_transition" if exc.__class__.__name__ == "InvalidTransition" else "conflict"
    return JSONResponse(status_code=409, content=error_body([], str(exc), type_))


async def _validation_failed(_request: Request, exc: ValidationFailed) -> JSONResponse:
    parts = [p for p in exc.field.split(".") if p] if exc.field else []
    loc = ["body", *(parts[1:] if parts[:1] == ["body"] else parts)]
    return JSONResponse(status_code=422, content=error_body(loc, exc.message, "validation_failed"))


async def _record_error(_request: Request, exc: RecordError) -> JSONResponse:
    return JSONResponse(
        status_code=422, content=error_body(["body", f"line {exc.line_no}"], exc.message, "record_error")
    )


async def _data_error(request: Request, exc: DataError) -> JSONResponse:
    logger.warning("%s %s: database refused a value: %s", request.method, request.url.path, exc.orig)
    return JSONResponse(
        status_code=422,
        content=error_body(["body"], "a value is out of range or not storable", "data_error"),
    )


async def _http_exception(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    return JSONResponse(
        status_code=exc.status_code,
        content=error_body([], str(exc.detail), "http_error"),
        headers=getattr(exc, "headers", None),
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _request_validation)  # type: ignore[arg-type]
    app.add_exception_handler(NotFound, _not_found)  # type: ignore[arg-type]
    app.add_exception_handler(Conflict, _conflict)  # type: ignore[arg-type]
    app.add_exception_handler(ValidationFailed, _validation_failed)  # type: ignore[arg-type]
    app.add_exception_handler(RecordError, _record_error)  # type: ignore[arg-type]
    app.add_exception_handler(DataError, _data_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_exception)  # type: ignore[arg-type]
