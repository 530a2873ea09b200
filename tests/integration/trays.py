"""Helpers of the two-node ``trays`` cluster tests (scripts/slurm_trays.sh)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

TRAYS_CONF = "/etc/slurm-trays/slurm.conf"
NODES = ("tray1", "tray2")
NETNS = ("axbtray1", "axbtray2")
IFNAME = "trayeth0"
ADDRS = ("10.213.15.11", "10.213.15.12")


def trays_up() -> str | None:
    """None when the trays cluster answers, else why not."""
    if not Path(TRAYS_CONF).exists():
        return f"{TRAYS_CONF} missing: run scripts/slurm_trays.sh as root"
    env = {**os.environ, "SLURM_CONF": TRAYS_CONF}
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                         env=env, check=False, timeout=30)
    states = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
    if not all(states.get(n) in ("idle", "mixed", "allocated", "completing") for n in NODES):
        return f"trays nodes not usable: {states or out.stderr.strip()}"
    return None


def require_trays(monkeypatch) -> None:
    """Select the trays cluster for this test (SLURM_CONF), or skip/fail when it is down."""
    reason = trays_up()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"trays cluster not usable in CI: {reason}")
        pytest.skip(reason)
    monkeypatch.setenv("SLURM_CONF", TRAYS_CONF)


def procs_in_netns(ns: str, needle: str) -> list[int]:
    """Pids whose network namespace is ``/run/netns/<ns>`` and whose argv contains ``needle``."""
    target = os.stat(f"/run/netns/{ns}").st_ino
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino != target:
                continue
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in argv:
            found.append(int(entry.name))
    return found


def wait_until(what: str, fn, timeout_s: float, every: float = 0.5):
    """Poll ``fn`` until truthy; fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; last: {last!r}")
