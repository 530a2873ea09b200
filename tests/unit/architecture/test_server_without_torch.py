"""The server side (API, web ledger, CLI, runtime, use cases, store) runs without torch:
``pip install axbgate`` gives the service, ``axbgate[trainer]`` adds the trainer's stack.

Each check runs in a fresh interpreter in which ``import torch`` fails, as on a server
where torch is not installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_BLOCK_TORCH = textwrap.dedent("""
    import importlib.abc, sys
    class _NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError("No module named 'torch' (blocked by the test)")
            return None
    sys.meta_path.insert(0, _NoTorch())
""")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCK_TORCH + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_server_modules_import_without_torch():
    proc = _run("""
        import orchestrator.app.api.main, orchestrator.app.cli, orchestrator.runtime
        import orchestrator.usecases.gates, orchestrator.usecases.dispatch
        import orchestrator.usecases.progress, orchestrator.usecases.imports
        import orchestrator.executors.local, orchestrator.executors.slurm
        import trainer, health.criteria, health.preamble
        import sys
        assert "torch" not in sys.modules
        print("ok")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_cli_judges_and_validates_recipes_without_torch(tmp_path):
    proc = _run(f"""
        import os, sys
        os.environ["AXBGATE_DATA_DIR"] = {str(tmp_path)!r}
        from orchestrator.app.cli import main
        code = main(["verdict", "--policy", "drift", "--a", "0.4284051351", "--x", "0.4148231971",
                     "--b", "0.4264598510", "--json"])
        assert code == 0, code
        code = main(["gate", "--recipe", "tiny", "--no-wait", "--no-health", "--json",
                     "--candidate-override", "model.packed_qkv=true"])
        assert code == 0, code
        assert "torch" not in sys.modules
    """)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert '"verdict": "accept"' in proc.stdout
    assert '"status": "queued"' in proc.stdout
