"""The ledger in real headless Chromium (Debian's, driven by Playwright): every page type
loads with the content a user needs, plots are drawn with data points, writes go through the
API with a token, and screenshots are kept as test artifacts (``tests/browser/conftest.py``)."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import check_png

pytestmark = pytest.mark.browser

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _shot(page, shots, name: str) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    check_png(path)


def _plot_state(page, selector: str) -> dict:
    """What uPlot drew: series and finite points per series, read from the live instance."""
    return page.evaluate(
        """(sel) => {
          const el = document.querySelector(sel);
          const u = window.axbgatePlots[el.id];
          const canvas = el.querySelector('canvas');
          const finite = (col) => col.filter(v => v !== null && Number.isFinite(v)).length;
          return {series: u.series.length - 1, points: u.data.slice(1).map(finite),
                  canvas: canvas ? [canvas.width, canvas.height] : null,
                  dataset: Object.assign({}, el.dataset)};
        }""", selector)


def _canvas_has_ink(page, selector: str) -> int:
    """Number of non-transparent pixels of the plot's canvas (0 for a blank canvas)."""
    return page.evaluate(
        """(sel) => {
          const c = document.querySelector(sel + ' canvas');
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i] > 0) n++; }
          return n;
        }""", selector)


def test_ledger_filter_gate_plot_decision(app, seeded, token, page, shots):
    from tests.live_server import serve

    with serve(app) as base:
        page.goto(f"{base}/ledger")
        assert page.locator("tr.gate-row").count() == len(seeded)
        assert page.locator("#stopping-points tbody tr").count() == 1
        _shot(page, shots, "1-ledger")

        page.fill("#filters input[name=tag]", "qkv")
        with page.expect_navigation():
            page.click("#apply-filters")
        assert "tag=qkv" in page.evaluate("location.search")
        rows = page.eval_on_selector_all("tr.gate-row", "rs => rs.map(r => +r.dataset.gateId)")
        assert rows == [seeded["degraded"], seeded["accept"]]
        _shot(page, shots, "2-filtered")

        with page.expect_navigation():
            page.click(f"tr[data-gate-id=\"{seeded['accept']}\"] a.gate-title")
        assert page.evaluate("location.pathname") == f"/ledger/gates/{seeded['accept']}"
        page.wait_for_selector("#step-plot canvas")
        plot = _plot_state(page, "#step-plot")
        # 3 runs + 3 run medians; every run's 3 warmup + 6 measured steps are points.
        assert plot["series"] == 6 and plot["points"][:3] == [9, 9, 9], plot
        assert plot["dataset"]["numWarmupBands"] == "3" and plot["dataset"]["numMedians"] == "3"
        # The warmup spike (1.5x the median) is outside the y-range: a 1% effect is visible.
        assert float(plot["dataset"]["yMaxMs"]) < 0.4284051351 * 1.5 * 1000 * 0.95
        box = page.locator("#step-plot canvas").bounding_box()
        assert box["width"] > 300 and box["height"] > 100
        assert _canvas_has_ink(page, "#step-plot") > 1000
        page.click("#plot-overlay")
        overlay = _plot_state(page, "#step-plot")
        assert overlay["dataset"]["mode"] == "overlay" and overlay["points"][:3] == [9, 9, 9]
        _shot(page, shots, "3-gate")

        page.select_option("#decision-select", "reject")
        page.fill("#decision-reason", "faster but +3 GiB memory")
        page.fill("#decision-token", "wrong-token")
        page.click("#decision-submit")
        page.wait_for_function("document.getElementById('decision-message').textContent.includes('401')")
        page.fill("#decision-token", token)
        with page.expect_navigation():
            page.click("#decision-submit")
        history = page.inner_text("#decision-history")
        assert "reject" in history and "faster but +3 GiB memory" in history and "tester" in history
        assert "reject" in page.inner_text("#current-decision")
        _shot(page, shots, "4-decided")
    for name in ("1-ledger", "2-filtered", "3-gate", "4-decided"):
        assert (shots / f"{name}.png").stat().st_size > 0


@SQLITE_ONLY
def test_both_verdicts_interval_history_links_sorting_at_1024(app, db_session, page, shots):
    from tests.ledger_factories import seed_calibrated
    from tests.live_server import serve

    ids = seed_calibrated(db_session)
    db_session.commit()
    target, history = ids["target"], ids["history"]
    page.set_viewport_size({"width": 1024, "height": 900})
    with serve(app) as base:
        page.goto(f"{base}/ledger?family=ltx2-calibrated")
        row = page.locator(f'tr[data-gate-id="{target}"]')
        primary = row.locator(".verdict-line.primary")
        assert primary.get_attribute("data-policy") == "sequential"
        assert primary.get_attribute("data-verdict") == "accept"
        assert row.locator('.verdict-line[data-policy="drift"]').get_attribute("data-verdict") == "accept"
        assert re.search(r"\[-\d\.\d+ %, -\d\.\d+ %\]", primary.inner_text()), primary.inner_text()
        assert "ratio" in row.locator(".reason").inner_text() or row.locator(".reason").inner_text()
        # A history gate alone: sequential cannot decide, the campaign rule accepts.
        first = page.locator(f'tr[data-gate-id="{history[0]}"]')
        assert first.locator(".verdict-line.primary").get_attribute("data-verdict") == "inconclusive"
        assert first.locator(".badge.disagree").count() == 1
        # At 1024 px the verdict column is fully on screen.
        cell = row.locator("td.verdicts").bounding_box()
        assert cell["x"] >= 0 and cell["x"] + cell["width"] <= 1024, cell
        order = page.eval_on_selector_all("tr.gate-row", "rs => rs.map(r => +r.dataset.gateId)")
        assert order == sorted(order, reverse=True)
        page.click("table.ledger th:first-child")
        order = page.eval_on_selector_all("tr.gate-row", "rs => rs.map(r => +r.dataset.gateId)")
        assert order == sorted(order)
        _shot(page, shots, "1-ledger-1024")

        page.goto(f"{base}/ledger/gates/{target}")
        table = page.locator("#verdicts")
        assert table.locator("tbody tr").count() == 3
        seq = table.locator('tr[data-policy="sequential"]')
        cells = [c.strip() for c in seq.locator("td").all_inner_texts()]
        assert "accept" in cells[1] and cells[3].startswith("[-") and cells[4].endswith("%")
        assert float(cells[5].split()[0]) > 0 and int(cells[6]) == 6, cells
        links = seq.locator("a.history-gate")
        assert sorted(int(t.lstrip("#")) for t in links.all_inner_texts()) == sorted(history)
        assert "accept" in table.locator('tr[data-policy="drift"]').inner_text()
        assert page.locator("#verdict-sentence").inner_text().startswith("The candidate's median step")
        box = page.locator("#verdicts").bounding_box()
        assert box["x"] >= 0
        _shot(page, shots, "2-gate-verdicts")
        with page.expect_navigation():
            links.first.click()
        assert page.evaluate("location.pathname").startswith("/ledger/gates/")
        assert page.locator("#disagree-banner").count() == 1


def _spread_over_days(session, gate_ids: list[int], start=None) -> None:
    """Give the gates one creation day each (a real history; seeded gates are ms apart and
    would sit on one pixel of a time axis padded to at least a day either side)."""
    import datetime as dt

    from orchestrator import store

    start = start or dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)
    for i, gid in enumerate(gate_ids):
        store.gates.get_gate(session=session, gate_id=gid).created_at = start + dt.timedelta(days=i)
    session.flush()


@SQLITE_ONLY
def test_history_and_drift_plots_have_clickable_points(app, db_session, page, shots):
    from tests.ledger_factories import seed_calibrated, seed_repository
    from tests.live_server import serve

    ids = seed_calibrated(db_session)
    repo_id = seed_repository(db_session, ids["history"] + [ids["target"]])
    _spread_over_days(db_session, ids["history"] + [ids["target"]])
    db_session.commit()
    with serve(app) as base:
        page.goto(f"{base}/ledger/gates/{ids['target']}")
        with page.expect_navigation():
            page.click("#history-link")
        page.wait_for_selector("#history-plot canvas")
        plot = _plot_state(page, "#history-plot")
        assert plot["dataset"]["numGates"] == "7" and page.inner_text("#history-count") == "7"
        # One control identity: the candidate series and one midpoint line, 7 points each.
        assert plot["series"] == 2 and plot["points"] == [7, 7], plot
        assert plot["dataset"]["numGroups"] == "1"
        assert _canvas_has_ink(page, "#history-plot") > 1000
        _shot(page, shots, "1-history")
        # Hover the newest point and click: its gate opens.
        xy = page.evaluate("""() => { const u = window.axbgatePlots['history-plot'];
              const i = u.data[0].length - 1; const r = u.over.getBoundingClientRect();
              return [r.left + u.valToPos(u.data[0][i], 'x') - 2, r.top + u.valToPos(u.data[1][i], 'y')]; }""")
        page.mouse.move(xy[0], xy[1])
        with page.expect_navigation():
            page.mouse.click(xy[0], xy[1])
        assert page.evaluate("location.pathname") == f"/ledger/gates/{ids['target']}"

        page.goto(f"{base}/ledger/repos/{repo_id}")
        page.wait_for_selector("#drift-plot canvas")
        drift = _plot_state(page, "#drift-plot")
        # 7 re-gates: 5 adopted measured heads, 2 regressions drawn apart (never adopted).
        assert drift["points"][0] == 5 and drift["points"][1] == 2, drift
        ticks = page.evaluate("window.axbgatePlots['drift-plot'].axes[0]._values")
        assert len([t for t in ticks if t]) >= 2, ticks  # x tick labels (dates) are drawn
        assert page.locator("#deliveries").count() == 0
        _shot(page, shots, "2-drift")


@SQLITE_ONLY
def test_run_allocation_imports_alerts_and_offline_docs(app, db_session, api_settings, token, page,
                                                        shots):
    from orchestrator.domain.lifecycle import transition
    from orchestrator.executors.plan import GatePaths
    from orchestrator import store
    from tests.ledger_factories import finish_gate, make_gate, seed_calibrated, seed_repository
    from tests.live_server import serve

    ids = seed_calibrated(db_session)
    seed_repository(db_session, ids["history"][:3])
    failed = make_gate(db_session, title="flash attention", family="ltx2-fa")
    gate = store.gates.get_gate(session=db_session, gate_id=failed)
    transition(gate, "submitted")
    transition(gate, "running")
    run = sorted(gate.runs, key=lambda r: r.order)[0]
    transition(run, "running")
    transition(run, "failed", reason="exited with status 1: ModuleNotFoundError: flash_attn")
    transition(gate, "failed", reason="run 0 (A) failed")
    log = GatePaths.of(api_settings.data_dir, failed).run_log(0, "A")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("starting\nTraceback (most recent call last):\n  File \"train.py\", line 3\n"
                   "ModuleNotFoundError: No module named 'flash_attn'\n")
    done = make_gate(db_session, title="done", family=None)
    finish_gate(db_session, done)
    db_session.commit()
    alloc_id = store.gates.get_gate(session=db_session, gate_id=done).allocation_id
    with serve(app) as base:
        page.goto(f"{base}/ledger/gates/{failed}")
        assert "ModuleNotFoundError" in page.inner_text(".failed-run .run-error")
        with page.expect_navigation():
            page.click(".failed-run a")
        assert "flash_attn" in page.inner_text("#run-error")
        assert "No module named 'flash_attn'" in page.inner_text("#log-tail")
        _shot(page, shots, "1-failed-run")

        page.goto(f"{base}/ledger/gates/{done}")
        with page.expect_navigation():
            page.click("#summary-numbers a[href^='/ledger/allocations/']")
        assert page.evaluate("location.pathname") == f"/ledger/allocations/{alloc_id}"
        assert page.locator("#health-checks tbody tr").count() == 2
        assert "sustained_all_reduce" in page.inner_text("#health-checks")
        page.goto(f"{base}/ledger/gates/{done}")
        with page.expect_navigation():
            page.click("#runs a >> nth=1")
        assert re.fullmatch(r"/ledger/runs/\d+", page.evaluate("location.pathname"))
        page.wait_for_selector("#step-plot canvas")
        assert _plot_state(page, "#step-plot")["points"][0] == 9
        page.goto(f"{base}/ledger/imports")
        assert page.locator("#imported-runs").count() == 1

        page.goto(f"{base}/ledger/alerts")
        rows = page.locator("tr.alert-row")
        assert rows.count() == 2 and page.inner_text("#num-open") == "2"
        page.fill("#ack-token", token)
        rows.first.locator(".ack-button").click()
        page.wait_for_function("document.getElementById('num-open').textContent === '1'")
        page.reload()
        assert page.locator("tr.alert-row").count() == 1
        _shot(page, shots, "2-alerts")

        # API docs with every request outside the server refused: assets are local.
        outside: list[str] = []

        def guard(route):
            if route.request.url.startswith((base, "blob:", "data:")):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", guard)
        page.goto(f"{base}/docs")
        page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
        assert page.locator(".swagger-ui .opblock").count() > 20
        _shot(page, shots, "3-docs")
        page.goto(f"{base}/redoc")
        page.wait_for_function("document.body.innerText.includes('Mark an alert as seen')",
                               timeout=30_000)
        assert page.locator("h1").first.inner_text().startswith("axbgate")
        _shot(page, shots, "4-redoc")
        assert outside == [], outside


@pytest.mark.slow
def test_live_gate_page_advances_while_running(tmp_path, page, shots):
    """A real gate on the local executor (fixture harness sleeping 0.35 s a step): the page's step
    counts grow while it runs, an ETA appears, and the finished gate shows its verdicts."""
    from sqlalchemy.orm import Session

    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.domain.gate_spec import GateCreate
    from orchestrator.settings import Settings
    from orchestrator.usecases.gates import submit_gate
    from tests.factories import harness_gate
    from tests.live_server import serve

    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": True, "loop_seconds": 0.5},
                        nightly={"enabled": False})
    upgrade(settings.database_url)
    app = create_app(settings)
    body = harness_gate(control_ms=100.0, candidate_ms=100.0, warmup_steps=2,
                        measured_steps=10).model_dump(mode="json")
    for side in ("control", "candidate"):  # each step really takes 0.35 s of wall time
        body[side]["env"]["HARNESS_SLEEP_S"] = "0.35"
    with Session(app.state.engine) as session:
        gate, _ = submit_gate(session=session, gate_in=GateCreate.model_validate(body))
        session.commit()
    with serve(app) as base:
        page.goto(f"{base}/ledger/gates/{gate.id}")
        assert page.get_attribute("#live-summary", "data-live") == "1"
        first = int(page.inner_text("#live-steps"))
        # Polling (not a reload) brings new steps, with an ETA in seconds (remaining steps x
        # the mean step time) once step times are known.
        page.wait_for_function(
            "(() => { const s = document.getElementById('live-summary');"
            f" return s.dataset.polls && +document.getElementById('live-steps').textContent > {first}"
            " && /\\d+ s/.test(document.getElementById('live-eta').textContent); })()",
            timeout=60_000)
        second = int(page.inner_text("#live-steps"))
        assert page.get_attribute("#live-summary", "data-live") == "1"
        page.wait_for_function(
            f"+document.getElementById('live-steps').textContent > {second}", timeout=30_000)
        assert page.locator("#live-progress tbody tr").count() == 3
        assert sum(_plot_state(page, "#step-plot")["points"][:3]) >= second
        _shot(page, shots, "1-running")
        page.wait_for_function("document.getElementById('gate-status') && "
                               "document.getElementById('gate-status').textContent === 'succeeded'",
                               timeout=90_000)
        page.wait_for_selector("#verdicts tbody tr[data-policy='drift']")
        assert page.locator("#verdicts tbody tr").count() == 3
        assert page.inner_text("#live-steps") == "36"
        _shot(page, shots, "2-finished")
