"""Domain errors raised by the use cases and translated once at each boundary.

The API maps them to HTTP status codes (``NotFound`` -> 404, ``Conflict`` and
``InvalidTransition`` -> 409, ``ValidationFailed`` -> 422); the CLI maps them to exit
code 2 with the message; the gate driver turns them into a ``failed`` record.
"""

from __future__ import annotations

__all__ = [
    "AxbgateError",
    "Conflict",
    "InvalidTransition",
    "NotFound",
    "RecordError",
    "ValidationFailed",
]


class AxbgateError(Exception):
    """Base class of every domain error."""


class NotFound(AxbgateError):
    """A requested row does not exist.

    Args:
        entity: Table-level name, e.g. ``"gate"``.
        ident: The id or key that was looked up.
    """

    def __init__(self, entity: str, ident: object) -> None:
        super().__init__(f"{entity} {ident!r} not found")
        self.entity = entity
        self.ident = ident


class Conflict(AxbgateError):
    """A write conflicts with what is stored (duplicate key, wrong state)."""


class InvalidTransition(Conflict):
    """A state change that the lifecycle table does not allow.

    Args:
        entity: ``"gate"`` or ``"run"``.
        ident: Row id.
        from_state: Current state.
        to_state: Requested state.
    """

    def __init__(self, entity: str, ident: object, from_state: str, to_state: str) -> None:
        super().__init__(
            f"{entity} {ident}: transition {from_state!r} -> {to_state!r} is not allowed"
        )
        self.from_state = from_state
        self.to_state = to_state


class ValidationFailed(AxbgateError):
    """Input that is well-formed but semantically invalid.

    Args:
        field: Dotted path of the offending field, e.g. ``"candidate.env.NCCL_ALGO"``.
        message: What is wrong and how to fix it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class RecordError(AxbgateError):
    """A record-contract line that cannot be parsed.

    Args:
        line_no: 1-based line number in the log.
        message: What is wrong with the line.
    """

    def __init__(self, line_no: int, message: str) -> None:
        super().__init__(f"line {line_no}: {message}")
        self.line_no = line_no
        self.message = message
