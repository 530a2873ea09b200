"""The one error body of the API (``app/api/errors.py`` writes it for every status)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from orchestrator.domain.api_model import PublicModel

__all__ = ["ErrorDetailPublic", "ErrorPublic"]


class ErrorDetailPublic(PublicModel):
    """One problem with the request."""

    loc: list[str | int] = Field(default_factory=list, examples=[["body", "measured_steps"]])
    """Where the problem is: ``body``/``query``/``path``/``header`` then the field path;
    empty for a problem of the whole request (a conflict, a missing token)."""
    msg: str = Field(examples=["Input should be less than or equal to 100000"])
    """What is wrong and how to fix it."""
    type: str = Field(examples=["less_than_equal"])
    """Machine-readable kind: pydantic's error type, ``not_found``, ``conflict``,
    ``invalid_transition``, ``validation_failed``, ``record_error``, ``http_error``."""


class ErrorPublic(PublicModel):
    """Every 4xx/5xx answer of the API has this body."""

    detail: list[ErrorDetailPublic]
    """The problems found (at least one)."""

    @classmethod
    def example(cls, loc: list[Any], msg: str, type_: str) -> dict[str, Any]:
        """An example body for the OpenAPI document."""
        return {"detail": [{"loc": loc, "msg": msg, "type": type_}]}
