"""The bases of every pydantic model of the API (requests and answers).

``use_attribute_docstrings`` makes each field's docstring its OpenAPI ``description``
(``tests/integration/test_openapi_docs.py`` checks that every field has one).

:class:`PublicModel` is the base of every answer (``*Public``): every string it holds,
nested in dicts and lists too, has its URL credentials masked
(:func:`orchestrator.domain.secrets.mask_urls_deep`: ``user:***@``, ``?token=***``) when
it is built, so pages and CLI views that read its attributes show the mask, and again when
it is serialised, for values set after validation. Requests (``*Create``) keep what the
submitter sent: the ledger stores it and the run needs it (docs/security.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer, model_validator

from orchestrator.domain.secrets import mask_urls_deep

__all__ = ["ApiModel", "PublicModel"]


class ApiModel(BaseModel):
    """A pydantic model whose field docstrings document the API."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class PublicModel(ApiModel):
    """An API answer: URL credentials are masked in every string field (issue 24 point 5)."""

    @model_validator(mode="after")
    def _mask_urls(self) -> PublicModel:
        for name in type(self).model_fields:
            value = getattr(self, name, None)
            masked = mask_urls_deep(value)
            if masked is not value:
                object.__setattr__(self, name, masked)
        return self

    @model_serializer(mode="wrap")
    def _mask_urls_out(self, handler: SerializerFunctionWrapHandler):  # noqa: ANN202
        # No return annotation: pydantic would take it as the answer's JSON schema.
        return mask_urls_deep(handler(self))
