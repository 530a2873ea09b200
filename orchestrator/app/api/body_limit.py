"""Request-body limits per route, enforced before and while the body is read.

A body announced (``Content-Length``) or found (streamed) larger than the route's limit
answers ``413`` with the JSON error shape of :mod:`orchestrator.app.api.errors`; nothing
past the limit is read into memory. Limits come from ``settings.limits``
(:class:`~orchestrator.settings.LimitSettings`).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.app.api.errors import error_body

__all__ = ["BodyLimitMiddleware"]


def _too_large(limit: int) -> str:
    return f"request body is larger than {limit} bytes, the limit of this route"


class BodyLimitMiddleware:
    """Pure ASGI middleware: one byte limit per path, a default for the others.

    Args:
        app: The wrapped application.
        default_bytes: Limit of every path not in ``path_bytes``.
        path_bytes: Exact path -> limit (e.g. ``{"/runs/import": 512 MiB}``).
    """

    def __init__(self, app: ASGIApp, *, default_bytes: int, path_bytes: dict[str, int]) -> None:
        self.app = app
        self.default_bytes = default_bytes
        self.path_bytes = path_bytes

    async def _refuse(self, send: Send, limit: int) -> None:
        body = json.dumps(error_body(["body"], _too_large(limit), "body_too_large")).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.path_bytes.get(scope.get("path", ""), self.default_bytes)
        headers: dict[bytes, bytes] = dict(scope.get("headers") or [])
        announced = headers.get(b"content-length")
        if announced is not None and (not announced.isdigit() or int(announced) > limit):
            await self._refuse(send, limit)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message: dict[str, Any] = await receive()  # type: ignore[assignment]
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # FastAPI passes an HTTPException raised while reading the body through
                    # to the error handlers (JSON 413), whatever the route reads.
                    raise HTTPException(status_code=413, detail=_too_large(limit))
            return message  # type: ignore[return-value]

        await self.app(scope, limited_receive, send)
