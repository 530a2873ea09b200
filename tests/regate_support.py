"""Helpers of the re-gate tests: a tracked harness repository, new commits, a webhook
receiver on 127.0.0.1, and a loop that drives gates through the dispatcher and poller."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.schemas.repos import RepoCreate
from orchestrator.usecases import regate

HARNESS_COMMAND = [sys.executable, "{source_dir}/harness.py", "{warmup_steps}", "{measured_steps}"]


def commit_step_ms(repo: Path, ms: float, note: str) -> str:
    """Commit a new harness speed (``step_ms.txt``) and return the new SHA."""
    (repo / "step_ms.txt").write_text(f"{ms}\n")
    (repo / "CHANGES").write_text(f"{note}\n")
    for args in (["add", "-A"], ["commit", "-q", "-m", note]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def add_tracked_repo(engine, repo: Path, *, executor: str = "local", notify: list[str] | None = None,
                     bisect: bool = False, **extra: Any) -> int:
    """Track ``repo``'s main branch with the fixture harness (warmup 2, measured 5, no health)."""
    body = {
        "url": str(repo), "branch": "main", "workload": {"command": HARNESS_COMMAND},
        "executor": executor, "notify": notify or [], "bisect": bisect,
        "options": {"warmup_steps": 2, "measured_steps": 5, "health": {"enabled": False},
                    "run_timeout_s": 60},
        **extra,
    }
    with Session(engine) as session:
        # The receivers of these tests listen on 127.0.0.1: allowed explicitly.
        out = regate.add_repository(session=session, repo_in=RepoCreate.model_validate(body),
                                    allow_private_webhooks=True)
        session.commit()
    return out.id


def drive_until(engine, settings, predicate: Callable[[], Any], *, timeout_s: float = 120.0,
                step: Callable[[], None] | None = None) -> Any:
    """Dispatch and poll gates (and run ``step``) until ``predicate()`` is truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached in {timeout_s} s")
        dispatch_pass(engine, settings)
        poll_pass(engine, settings)
        if step is not None:
            step()
        time.sleep(0.3)


class WebhookReceiver:
    """A small HTTP server collecting JSON POSTs; the first ``fail_first`` answer 500."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.num_requests = 0
        self.fail_first = fail_first
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                receiver.num_requests += 1
                if receiver.num_requests <= receiver.fail_first:
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.bodies.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    @contextlib.contextmanager
    def running(self) -> Iterator[WebhookReceiver]:
        """Serve in a thread for the block."""
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
