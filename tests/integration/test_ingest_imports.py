"""Log imports on SQLite and PostgreSQL: every harness variant, failure isolation through
the CLI and the API, idempotency under concurrency, paged run views, body limits, and
migrations of a fresh ledger under concurrent first use."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, pool, select
from sqlalchemy.orm import Session

from orchestrator.app.cli import main
from orchestrator.db.models import Allocation, Artifact, HealthCheck, Run, RunStep
from orchestrator.settings import get_settings
from tests.harness_logs import FULL_VARIANTS, VARIANTS, expected, health_log, variant_log
from tests.unit.orchestrator.test_records_bounds import BAD_LINES

AXBGATE = str(Path(sys.executable).parent / "axbgate")
ISOLATION = ("deep_nesting_unclosed", "int_2_70_step", "int_2_70_nested", "nan_step_time",
             "infinity_result", "ten_mb_line", "invalid_utf8", "nul_byte", "nul_escape", "lone_surrogate")
GOOD = b'AXBGATE_STEP {"v":1,"step":0,"slowest_rank_step_s":0.5}'


@pytest.fixture
def cli_ledger(db_url, monkeypatch):
    """The CLI's ledger is ``db_url`` (SQLite file or PostgreSQL)."""
    from orchestrator.db.session import get_engine

    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    get_settings.cache_clear()
    get_engine.cache_clear()
    engine = create_engine(db_url, poolclass=pool.NullPool)
    yield engine
    engine.dispose()
    get_engine.cache_clear()


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _counts(engine) -> tuple[int, int, int]:
    with Session(engine) as s:
        return (s.scalar(select(func.count()).select_from(Run)), s.scalar(select(func.count()).select_from(Artifact)),
                s.scalar(select(func.count()).select_from(RunStep)))


def _kept_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.mark.parametrize("variant", VARIANTS)
def test_cli_imports_every_harness_variant(cli_ledger, capsys, tmp_path, variant):
    log = tmp_path / f"{variant}.log"
    log.write_text(variant_log(variant))
    code, out, err = _cli(capsys, "import-log", str(log), "--json")
    assert code == 0, err
    [summary] = json.loads(out)
    want = expected(variant)
    assert summary["status"] == "succeeded" and summary["dialect"] == "bf16"
    assert summary["log_median_step_s"] == want["log_median"]
    assert summary["step_series"] == want["source"] and summary["num_steps"] == 30
    if want["source"] == "rank0":  # the harness's slowest-rank median, not rank 0's own
        assert summary["median_step_s"] == want["log_median"]
        assert "rank 0's own step time" in err and summary["median_mismatch"] is False
        assert "harness's slowest-rank median" in err
    else:
        assert summary["median_step_s"] == statistics.median(want["series"][10:30])
    if variant in FULL_VARIANTS:
        assert summary["median_step_s"] == summary["log_median_step_s"]  # the harness's own median
    with Session(cli_ledger) as s:
        run = s.get(Run, summary["run_id"])
        if want["source"] == "rank0":
            assert run.slowest_rank_step_s == [] and run.result_extra["rank0_step_s"] == want["series"]
            assert run.result_extra["rank0_median_step_s"] == statistics.median(want["series"][10:30])
        else:
            assert run.slowest_rank_step_s == want["series"]
        steps = list(s.scalars(select(RunStep).where(RunStep.run_id == run.id).order_by(RunStep.step)))
        assert [st.step for st in steps] == list(range(1, 31))
        assert all(st.slowest_rank_step_s is None and st.rank_step_s > 0 for st in steps)
        assert run.result_extra["step_series"] == want["source"]


def test_cli_imports_health_probe_lines_with_busbw(cli_ledger, capsys, tmp_path):
    log = tmp_path / "health.log"
    log.write_text(health_log(world=8, busbw_gbps=296.4))
    code, out, err = _cli(capsys, "import-log", str(log), "--json")
    assert code == 0, err
    [summary] = json.loads(out)
    assert summary["run_id"] is None and summary["num_health_checks"] == 16
    with Session(cli_ledger) as s:
        alloc = s.get(Allocation, summary["allocation_id"])
        checks = list(s.scalars(select(HealthCheck).where(HealthCheck.allocation_id == alloc.id)
                                .order_by(HealthCheck.id)))
        sustained = [c for c in checks if c.name == "sustained_all_reduce"]
        assert len(sustained) == 8 and {c.measured["slowest_rank_bus_gbps"] for c in sustained} == {296.4}
        assert {c.status for c in checks} == {"PASS"}


@pytest.mark.parametrize("name", ISOLATION)
def test_cli_import_of_a_bad_log_names_the_line_and_stores_nothing(cli_ledger, capsys, tmp_path, name):
    log = tmp_path / "bad.log"
    log.write_bytes(b"\n".join([GOOD, BAD_LINES[name], GOOD.replace(b'"step":0', b'"step":1')]) + b"\n")
    good = tmp_path / "good.log"
    good.write_text(variant_log("pack_d016"))
    code, out, err = _cli(capsys, "import-log", str(log), str(good), "--json")
    assert code == 2
    assert f"{log}: line 2:" in err, err
    assert "Traceback" not in err and len(err) < 2000
    [summary] = json.loads(out)  # the other file of the same command was imported
    assert summary["path"] == str(good) and summary["status"] == "succeeded"
    assert _counts(cli_ledger) == (1, 1, 30)
    kept = _kept_files(get_settings().artifacts_dir / "logs")
    assert [p.name for p in kept] == [f"{summary['log_sha256']}.log"]


@pytest.mark.parametrize("name", ISOLATION)
def test_api_import_of_a_bad_log_is_422_naming_the_line(client, auth, db_session, api_settings, name):
    body = b"\n".join([GOOD, BAD_LINES[name]]) + b"\n"
    resp = client.post("/runs/import", content=body, params={"filename": "bad.log"},
                       headers={**auth, "Content-Type": "application/octet-stream"})
    assert resp.status_code == 422, resp.text
    [detail] = resp.json()["detail"]
    assert detail["loc"] == ["body", "line 2"] and detail["type"] == "record_error"
    assert len(detail["msg"]) < 600
    assert _kept_files(api_settings.artifacts_dir) == []  # no upload left, no kept copy
    assert db_session.scalar(select(func.count()).select_from(Run)) == 0
    assert db_session.scalar(select(func.count()).select_from(Artifact)) == 0
    ok = client.post("/runs/import", content=variant_log("compile_mode").encode(), headers=auth)
    assert ok.status_code == 201, ok.text


def test_fifty_parallel_imports_of_one_log_store_one_run(db_url, tmp_path):
    from orchestrator.usecases.imports import import_log

    log = tmp_path / "run.log"
    log.write_text(variant_log("singleton_timestep") + health_log())
    engine = create_engine(db_url, poolclass=pool.NullPool,
                           connect_args={"timeout": 60} if db_url.startswith("sqlite") else {})
    barrier = threading.Barrier(50)

    def one(_i: int):
        barrier.wait()
        with Session(engine, expire_on_commit=False) as session:
            summary = import_log(session=session, path=log, artifacts_dir=tmp_path / "artifacts")
            session.commit()
            return summary

    with ThreadPoolExecutor(50) as pool_:
        summaries = list(pool_.map(one, range(50)))
    assert len({s.run_id for s in summaries}) == 1
    assert sum(not s.already_imported for s in summaries) == 1
    assert {s.num_health_checks for s in summaries} == {16}
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 1
        assert s.scalar(select(func.count()).select_from(Artifact)) == 1
        assert s.scalar(select(func.count()).select_from(Allocation)) == 1
        assert s.scalar(select(func.count()).select_from(HealthCheck)) == 16
    engine.dispose()


def test_ten_parallel_cli_processes_on_an_empty_data_dir(tmp_path):
    """A fresh embedded ledger: ten `axbgate` processes at once migrate it once, all succeed."""
    log = tmp_path / "run.log"
    log.write_text(variant_log("pack_d016"))
    env = {**os.environ, "AXBGATE_DATA_DIR": str(tmp_path / "fresh-data")}
    cmds = [[AXBGATE, "import-log", str(log), "--json"]] * 7 + [[AXBGATE, "ledger", "--json"]] * 3
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in cmds]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read().decode()) for p in procs]
    assert [r[0] for r in results] == [0] * 10, [r[2][-800:] for r in results if r[0]]
    runs = {json.loads(r[1])[0]["run_id"] for r in results[:7]}
    assert runs == {1}


@pytest.mark.postgres
def test_ten_parallel_upgrades_of_an_empty_postgres(postgres_url, tmp_path):
    from orchestrator.db.migrate import current_revision, head_revision

    env = {**os.environ, "AXBGATE_DATABASE__URL": postgres_url}
    procs = [subprocess.Popen([AXBGATE, "db", "upgrade"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(10)]
    results = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
    assert [r[0] for r in results] == [0] * 10, [r[1][-800:] for r in results if r[0]]
    assert current_revision(postgres_url) == head_revision()


def test_run_view_pages_its_steps(client, auth):
    n = 25_000
    lines = [f'AXBGATE_STEP {{"v":1,"step":{i},"slowest_rank_step_s":{0.1 + i * 1e-7}}}' for i in range(n)]
    lines.append('AXBGATE_TIMING {"v":1,"num_warmup_steps":10,"num_measured_steps":24990}')
    lines.append('AXBGATE_RESULT {"v":1,"median_step_s":0.5,"world_size":1,"local_batch_size":1,'
                 '"grad_accum_steps":1}')
    resp = client.post("/runs/import", content="\n".join(lines).encode(), headers=auth)
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["run_id"]
    page = client.get(f"/runs/{run_id}")
    body = page.json()
    assert len(page.content) < 400_000
    assert body["num_steps"] == n and body["num_series_steps"] == n
    assert len(body["steps"]) == 1000 and len(body["slowest_rank_step_s"]) == 1000
    last = client.get(f"/runs/{run_id}", params={"steps_offset": 24_500, "steps_limit": 10_000}).json()
    assert [s["step"] for s in last["steps"]] == list(range(24_500, n))
    assert last["slowest_rank_step_s"][0] == pytest.approx(0.1 + 24_500e-7)
    assert client.get(f"/runs/{run_id}", params={"steps_limit": 10_001}).status_code == 422
    gate_free = client.get(f"/runs/{run_id}/log")
    assert gate_free.status_code == 200 and gate_free.content.startswith(b"AXBGATE_STEP")


def test_preview_body_is_limited(client):
    small = {"pattern": "A X B", "medians_s": [0.43, 0.41, 0.43]}
    assert client.post("/verdicts/preview", json=small).status_code == 200
    big = json.dumps({**small, "policy_params": {f"k{i}": 1.0 for i in range(120_000)}}).encode()
    assert len(big) > 1 << 20
    resp = client.post("/verdicts/preview", content=big, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413 and resp.json()["detail"][0]["type"] == "body_too_large"

    def chunks():  # no Content-Length: refused while streaming, past the limit
        for _ in range(64):
            yield b" " * (64 << 10)

    resp = client.post("/verdicts/preview", content=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 413, resp.text
