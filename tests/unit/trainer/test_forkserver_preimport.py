"""The fork server's pre-imports must leave forks usable for CUDA (trainer/forkserver.py).

On an H200 (2026-12-01) a pre-import took a CUDA-runtime device count, which marks every
later fork "bad": each rank then died with "Cannot re-initialize CUDA in forked
subprocess". These tests run the real pre-import in a fresh interpreter.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_PROBE = r"""
import json, os, sys
from trainer import forkserver
before = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
forkserver._preimport()
import torch
print(json.dumps({
    "poisoned": forkserver.fork_is_poisoned(),
    "cuda_initialized": torch.cuda.is_initialized(),
    "env_restored": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == before,
    "modules": [m for m in forkserver._PREIMPORTS if m in sys.modules],
}))
"""


def _probe(env_extra: dict[str, str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_preimport_loads_every_module_and_leaves_forks_usable():
    result = _probe({})
    assert result == {"poisoned": False, "cuda_initialized": False, "env_restored": True,
                      "modules": list(__import__("trainer.forkserver").forkserver._PREIMPORTS)}


def test_preimport_restores_a_users_own_nvml_check_setting():
    result = _probe({"PYTORCH_NVML_BASED_CUDA_CHECK": "0"})
    assert result["env_restored"] is True
    assert result["poisoned"] is False
