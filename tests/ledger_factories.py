"""Ledger factories for API, page and benchmark tests: gates are created through the real use case
(:func:`orchestrator.usecases.gates.submit_gate`) with an external ``true`` command (no torch), then
finished the way the poller would: allocation, health checks, run results, artifacts and a
verdict from the real verdict engine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator import verdict as verdict_engine
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.domain.lifecycle import transition
from orchestrator.usecases.gates import submit_gate

WORKED_ACCEPT = (0.4284051351, 0.4148231971, 0.4264598510)
"""DESIGN.md section 3, first worked example (accept)."""
WORKED_NEUTRAL = (0.435652742, 0.434923236, 0.440625450)
"""DESIGN.md section 3, second worked example (neutral)."""


def make_gate(
    session: Session,
    *,
    title: str = "packed qkv",
    family: str | None = "ltx2-qkv",
    tags: list[str] | None = None,
    kind: str = "candidate",
    pattern: str | None = "A X B",
    warmup_steps: int = 3,
    measured_steps: int = 6,
    candidate_env: dict[str, str] | None = None,
    idempotency_key: str | None = None,
    policy: str = "drift",
) -> int:
    """Submit a queued gate through the use case; return its id."""
    extra = {"run_pattern": pattern} if pattern is not None else {}
    gate_in = GateCreate(
        **extra,
        title=title,
        family=family,
        tags=tags if tags is not None else ["fsdp2"],
        kind=kind,
        policy=policy,
        warmup_steps=warmup_steps,
        measured_steps=measured_steps,
        workload={"command": ["true"]},
        candidate={"env": candidate_env if candidate_env is not None else {"NCCL_ALGO": "Ring"}},
        health={"enabled": False},
    )
    gate, _created = submit_gate(session=session, gate_in=gate_in, idempotency_key=idempotency_key)
    session.flush()
    return gate.id


def _steps(median_s: float, warmup: int, measured: int, seed: int) -> list[float]:
    """Deterministic per-step times whose measured median is exactly ``median_s``."""
    warm = [median_s * (1.5 - 0.1 * i) for i in range(warmup)]
    wiggle = [((seed * 7 + i * 13) % 5 - 2) * 1e-4 * median_s for i in range(measured)]
    wiggle.sort()
    mid = wiggle[len(wiggle) // 2] if measured % 2 else 0.0
    return warm + [median_s + w - mid for w in wiggle]


def finish_gate(
    session: Session,
    gate_id: int,
    *,
    medians_s: tuple[float, ...] = WORKED_ACCEPT,
    health_verdict: str = "healthy",
    topology: str = "1x8 H200 NVLink",
    artifacts_dir: Path | None = None,
    status: str = "succeeded",
    all_policies: bool = False,
    history: list[list[float]] | None = None,
    history_gate_ids: list[int] | None = None,
    extra_roles: str = "",
) -> None:
    """Finish a queued gate: allocation + health checks, run results, verdict (with
    ``all_policies``: every policy through the one builder, the gate's own primary, judged
    against ``history`` (control medians of the earlier gates ``history_gate_ids``)).
    ``extra_roles`` appends runs the way a sequential gate extends its pattern."""
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    alloc = store.allocations.create_allocation(
        session=session,
        facts={
            "scheduler_job_id": f"{1000 + gate_id}",
            "executor": "slurm",
            "hostnames": ["gpu-node-01"],
            "num_nodes": 1,
            "gpu_model": "NVIDIA H200",
            "gpus_per_node": 8,
            "num_gpus": 8,
            "topology": topology,
            "clock_bin": "1980" if health_verdict == "healthy" else "1755",
            "max_sm_clock_mhz": 1980.0,
            "power_limit_w": 700.0,
            "health_verdict": health_verdict,
            "driver_version": "570.86",
            "nccl_version": "2.26.2",
        },
    )
    store.allocations.add_health_checks(
        session=session,
        allocation=alloc,
        checks=[
            {"name": "clocks", "status": "PASS" if health_verdict == "healthy" else "WARN",
             "host": "gpu-node-01", "measured": {"max_sm_clock_mhz": 1980}},
            {"name": "sustained_all_reduce", "status": "PASS", "host": "gpu-node-01",
             "measured": {"busbw_gbps": 296.1}, "threshold": {"min_busbw_gbps": 280}},
        ],
    )
    gate.allocation_id = alloc.id
    transition(gate, "submitted")
    transition(gate, "running")
    for order, role in enumerate(extra_roles, start=len(gate.runs)):
        store.runs.create_run(session=session, gate_id=gate.id, role=role, order=order,
                              status="pending", env={})
    session.flush()
    session.refresh(gate)
    runs = sorted(gate.runs, key=lambda r: r.order)
    assert len(runs) == len(medians_s), "one median per run of the pattern"
    for run, median in zip(runs, medians_s):
        steps = _steps(median, gate.num_warmup_steps, gate.num_measured_steps, run.order)
        transition(run, "running")
        store.runs.update_run(
            session=session,
            run=run,
            allocation_id=alloc.id,
            slowest_rank_step_s=steps,
            num_warmup_steps=gate.num_warmup_steps,
            num_measured_steps=gate.num_measured_steps,
            median_step_s=median,
            mfu_pct=40.0 * 0.42 / median,
            world_size=8,
            local_batch_size=1,
            grad_accum_steps=1,
            command=["true"],
            versions={"torch": "2.13.0"},
        )
        transition(run, "succeeded")
        if artifacts_dir is not None:
            data = "".join(f"AXBGATE_STEP {{\"step\": {i}, \"s\": {s}}}\n" for i, s in enumerate(steps))
            sha = hashlib.sha256(data.encode()).hexdigest()
            path = artifacts_dir / "logs" / sha[:2] / f"{sha}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(data)
            store.artifacts.add_artifact(
                session=session, path=str(path), size_bytes=len(data), sha256=sha,
                kind="log", run_id=run.id, gate_id=gate.id,
            )
    roles = "".join(r.role for r in runs)
    if all_policies:
        summaries = [verdict_engine.RunSummary(role=r, order=i, median_step_s=m)  # type: ignore[arg-type]
                     for i, (r, m) in enumerate(zip(roles, medians_s))]
        gate.control_history, gate.control_history_gate_ids = history, history_gate_ids
        results = verdict_engine.judge_policies(
            summaries, kind=verdict_engine.verdict_kind(gate.kind), policy=gate.policy,
            history=verdict_engine.history_from_pairs(history, history_gate_ids),
            mfu_numerator_pct_s=40.0 * 0.42)
    else:
        measurement = verdict_engine.measurement_from_pattern(
            roles, medians_s, kind="regate" if gate.kind == "regate" else "candidate",
            mfu_numerator_pct_s=40.0 * 0.42,
        )
        results = [verdict_engine.judge(measurement, verdict_engine.get_policy(gate.policy))]
    for i, result in enumerate(results):
        store.verdicts.save_verdict(
            session=session,
            gate_id=gate.id,
            policy=result.policy,
            policy_version=result.policy_version,
            params=dict(result.params),
            verdict=result.verdict,
            numbers=result.to_dict(),
            is_primary=i == 0,
        )
    transition(gate, status)
    session.flush()


def seed_ledger(session: Session, artifacts_dir: Path | None = None) -> dict[str, Any]:
    """A small ledger: accepted, neutral, degraded-accept, queued and a regate."""
    ids = {}
    ids["accept"] = make_gate(session, title="packed qkv", family="ltx2-qkv", tags=["fsdp2", "qkv"])
    finish_gate(session, ids["accept"], medians_s=WORKED_ACCEPT, artifacts_dir=artifacts_dir)
    ids["neutral"] = make_gate(session, title="reshard off", family="ltx2-reshard", tags=["fsdp2"])
    finish_gate(session, ids["neutral"], medians_s=WORKED_NEUTRAL, artifacts_dir=artifacts_dir)
    ids["degraded"] = make_gate(session, title="packed qkv v2", family="ltx2-qkv", tags=["qkv"])
    finish_gate(session, ids["degraded"], medians_s=(0.43, 0.40, 0.43), health_verdict="degraded")
    ids["queued"] = make_gate(session, title="compile blocks", family="ltx2-compile", tags=["compile"])
    ids["regate"] = make_gate(session, title="nightly", family=None, tags=["nightly"], kind="regate")
    finish_gate(session, ids["regate"], medians_s=(0.4300, 0.4301, 0.4302))
    return ids


CALIBRATION_HISTORY = [[0.4300, 0.4302], [0.4301, 0.4299], [0.4298, 0.4301], [0.4303, 0.4300],
                       [0.4300, 0.4298], [0.4301, 0.4302]]
"""Control medians (seconds) of six earlier gates: run-to-run sigma about 0.04%."""


def seed_calibrated(session: Session) -> dict[str, Any]:
    """A family judged with the calibrated default (``sequential``) and every other policy:
    six history gates (A A X B alone: ``sequential`` inconclusive while ``drift`` accepts, so
    the policies disagree) and one gate 1% faster, extended to A A X B X A X B and judged
    with their control history (accept with a narrow interval, the six history gates
    linked)."""
    history_ids = []
    for i, (a, b) in enumerate(CALIBRATION_HISTORY):
        gid = make_gate(session, title=f"calibrated history {i}", family="ltx2-calibrated",
                        tags=["calibrated"], policy="sequential", pattern=None)
        finish_gate(session, gid, medians_s=(a * 0.996, a, a * 0.99, b), all_policies=True)
        history_ids.append(gid)
    target = make_gate(session, title="calibrated 1% faster", family="ltx2-calibrated",
                       tags=["calibrated"], policy="sequential", pattern=None)
    # Extended to A A X B X A X B; sequential v3 decides at the early look (6 runs) on this
    # history.
    finish_gate(session, target, medians_s=(0.4283, 0.4300, 0.4257, 0.4302, 0.4257, 0.4301,
                                            0.4257, 0.4299),
                all_policies=True, history=CALIBRATION_HISTORY, history_gate_ids=history_ids,
                extra_roles="XAXB")
    return {"history": history_ids, "target": target}


def seed_repository(session: Session, gate_ids: list[int], *, url: str = "/srv/git/ltx2") -> int:
    """A tracked repository whose events are re-gates of ``gate_ids`` (their primary verdicts'
    candidate medians): pass / improvement adopted, every third a regression (not adopted,
    an alert), plus one open ``check_failed`` alert. Returns the repository id."""
    repo = store.repos.create_repo(session=session, url=url, branch="main", tolerance_pct=0.5,
                                   workload={"command": ["true"]})
    store.repos.add_event(session=session, repository_id=repo.id, kind="baseline",
                          candidate_sha="0" * 40, message="first measured head")
    control = "0" * 40
    for i, gid in enumerate(gate_ids):
        gate = store.gates.get_gate(session=session, gate_id=gid)
        numbers = next(v.numbers for v in gate.verdicts if v.is_primary)
        kind = "regression" if i % 3 == 2 else "pass"
        sha = f"{i + 1:040x}"
        store.repos.add_event(
            session=session, repository_id=repo.id, gate_id=gid, kind=kind, verdict=kind,
            control_sha=control, candidate_sha=sha, delta_pct=numbers.get("delta_pct"),
            drift_pct=numbers.get("drift_pct"), control_median_s=numbers.get("midpoint_s"),
            candidate_median_s=numbers.get("candidate_s"), alert=kind == "regression",
            message=f"re-gate of {sha[:10]}: {kind}")
        if kind != "regression":
            control = sha
    store.repos.add_event(session=session, repository_id=repo.id, kind="check_failed", alert=True,
                          message="git fetch failed: could not resolve host")
    session.flush()
    return repo.id


def seed_settings_ledger(fill) -> Any:
    """Migrate the ledger the settings name and fill it in one committed session.

    Args:
        fill: Called as ``fill(session, settings)``; its return value is returned.
    """
    from orchestrator.db.migrate import upgrade
    from orchestrator.db.session import build_engine
    from orchestrator.settings import get_settings

    settings = get_settings()
    upgrade(settings.database_url)
    engine = build_engine(settings.database_url)
    try:
        with Session(engine) as session:
            out = fill(session, settings)
            session.commit()
    finally:
        engine.dispose()
    return out
