"""Package boundaries: public API and no imports of orchestrator or trainer."""

from __future__ import annotations

import subprocess
import sys


def test_public_api():
    import health

    for name in ("run_health_gate", "HealthReport", "load_criteria", "select_criteria",
                 "build_preamble", "judge", "CheckOutcome"):
        assert name in health.__all__ and hasattr(health, name)
    from health.cli import main

    assert callable(main)


def test_health_never_imports_orchestrator_or_trainer():
    code = ("import sys, health, health.gate, health.rank, health.cli, health.nvml, "
            "health.load, health.collectives; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('orchestrator', 'trainer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
