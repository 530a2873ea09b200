"""Pydantic models at the boundary (API bodies, CLI ``--json`` output).

Names follow the FastAPI template: ``*Create`` for input, ``*Public`` for output.
ORM objects never leave the use-case layer; these do.
"""

from orchestrator.domain.gate_spec import GateCreate
from orchestrator.schemas.gates import GatePublic, GatesPublic, RunPublic, VerdictPublic
from orchestrator.schemas.imports import RunImportPublic

__all__ = ["GateCreate", "GatePublic", "GatesPublic", "RunImportPublic", "RunPublic", "VerdictPublic"]
