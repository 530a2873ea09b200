"""Fixtures of the browser tests: the API fixtures, Debian's Chromium driven by Playwright
(``executable_path``; no browser download), and a folder for screenshots kept as test
artifacts outside the working tree (``$AXBGATE_BROWSER_ARTIFACTS/<test>/``, by default
``<temp dir>/axbgate-browser-artifacts/<test>/``)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from tests.api_fixtures import api_settings, app, auth, client, db_session, seeded, token  # noqa: F401

ARTIFACTS = Path(os.environ.get("AXBGATE_BROWSER_ARTIFACTS")
                 or Path(tempfile.gettempdir()) / "axbgate-browser-artifacts")


@pytest.fixture(scope="session")
def chromium():
    """One headless Debian Chromium for the session."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():
        pytest.fail("Debian chromium is not installed (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    """A fresh page (1400 x 1000 CSS px) whose console errors fail the test at teardown."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(f"{msg.text} at {msg.location.get('url')}")
            if msg.type == "error" else None)
    page.set_default_timeout(20_000)
    yield page
    context.close()
    # Deliberate 401s of the decision form are logged by Chromium as failed resources.
    real = [e for e in errors if "401" not in e]
    assert not real, f"JavaScript errors on the page: {real}"


@pytest.fixture
def shots(request) -> Path:
    """Screenshot folder of this test (kept after the run as a test artifact)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder = ARTIFACTS / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def check_png(path: Path) -> tuple[int, int]:
    """Assert ``path`` is a real, non-trivial PNG; return its (width, height) in pixels."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100 and len(data) > 5000, (path, width, height, len(data))
    return width, height
