"""A minimal Chrome DevTools Protocol driver for Debian's headless ``chromium``."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
]


class Browser:
    """One headless Chromium with one page, driven over CDP."""

    def __init__(self, executable: str = "/usr/bin/chromium") -> None:
        from tests.live_server import free_port

        self._profile = tempfile.mkdtemp(prefix="axbgate-chromium-")
        port = free_port()
        self._proc = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}",
             f"--remote-debugging-port={port}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        targets = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    targets = [t for t in json.load(r) if t.get("type") == "page"]
                if targets:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if not targets:
            self.close()
            raise RuntimeError("chromium did not expose a page over CDP")
        self._ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=30)
        self._ids = itertools.count(1)
        self.events: list[dict] = []
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method: str, **params) -> dict:
        """Send one command and return its result (events seen meanwhile are kept)."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout_s: float = 20.0) -> dict:
        """Wait for an event named ``method`` (including ones already received)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            self._ws.settimeout(max(deadline - time.monotonic(), 0.1))
            try:
                self.events.append(json.loads(self._ws.recv()))
            except websocket.WebSocketTimeoutException:
                break
        raise TimeoutError(f"no {method} within {timeout_s} s")

    def navigate(self, url: str) -> None:
        """Open ``url`` and wait for its load event."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str):
        """Evaluate JavaScript in the page and return its JSON value."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 20.0):
        """Poll a JavaScript expression until it is truthy; return its value."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                value = self.eval(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression!r} stayed false for {timeout_s} s")

    def screenshot(self, path: Path) -> Path:
        """Save a full-page PNG screenshot."""
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """Stop Chromium and remove its profile."""
        try:
            self._ws.close()
        except Exception:  # noqa: BLE001 - best effort during teardown
            pass
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        shutil.rmtree(self._profile, ignore_errors=True)
