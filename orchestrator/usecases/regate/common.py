"""What the re-gate use cases share: the gate request of a re-gate or bisection step, the
checks a tracked repository must pass, repository events and a gate's headline numbers."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate, RepoEvent, TrackedRepository
from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.settings import Settings
from orchestrator.usecases.gate_files import FilePolicy, check_gate_files, check_secret_refs
from orchestrator.usecases.gates import resolve_recipe
from orchestrator.usecases.notify import enqueue_notifications
from orchestrator.vcs.history import GitError, branch_head

__all__ = ["branch_head_or_422", "build_gate_request", "flag_gate", "gate_numbers",
           "record_event", "utcnow", "validate_request"]

logger = logging.getLogger(__name__)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def build_gate_request(repo: TrackedRepository, control_sha: str, candidate_sha: str, *,
                       kind: str, title: str) -> GateCreate:
    """The gate of one re-gate or bisection step: same workload/topology, two commits.

    Raises:
        pydantic.ValidationError: The stored repository options no longer validate.
    """
    opts = repo.options or {}
    env = dict(opts.get("env") or {})
    policy = opts.get("policy", "drift")
    return GateCreate.model_validate({
        "title": title[:255],
        "kind": kind,
        "family": f"repo-{repo.id}:{repo.branch}"[:255],
        "tags": [kind, f"repo-{repo.id}"],
        "control": {"source": {"repo": repo.url, "sha": control_sha}, "env": env},
        "candidate": {"source": {"repo": repo.url, "sha": candidate_sha}, "env": env},
        "workload": repo.workload,
        "topology": repo.topology,
        "run_pattern": opts.get("run_pattern", "A X B"),
        "warmup_steps": opts.get("warmup_steps", 10),
        "measured_steps": opts.get("measured_steps", 20),
        "policy": policy,
        "policy_params": {"tolerance_pct": repo.tolerance_pct},
        "executor": repo.executor,
        "health": opts.get("health") or {},
        "run_timeout_s": opts.get("run_timeout_s", 1800.0),
    })


def branch_head_or_422(url: str, branch: str) -> str:
    try:
        return branch_head(url, branch)
    except GitError as exc:
        raise ValidationFailed("url" if "branch" not in str(exc) else "branch", str(exc)) from None


def validate_request(repo: TrackedRepository, sha: str, files: FilePolicy | None = None,
                     secret_refs: list[str] | None = None) -> None:
    """Check that the repository's re-gates validate; with a restricted ``files`` policy,
    accepted recipe/criteria files are rewritten on ``repo`` to absolute paths.

    Raises:
        ValidationFailed: The re-gate request, a path field or a secret reference is invalid.
    """
    try:
        gate_in = build_gate_request(repo, sha, sha, kind="regate", title="validation")
    except ValueError as exc:
        raise ValidationFailed("options", str(exc)) from None
    if files is not None and files.restricted:
        try:
            checked = check_gate_files(gate_in, files)
        except ValidationFailed as exc:
            field = "workload.recipe" if exc.field == "workload.recipe" else "options.health.criteria"
            raise ValidationFailed(field, exc.message) from None
        if checked.workload.recipe is not None:
            repo.workload = {**(repo.workload or {}), "recipe": checked.workload.recipe}
        if checked.health.criteria is not None:
            opts = dict(repo.options or {})
            opts["health"] = {**(opts.get("health") or {}), "criteria": checked.health.criteria}
            repo.options = opts
    check_secret_refs({"options.env": gate_in.control.env}, secret_refs)
    resolve_recipe(gate_in, "control")


def record_event(session: Session, repo: TrackedRepository, settings: Settings, *, notify: bool = False,
           gate: Gate | None = None, **fields: Any) -> RepoEvent:
    event = store.repos.add_event(session=session, repository_id=repo.id,
                                  gate_id=gate.id if gate is not None else None, **fields)
    level = logging.WARNING if fields.get("alert") else logging.INFO
    logger.log(level, "repo=%s event=%s gate=%s %s", repo.id, fields.get("kind"),
               gate.id if gate else None, fields.get("message", ""))
    if notify:
        enqueue_notifications(session=session, repo=repo, event=event, settings=settings)
    return event


def gate_numbers(gate: Gate) -> dict[str, Any]:
    primary = next((v for v in reversed(gate.verdicts) if v.is_primary), None)
    if gate.status != "succeeded" or primary is None:
        return {}
    numbers = primary.numbers or {}
    medians = {r.role: r.median_step_s for r in gate.runs}
    return {
        "verdict": primary.verdict,
        "delta_pct": numbers.get("delta_pct"),
        "drift_pct": numbers.get("drift_pct"),
        "control_median_s": numbers.get("midpoint_s") or medians.get("A"),
        "candidate_median_s": numbers.get("candidate_s") or medians.get("X"),
    }


def flag_gate(gate: Gate, label: str) -> None:
    tag = f"flag:{label}"
    if tag not in (gate.tags or []):
        gate.tags = [*(gate.tags or []), tag]
