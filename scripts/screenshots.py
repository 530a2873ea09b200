"""Screenshots of the web ledger for the docs (docs/web.md): the ledger, a gate page and the
history at 1024 and 1440 px, taken with Debian's Chromium (Playwright) against a local
server on a seeded temporary SQLite ledger.

Usage: ``.venv/bin/python scripts/screenshots.py [--out docs/img]`` from the repository root
(needs ``apt-get install chromium``; ``bash scripts/services_up.sh`` installs it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTHS = (1024, 1440)


def seed(session) -> dict[str, int]:
    """The demo ledger: the small ledger, a calibrated family (sequential, 8 runs) and a
    second workload, one gate a day, so the history shows two lines."""
    from orchestrator import store
    from tests.ledger_factories import finish_gate, make_gate, seed_calibrated, seed_ledger

    start = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)
    cal = seed_calibrated(session)
    small = seed_ledger(session)
    other = []
    for day in range(5):
        gid = make_gate(session, title=f"fused adamw {day}", family="ltx2-optim")
        gate = store.gates.get_gate(session=session, gate_id=gid)
        gate.workload = {**gate.workload, "command": ["python", "train_small.py"]}
        finish_gate(session, gid, medians_s=(0.212, 0.209, 0.2125))
        other.append(gid)
    store.gates.get_gate(session=session, gate_id=small["queued"]).created_at = \
        start + dt.timedelta(days=20)
    order = cal["history"] + [cal["target"]] + [small["accept"], small["neutral"],
                                                small["degraded"], small["regate"]] + other
    for day, gid in enumerate(sorted(order)):
        gate = store.gates.get_gate(session=session, gate_id=gid)
        gate.created_at = start + dt.timedelta(days=day)
        for k, run in enumerate(sorted(gate.runs, key=lambda r: r.order)):
            run.started_at = gate.created_at + dt.timedelta(seconds=60 * k)
            run.ended_at = run.started_at + dt.timedelta(seconds=42)
    session.commit()
    return {"gate": cal["target"]}


def main() -> int:
    """Seed, serve, shoot; print the files written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img",
                        help="folder for the PNG files (default: docs/img)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import Settings
    from tests.live_server import serve

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        print("error: Debian chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", gates={"enabled": False},
                            nightly={"enabled": False})
        upgrade(settings.database_url)
        app = create_app(settings)
        with app.state.session_factory() as session:
            ids = seed(session)
        pages = {"ledger": "/ledger", "gate": f"/ledger/gates/{ids['gate']}",
                 "history": "/ledger/history"}
        with serve(app) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            for width in WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, url in pages.items():
                    page.goto(base + url)
                    page.wait_for_load_state("networkidle")
                    path = args.out / f"{name}-{width}.png"
                    # The top of the page (what a person sees first), not the whole scroll.
                    page.screenshot(path=str(path), full_page=False)
                    print(path)
                page.close()
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
