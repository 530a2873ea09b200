"""The base of every pydantic model of the API (requests and answers).

``use_attribute_docstrings`` makes each field's docstring its OpenAPI ``description``
(``tests/integration/test_openapi_docs.py`` checks that every field has one).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ApiModel"]


class ApiModel(BaseModel):
    """A pydantic model whose field docstrings document the API."""

    model_config = ConfigDict(use_attribute_docstrings=True)
