"""Error responses declared on every API route, from what the route really depends on.

:func:`declare_errors` walks each route's dependencies: a route behind a token scope can
answer 401 and 403, a read behind ``auth.read_open=false`` 401, a route with a path id
404, a write behind a token 409 (conflicts and invalid state transitions), and any route
with parameters or a body 422. Every one of them is declared with the shared
:class:`~orchestrator.schemas.errors.ErrorPublic` body (``app/api/errors.py`` writes it).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute

from orchestrator.schemas.errors import ErrorPublic

__all__ = ["declare_errors", "route_errors"]

_DESCRIPTIONS = {
    401: ("No valid token: send `Authorization: Bearer <token>`.", [], "unknown or revoked token",
          "http_error"),
    403: ("The token lacks the route's scope.", [], "token 'ci' lacks the 'decide' scope", "http_error"),
    404: ("No such resource.", ["path", "gate_id"], "gate 7 not found", "not_found"),
    409: ("Conflicts with the stored state (finished gate, duplicate, state transition).", [],
          "gate 7 is succeeded; only queued or running gates can be cancelled", "invalid_transition"),
    422: ("The request does not validate; `loc` names the field.", ["body", "measured_steps"],
          "Input should be less than or equal to 100000", "less_than_equal"),
}


def _calls(dependant: Any) -> set[str]:
    names = set()
    for dep in dependant.dependencies:
        names.add(getattr(dep.call, "__name__", ""))
        names |= _calls(dep)
    return names


def route_errors(route: APIRoute) -> list[int]:
    """The error statuses ``route`` can answer (see the module docstring)."""
    calls = _calls(route.dependant)
    scoped = any(n.startswith("require_") and n.endswith("_scope") for n in calls)
    codes = set()
    if scoped or "require_token" in calls or "require_read_access" in calls:
        codes.add(401)
    if scoped:
        codes.add(403)
        if route.methods & {"POST", "PUT", "PATCH", "DELETE"}:
            codes.add(409)
    if route.dependant.path_params:
        codes.add(404)
    if (route.dependant.path_params or route.dependant.query_params or route.dependant.body_params
            or route.dependant.header_params):
        codes.add(422)
    return sorted(codes)


def declare_errors(router: APIRouter) -> APIRouter:
    """Add the error responses of :func:`route_errors` to every route of ``router``
    (idempotent); returns ``router``."""
    for route in router.routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        for code in route_errors(route):
            text, loc, msg, type_ = _DESCRIPTIONS[code]
            route.responses.setdefault(code, {
                "model": ErrorPublic, "description": text,
                "content": {"application/json": {"example": ErrorPublic.example(loc, msg, type_)}},
            })
    return router
