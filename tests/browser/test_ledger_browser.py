"""The ledger in real headless Chromium: load, filter, open a gate, see the plot, record
a decision with a token; screenshots are checked to be real, non-empty PNGs."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser


def _check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100 and len(data) > 5000, (path, width, height, len(data))
    return width, height


@pytest.fixture
def browser():
    from tests.browser.cdp import Browser

    if shutil.which("chromium") is None:
        pytest.fail("Debian chromium is not installed (apt-get install chromium)")
    b = Browser(shutil.which("chromium"))
    yield b
    b.close()


def test_ledger_filter_gate_plot_decision(app, seeded, token, browser, tmp_path):
    from tests.live_server import serve

    shots = tmp_path / "screenshots"
    shots.mkdir()
    with serve(app) as base:
        browser.navigate(f"{base}/ledger")
        assert browser.eval("document.querySelectorAll('tr.gate-row').length") == len(seeded)
        assert browser.eval("document.querySelectorAll('#stopping-points tbody tr').length") == 1
        _check_png(browser.screenshot(shots / "1-ledger.png"))

        browser.eval("document.querySelector('#filters input[name=tag]').value = 'qkv'")
        browser.events.clear()
        browser.eval("document.getElementById('apply-filters').click()")
        browser.wait_event("Page.loadEventFired")
        assert "tag=qkv" in browser.eval("location.search")
        rows = browser.eval("[...document.querySelectorAll('tr.gate-row')].map(r => +r.dataset.gateId)")
        assert rows == [seeded["degraded"], seeded["accept"]]
        _check_png(browser.screenshot(shots / "2-filtered.png"))

        browser.events.clear()
        browser.eval(f"document.querySelector('tr[data-gate-id=\"{seeded['accept']}\"] a.gate-title').click()")
        browser.wait_event("Page.loadEventFired")
        assert browser.eval("location.pathname") == f"/ledger/gates/{seeded['accept']}"
        assert browser.eval("document.querySelectorAll('#plot svg polyline').length") == 3
        assert browser.eval("document.querySelectorAll('#plot svg rect.warmup').length") == 3
        assert browser.eval("document.querySelectorAll('#plot svg line.median').length") == 3
        box = browser.eval("(() => {const r = document.querySelector('#plot svg').getBoundingClientRect(); return [r.width, r.height];})()")
        assert box[0] > 300 and box[1] > 100
        _check_png(browser.screenshot(shots / "3-gate.png"))

        browser.eval("document.getElementById('decision-select').value = 'reject'")
        browser.eval("document.getElementById('decision-reason').value = 'faster but +3 GiB memory'")
        browser.eval("document.getElementById('decision-token').value = 'wrong-token'")
        browser.eval("document.getElementById('decision-submit').click()")
        browser.wait_for("document.getElementById('decision-message').textContent.includes('401')")
        browser.eval(f"document.getElementById('decision-token').value = {token!r}")
        browser.events.clear()
        browser.eval("document.getElementById('decision-submit').click()")
        browser.wait_event("Page.loadEventFired")
        history = browser.wait_for("document.getElementById('decision-history').innerText")
        assert "reject" in history and "faster but +3 GiB memory" in history and "tester" in history
        assert "reject" in browser.eval("document.getElementById('current-decision').innerText")
        _check_png(browser.screenshot(shots / "4-decided.png"))
    for name in ("1-ledger", "2-filtered", "3-gate", "4-decided"):
        assert (shots / f"{name}.png").stat().st_size > 0
