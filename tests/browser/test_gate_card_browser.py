"""The gate page's headline card and delta plot, and the history grouped by control identity,
in real headless Chromium against a live server: the values read from the page equal the
API's numbers of the same seeded gate, and every page fits 1024 px without horizontal
scrolling (issue 25, point 2)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from tests.browser.conftest import check_png

pytestmark = [pytest.mark.browser, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]

DAY = dt.timedelta(days=1)
START = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)


def _shot(page, shots, name: str) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    check_png(path)


def _time_runs(session, gate_id: int, seconds: float) -> None:
    """Give every run of the gate a start and end ``seconds`` apart (GPU-seconds > 0)."""
    from orchestrator import store

    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    for k, run in enumerate(sorted(gate.runs, key=lambda r: r.order)):
        run.started_at = START + dt.timedelta(seconds=100 * k)
        run.ended_at = run.started_at + dt.timedelta(seconds=seconds)
    session.flush()


def _pct(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"[-+]?\d+\.\d+", text)]


def test_gate_card_shows_the_api_numbers_at_1024(app, seeded, db_session, page, shots):
    from tests.live_server import serve

    gid = seeded["accept"]
    _time_runs(db_session, gid, 20.0)  # 3 runs x 20 s x 8 GPUs = 480 GPU-seconds
    db_session.commit()
    page.set_viewport_size({"width": 1024, "height": 900})
    with serve(app) as base:
        api = page.request.get(f"{base}/gates/{gid}").json()
        page.goto(f"{base}/ledger/gates/{gid}")
        card = page.locator("#gate-card")
        # The card comes first: before the numbers table and every plot.
        first_section = page.evaluate("document.querySelector('main section').id")
        assert first_section == "gate-card"
        summary = api["summary"]
        assert page.inner_text("#card-decision") == summary["decision"] == "accept"
        assert page.inner_text("#card-verdict") == summary["verdict"] == "accept"
        effect = page.inner_text("#card-effect")
        primary = next(v for v in api["verdicts"] if v["is_primary"])
        brackets = primary["numbers"]["brackets"]
        against = sorted(100 * (b["candidate_s"] / c - 1) for b in brackets
                         for c in (b["left_s"], b["right_s"]))
        assert effect.startswith(f"X is {abs(summary['delta_pct']):.3f} % faster"), effect
        assert _pct(effect)[1:] == [round(against[0], 3), round(against[-1], 3)], effect
        assert effect.endswith("vs control midpoint")
        runs = page.locator("#card-runs")
        done = sum(r["status"] == "succeeded" for r in api["runs"])
        assert runs.inner_text() == f"{done} / {len(api['runs'])} / {len(api['runs'])}" == "3 / 3 / 3"
        gpus = api["allocation"]["num_gpus"]
        expected = sum((dt.datetime.fromisoformat(r["ended_at"])
                        - dt.datetime.fromisoformat(r["started_at"])).total_seconds()
                       for r in api["runs"]) * gpus
        assert float(page.inner_text("#card-gpu-seconds")) == expected == 480.0
        assert page.inner_text("#card-health") == api["allocation"]["health_verdict"] == "healthy"
        assert page.inner_text("#card-semantics") == "not judged" and summary["semantics"] is None
        box = card.bounding_box()
        assert box["y"] < 200 and box["x"] >= 0 and box["x"] + box["width"] <= 1024, box
        assert page.evaluate("document.documentElement.scrollWidth") <= 1024
        _shot(page, shots, "1-gate-card-1024")

        # A degraded allocation is read from the card too.
        page.goto(f"{base}/ledger/gates/{seeded['degraded']}")
        assert page.inner_text("#card-health") == "degraded"


def test_delta_plot_has_one_point_per_candidate_copy_and_a_band(app, db_session, page, shots):
    from tests.ledger_factories import seed_calibrated
    from tests.live_server import serve

    ids = seed_calibrated(db_session)
    db_session.commit()
    with serve(app) as base:
        gid = ids["target"]  # sequential, A A X B X A X B: three candidate copies
        api = page.request.get(f"{base}/gates/{gid}").json()
        primary = next(v for v in api["verdicts"] if v["is_primary"])
        page.goto(f"{base}/ledger/gates/{gid}")
        svg = page.locator("#delta-plot svg")
        copies = svg.locator("g.copy")
        assert copies.count() == primary["numbers"]["num_candidate_copies"] == 3
        assert copies.locator("circle").count() == 3
        drawn = [float(c) for c in copies.evaluate_all("gs => gs.map(g => g.dataset.deltaPct)")]
        assert drawn == pytest.approx(primary["numbers"]["copy_deltas_pct"], abs=1e-4)
        assert [int(o) for o in copies.evaluate_all("gs => gs.map(g => g.dataset.order)")] == \
            [b["candidate_order"] for b in primary["numbers"]["brackets"]] == [2, 4, 6]
        band = svg.locator("rect.decision-band")
        # Sequential: min_effect 0 %, the band is the neutral band +-1 %: never zero wide.
        assert float(band.get_attribute("data-high-pct")) == \
            primary["numbers"]["params"]["neutral_band_pct"] == 1.0
        assert float(band.get_attribute("data-low-pct")) == -1.0
        assert band.bounding_box()["width"] > 50
        assert "neutral_band_pct" in band.locator("title").text_content()
        estimate = svg.locator("g.estimate")
        assert float(estimate.get_attribute("data-delta-pct")) == pytest.approx(
            api["summary"]["delta_pct"], abs=1e-4)
        assert "[-1.269, -0.777] %" in estimate.locator("title").text_content()
        # Each copy's tooltip names the runs it is compared with.
        assert "midpoint of runs 1 and 3" in copies.first.locator("title").text_content()

        # The per-step legend: one entry per role and mark, not one per run and median.
        page.wait_for_selector("#step-plot canvas")
        entries = page.locator("#step-plot-legend .legend-entry").all_inner_texts()
        assert entries == ["control A", "candidate X", "control B", "run median (measured steps)",
                           "warmup", "control midpoint ± decision band"], entries
        assert page.locator("#step-plot .u-legend").count() == 0
        _shot(page, shots, "1-delta-plot")

        # The drift gate's band is its threshold: max(drift, min_effect).
        hist = ids["history"][0]
        api = page.request.get(f"{base}/gates/{hist}").json()
        drift = next(v for v in api["verdicts"] if v["policy"] == "drift")
        assert drift["numbers"]["threshold_pct"] > 0
        page.goto(f"{base}/ledger/gates/{hist}")
        assert float(page.locator("#delta-plot rect.decision-band").get_attribute("data-high-pct")) \
            == pytest.approx(1.0)  # its primary is sequential; drift is the campaign rule
        # The disagreement banner says what each policy actually said on these runs.
        banner = page.inner_text("#disagree-banner")
        for v in api["verdicts"]:
            assert f"{v['policy']}{' (primary)' if v['is_primary'] else ''} said {v['verdict']}" in banner
        assert "drift's accept" in banner, banner


def _two_workloads(session) -> dict[str, list[int]]:
    """Six gates of ``train_a.py`` (0.43 s steps) on days 0-5, then six of ``train_b.py``
    (0.60 s steps) on days 6-11: two workloads, each steady."""
    from orchestrator import store
    from tests.ledger_factories import finish_gate, make_gate

    out: dict[str, list[int]] = {"a": [], "b": []}
    for day in range(12):
        which, base = ("a", 0.43) if day < 6 else ("b", 0.60)
        gid = make_gate(session, title=f"{which} {day}", family=None)
        gate = store.gates.get_gate(session=session, gate_id=gid)
        gate.workload = {**gate.workload, "command": ["python", f"train_{which}.py"]}
        finish_gate(session, gid, medians_s=(base, base * 0.99, base * 1.001))
        gate.created_at = START + day * DAY
        out[which].append(gid)
    session.flush()
    return out


def test_history_has_one_line_per_control_identity_and_no_false_change_point(app, db_session,
                                                                               page, shots):
    from tests.live_server import serve

    ids = _two_workloads(db_session)
    db_session.commit()
    with serve(app) as base:
        page.goto(f"{base}/ledger/history")
        page.wait_for_selector("#history-plot canvas")
        assert page.inner_text("#history-count") == "12"
        assert page.inner_text("#history-num-groups") == "2"
        # Each workload is steady: joining them made a false change point at gate 7.
        assert page.inner_text("#history-num-change-points") == "0"
        lines = page.evaluate("""() => {
          const u = window.axbgatePlots['history-plot'];
          const pts = JSON.parse(document.getElementById('history-plot-data').textContent).points;
          return u.series.slice(2).map((s, k) => ({label: s.label,
            gates: u.data[k + 2].map((v, i) => v === null ? null : pts[i].gate_id).filter(g => g !== null)}));
        }""")
        assert [ln["gates"] for ln in lines] == [ids["a"], ids["b"]], lines
        assert "train_a.py" in lines[0]["label"] and "train_b.py" in lines[1]["label"]
        rows = page.locator("#history-groups tbody tr")
        assert rows.count() == 2 and "none" in rows.nth(0).inner_text()
        # Time axis: the real range (11 days) padded by at least a day either side.
        ds = page.evaluate("Object.assign({}, document.getElementById('history-plot').dataset)")
        span_days = (float(ds["xMax"]) - float(ds["xMin"])) / 86400
        assert 13.0 <= span_days <= 14.0, span_days
        ticks = page.evaluate("window.axbgatePlots['history-plot'].axes[0]._values")
        assert len([t for t in ticks if t]) >= 3 and any(re.search(r"\d", t) for t in ticks if t), ticks
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        _shot(page, shots, "1-history-two-workloads")
        # Drag-zoom into days 2-6 still zooms (the padding applies to the whole range only).
        box = page.locator("#history-plot .u-over").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + 20)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 20, steps=5)
        page.mouse.up()
        zoomed = page.evaluate("(() => { const x = window.axbgatePlots['history-plot'].scales.x;"
                               " return (x.max - x.min) / 86400; })()")
        assert 2.5 < zoomed < 4.5, zoomed

        # A one-gate history spans about two days, not years.
        page.goto(f"{base}/ledger/history?tolerance_pct=0.5&limit=1")
        page.wait_for_selector("#history-plot canvas")
        ds = page.evaluate("Object.assign({}, document.getElementById('history-plot').dataset)")
        assert ds["numGates"] == "1"
        assert (float(ds["xMax"]) - float(ds["xMin"])) / 86400 == pytest.approx(2.0)
        _shot(page, shots, "2-history-one-gate")


PAGES_1024 = ["/ledger", "/ledger/decisions", "/ledger/history", "/ledger/imports",
              "/ledger/repos", "/ledger/alerts"]


def test_every_page_fits_1024_px_and_loads_nothing_from_outside(app, db_session, page, shots):
    from orchestrator import store
    from tests.ledger_factories import seed_calibrated, seed_ledger, seed_repository
    from tests.live_server import serve

    ids = seed_calibrated(db_session)
    more = seed_ledger(db_session)
    repo = seed_repository(db_session, ids["history"])
    db_session.commit()
    gate = store.gates.get_gate(session=db_session, gate_id=ids["target"])
    run_id, alloc_id = sorted(gate.runs, key=lambda r: r.order)[0].id, gate.allocation_id
    urls = PAGES_1024 + [f"/ledger/gates/{ids['target']}", f"/ledger/gates/{more['accept']}",
                         f"/ledger/gates/{more['queued']}", f"/ledger/runs/{run_id}",
                         f"/ledger/allocations/{alloc_id}", f"/ledger/repos/{repo}"]
    page.set_viewport_size({"width": 1024, "height": 900})
    with serve(app) as base:
        outside: list[str] = []

        def guard(route):
            if route.request.url.startswith((base, "blob:", "data:")):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", guard)
        wide = {}
        for url in urls:
            page.goto(base + url)
            page.wait_for_load_state("load")
            width = page.evaluate("document.documentElement.scrollWidth")
            # Nothing sticks out of the window, and no table scrolls inside its wrapper.
            cut = page.evaluate("""() => {
              const out = [];
              document.querySelectorAll('main table, main section, main svg, main form, .u-legend')
                .forEach(e => { const r = e.getBoundingClientRect();
                  if (r.right > window.innerWidth + 1) out.push(e.id || e.className || e.tagName); });
              document.querySelectorAll('.table-wrap').forEach(w => {
                if (w.scrollWidth > w.clientWidth + 1) out.push('scrolls: ' + (w.firstElementChild.id || w.firstElementChild.className)); });
              return out; }""")
            if width > 1024 or cut:
                wide[url] = (width, cut)
        assert wide == {}, wide
        assert outside == [], outside
