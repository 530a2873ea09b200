"""Offline API docs: Swagger UI at ``/docs`` and ReDoc at ``/redoc`` from the package's own
vendored assets (``static/vendor``, see ``scripts/vendor_web_assets.sh``), never a CDN."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

_VENDOR = "/static/vendor"


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI of the app's OpenAPI document, with local JS, CSS and icon."""
    return get_swagger_ui_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title} - API",
        swagger_js_url=f"{_VENDOR}/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url=f"{_VENDOR}/swagger-ui/swagger-ui.css",
        swagger_favicon_url=f"{_VENDOR}/swagger-ui/favicon-32x32.png",
    )


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    """ReDoc of the app's OpenAPI document, with the local standalone bundle (no web fonts)."""
    return get_redoc_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title} - API reference",
        redoc_js_url=f"{_VENDOR}/redoc/redoc.standalone.js",
        redoc_favicon_url=f"{_VENDOR}/swagger-ui/favicon-32x32.png",
        with_google_fonts=False,
    )
