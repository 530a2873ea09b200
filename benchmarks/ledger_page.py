"""Ledger page and history plot server time with 100,000 gates, on SQLite and PostgreSQL
(issue 17 target: at most 300 ms; issue 6: under 300 ms at 10,000).

Seeds a fresh database per backend with N finished A X B gates (allocation, three runs
with per-step times, the three policies' verdicts (``sequential`` primary, ``drift`` and
``ratio-ci`` beside it, computed once per distinct set of medians), a decision on every
seventh gate) using bulk inserts, then times requests to the ledger page (which now loads
every policy's verdict of its rows), filtered pages, the history plot page (newest 1,000
gates of a family, a recipe, a topology, or the whole ledger), the stopping points and a
gate page through the ASGI app in-process (TestClient: server time, no network).

Usage::

    python benchmarks/ledger_page.py [--gates 100000] [--repeat 7] [--pg-admin URL]
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

logger = logging.getLogger("benchmarks.ledger_page")


def _seed(url: str, num_gates: int) -> None:
    from sqlalchemy import insert

    from orchestrator.db.models import Allocation, Decision, Gate, Run, Verdict
    from orchestrator.db.session import build_engine
    from orchestrator.verdict import RunSummary, judge_policies

    engine = build_engine(url)
    cache: dict[tuple[float, float, float], list] = {}

    def verdicts_of(a: float, x: float, b: float) -> list:
        if (a, x, b) not in cache:
            runs = [RunSummary(role=r, order=k, median_step_s=m)  # type: ignore[arg-type]
                    for k, (r, m) in enumerate(zip("AXB", (a, x, b)))]
            cache[(a, x, b)] = judge_policies(runs, kind="candidate", policy="sequential")
        return cache[(a, x, b)]

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    topologies = ["1x8 H200 NVLink", "2x4 GB200 MNNVL", "1x8 H100 NVLink"]
    recipes = ["ltx2-full", "ltx2-1024", "tiny"]
    batch = 1000
    with engine.begin() as conn:
        for start in range(0, num_gates, batch):
            ids = range(start + 1, min(start + batch, num_gates) + 1)
            allocs, gates, runs, verdicts, decisions = [], [], [], [], []
            for i in ids:
                healthy = i % 5 != 0
                allocs.append(dict(
                    id=i, executor="slurm", scheduler_job_id=str(100000 + i), hostnames=["n1", "n2"],
                    num_nodes=2, gpu_model="GB200", gpus_per_node=4, num_gpus=8,
                    topology=topologies[i % 3], clock_bin="2062" if healthy else "1965",
                    health_verdict="healthy" if healthy else "degraded", criteria={},
                    created_at=t0 + dt.timedelta(minutes=i),
                ))
                a, b = 0.43 + (i % 7) * 1e-3, 0.431 + (i % 5) * 1e-3
                x = 0.43 * (1 + ((i % 11) - 5) * 0.006)
                sha = f"{i:040x}"
                gates.append(dict(
                    id=i, kind="candidate" if i % 10 else "regate", title=f"change {i}",
                    family=f"family-{i % 200}", tags=[f"t{i % 30}", "bench"],
                    control_spec={"source": {"sha": sha}, "env": {}, "recipe_overrides": []},
                    candidate_spec={"source": {"sha": sha[::-1]}, "env": {"NCCL_ALGO": "Ring"},
                                    "recipe_overrides": ["train.compile=true"]},
                    workload={"recipe": recipes[i % 3]}, recipe={}, recipe_name=recipes[i % 3],
                    topology_request={"nodes": 2, "gpus_per_node": 4}, run_pattern="A X B",
                    num_warmup_steps=10, num_measured_steps=20, policy="sequential", policy_params={},
                    executor="slurm", status="succeeded", allocation_id=i,
                    created_at=t0 + dt.timedelta(minutes=i), updated_at=t0,
                ))
                for order, (role, med) in enumerate((("A", a), ("X", x), ("B", b))):
                    runs.append(dict(
                        gate_id=i, allocation_id=i, role=role, order=order, status="succeeded",
                        source_sha=sha, source_dirty=False, env={}, command=[],
                        slowest_rank_step_s=[med * 1.5] * 10 + [med] * 20, num_warmup_steps=10,
                        num_measured_steps=20, median_step_s=med, versions={}, clocks={},
                        provenance={}, result_extra={}, created_at=t0,
                    ))
                for k, v in enumerate(verdicts_of(a, x, b)):
                    verdicts.append(dict(
                        gate_id=i, policy=v.policy, policy_version=v.policy_version,
                        params=dict(v.params), verdict=v.verdict, numbers=v.to_dict(),
                        is_primary=k == 0, created_at=t0,
                    ))
                if i % 7 == 0:
                    decisions.append(dict(gate_id=i, decided_by="bench", decision="reject",
                                          reason="memory", created_at=t0))
            conn.execute(insert(Allocation), allocs)
            conn.execute(insert(Gate), gates)
            conn.execute(insert(Run), runs)
            conn.execute(insert(Verdict), verdicts)
            if decisions:
                conn.execute(insert(Decision), decisions)
        if url.startswith("postgresql"):
            from sqlalchemy import text

            for table in ("allocations", "gates", "runs", "verdicts", "decisions"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"))
                conn.execute(text(f"ANALYZE {table}"))
    engine.dispose()


def _time(client, path: str, repeat: int) -> tuple[float, float, int]:
    client.get(path)  # warm caches and the template
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        resp = client.get(path)
        samples.append((time.perf_counter() - t) * 1000.0)
        assert resp.status_code == 200, (path, resp.status_code, resp.text[:200])
    return statistics.median(samples), max(samples), len(resp.content)


def bench(url: str, label: str, num_gates: int, repeat: int, data_dir: Path) -> list[str]:
    """Seed ``url`` and time the pages; return report lines."""
    from fastapi.testclient import TestClient

    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import Settings

    upgrade(url)
    t = time.perf_counter()
    _seed(url, num_gates)
    seed_s = time.perf_counter() - t
    lines = [f"{label}: seeded {num_gates} gates in {seed_s:.1f} s"]
    app = create_app(Settings(data_dir=data_dir, database={"url": url}))
    with TestClient(app) as client:
        assert client.get("/gates").json()["count"] == num_gates
        for path in ("/ledger", "/ledger?tag=t3", "/ledger?decision=accept&baseline_eligible=true",
                     "/ledger?verdict=inconclusive", "/ledger?q=change%20999&skip=0",
                     f"/ledger?skip={num_gates - 1000}", "/gates",
                     "/ledger/history?family=family-3", "/ledger/history?recipe=ltx2-full",
                     "/ledger/history?topology=2x4%20GB200%20MNNVL", "/ledger/history",
                     "/ledger/history?limit=10000",
                     "/stopping-points", f"/ledger/gates/{num_gates // 2}"):
            median_ms, max_ms, size = _time(client, path, repeat)
            ok = "OK" if median_ms <= 300 else "SLOW"
            lines.append(f"  {path:<52} median {median_ms:7.1f} ms  max {max_ms:7.1f} ms  "
                         f"{size / 1024:7.1f} KiB  {ok}")
    return lines


def main() -> int:
    """Run both backends and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gates", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    lines = [
        f"date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}",
        f"machine: {platform.node()} {platform.machine()} {platform.processor() or ''} "
        f"python {platform.python_version()}",
        "command: python benchmarks/ledger_page.py " + " ".join(sys.argv[1:]),
        "server time of in-process requests (TestClient), target <= 300 ms for the ledger page "
        "and the history plot",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        lines += bench(f"sqlite:///{tmp}/bench.db", "sqlite", args.gates, args.repeat, Path(tmp) / "d1")
        if not args.skip_postgres:
            import psycopg

            name = f"axbgate_bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(args.pg_admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            try:
                lines += bench(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}", "postgresql",
                               args.gates, args.repeat, Path(tmp) / "d2")
            finally:
                from orchestrator.db.session import get_engine

                get_engine.cache_clear()
                with psycopg.connect(args.pg_admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print("\n".join(lines))  # noqa: T201 - a benchmark script's report
    return 0


if __name__ == "__main__":
    sys.exit(main())
