"""Import size: seconds and peak RSS of ``axbgate import-log`` for logs of 1e4, 1e5 and 1e6
steps (issue 13 targets for 1e6 steps: <= 20 s and <= 400 MB peak RSS), on SQLite and
PostgreSQL, plus the size of ``GET /runs/{id}`` (default page) for the stored run.

Each import runs in a fresh process under ``/usr/bin/time -v`` (peak RSS = "Maximum
resident set size" of that process, wall = its whole life: interpreter start, ledger
open, import, commit). Inside, the import itself is timed too. The synthetic log is what
the bundled trainer prints: one ``AXBGATE_STEP`` per step (slowest-rank and rank-0 time,
phase, loss, grad norm, lr), an ``AXBGATE_TIMING`` with the counts (no per-step list:
the step records carry the series; a record line is at most 1 MiB) and an
``AXBGATE_RESULT``.

Usage::

    python benchmarks/import_size.py [--steps 10000 100000 1000000] [--db sqlite postgres]
        [--pg-admin URL] [--profile]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_S, TARGET_MB = 20.0, 400.0


def write_log(path: Path, num_steps: int) -> int:
    """Write a synthetic trainer log of ``num_steps`` steps; return its size in bytes."""
    warmup = 10
    with open(path, "w") as fh:
        fh.write('AXBGATE_PROVENANCE {"v":1,"hostnames":["n0"],"torch_version":"2.13.0"}\n')
        for i in range(num_steps):
            t = 0.43 + 0.001 * ((i * 7919) % 13) / 13 + (2.5 if i == 0 else 0.0)
            phase = "warmup" if i < warmup else "measured"
            fh.write(f'AXBGATE_STEP {{"v":1,"step":{i},"slowest_rank_step_s":{t!r},"rank_step_s":{t - 0.0004!r},'
                     f'"phase":"{phase}","loss":{1.0 / (i + 1)!r},"grad_norm":0.5,"lr":0.0001}}\n')
        fh.write(f'AXBGATE_TIMING {{"v":1,"num_warmup_steps":{warmup},"num_measured_steps":{num_steps - warmup}}}\n')
        fh.write('AXBGATE_RESULT {"v":1,"median_step_s":0.4305,"world_size":8,"local_batch_size":1,'
                 '"grad_accum_steps":1}\n')
    return path.stat().st_size


def child_import(log: str, profile: bool) -> None:
    """Import one log in this process (the CLI verb); print seconds and peak RSS."""
    from orchestrator.app.cli import main

    before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        code = prof.runcall(main, ["import-log", log, "--json"])
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        code = main(["import-log", log, "--json"])
    seconds = time.perf_counter() - t0
    after_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"code": code, "import_s": seconds, "rss_before_import_mb": before_kib / 1024,
                      "rss_after_import_mb": after_kib / 1024}), flush=True)


def child_view() -> None:
    """Time ``GET /runs/1`` (default page) through the app in-process; print its size."""
    from fastapi.testclient import TestClient

    from orchestrator.app.api import create_app
    from orchestrator.settings import get_settings

    settings = get_settings()
    app = create_app(settings.model_copy(update={
        "gates": settings.gates.model_copy(update={"enabled": False}),
        "nightly": settings.nightly.model_copy(update={"enabled": False})}))
    with TestClient(app) as client:
        t0 = time.perf_counter()
        resp = client.get("/runs/1")
        view_ms = (time.perf_counter() - t0) * 1e3
    print(json.dumps({"view_bytes": len(resp.content), "view_ms": view_ms, "view_status": resp.status_code,
                      "num_steps": resp.json().get("num_steps"),
                      "view_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)


def _pg_url(admin: str) -> tuple[str, str]:
    import psycopg

    name = f"axbgate_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return name, f"{base}/{name}"


def _drop_pg(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(log: Path, db: str, pg_admin: str, profile: bool) -> dict:
    """One import of ``log`` into a fresh ledger in a fresh process."""
    from orchestrator.db.migrate import upgrade

    with tempfile.TemporaryDirectory(prefix="axbgate-bench-") as data:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AXBGATE_")}
        env["AXBGATE_DATA_DIR"] = data
        pg_name = None
        if db == "postgres":
            pg_name, url = _pg_url(pg_admin)
            env["AXBGATE_DATABASE__URL"] = url
            upgrade(url)
        try:
            argv = ["/usr/bin/time", "-v", sys.executable, __file__, "--child", str(log)]
            if profile:
                argv.append("--profile")
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            view = subprocess.run([sys.executable, __file__, "--child-view"], env=env,
                                  capture_output=True, text=True, check=False)
        finally:
            if pg_name:
                _drop_pg(pg_admin, pg_name)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    if view.returncode != 0:
        raise RuntimeError(view.stderr[-3000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(json.loads(view.stdout.strip().splitlines()[-1]))
    rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", proc.stderr).group(1)
    parts = [float(p) for p in wall.split(":")]
    out["process_wall_s"] = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    out["peak_rss_mb"] = rss_kib / 1024
    out["stderr_tail"] = proc.stderr[: proc.stderr.find("\tCommand being timed")][-3000:]
    out["cpu_s"] = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", proc.stderr).group(1))
                       for kind in ("User", "System"))
    if profile:
        out["profile"] = proc.stderr[: proc.stderr.find("\tCommand being timed")]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--db", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each import")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-view", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_import(args.child, args.profile)
        return
    if args.child_view:
        child_view()
        return
    print(f"date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}")
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpu  python {platform.python_version()}"
          f"  load average at start {os.getloadavg()[0]:.1f} (shared machine)")
    print(f"command: python benchmarks/import_size.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"targets (1e6 steps): <= {TARGET_S:g} s and <= {TARGET_MB:g} MB peak RSS of the importing process")
    print("import s: wall seconds of the import (CLI verb) inside the process; process s: the whole "
          "process (start, ledger open, import, commit); cpu s: user+sys CPU of the process (on a "
          "loaded machine wall time is longer than CPU time; the database server's CPU is not in it)")
    print(f"{'db':9} {'steps':>9} {'log MB':>8} {'import s':>9} {'process s':>10} {'cpu s':>7} {'peak RSS MB':>12} "
          f"{'GET /runs/1':>12} {'view ms':>8}  verdict")
    with tempfile.TemporaryDirectory(prefix="axbgate-bench-logs-") as tmp:
        for steps in args.steps:
            log = Path(tmp) / f"steps-{steps}.log"
            size = write_log(log, steps)
            for db in args.db:
                out = measure(log, db, args.pg_admin, args.profile)
                if out["code"] != 0 or out["view_status"] != 200 or out["num_steps"] != steps:
                    raise SystemExit(f"{db} {steps}: the import failed (exit {out['code']}, GET /runs/1 "
                                     f"{out['view_status']}, {out['num_steps']} steps stored):\n"
                                     f"{out['stderr_tail']}")
                ok = out["import_s"] <= TARGET_S and out["peak_rss_mb"] <= TARGET_MB
                print(f"{db:9} {steps:>9} {size / 1e6:>8.1f} {out['import_s']:>9.2f} {out['process_wall_s']:>10.2f} "
                      f"{out['cpu_s']:>7.2f} {out['peak_rss_mb']:>12.1f} {out['view_bytes'] / 1024:>9.1f} KiB {out['view_ms']:>8.0f}  "
                      f"{'OK' if ok else 'MISSED'}  (load {os.getloadavg()[0]:.1f})", flush=True)
                if args.profile:
                    print(out["profile"], flush=True)


if __name__ == "__main__":
    main()
