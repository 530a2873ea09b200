"""The allocation driver (runs on the allocation): gate phases in ``gate.py``, process
handling (steps, log pump, deadlines, process groups) in ``process.py``."""

from orchestrator.executors.driver.gate import MULTICAST_OFF, run_gate
from orchestrator.executors.driver.process import reap_active_step

__all__ = ["MULTICAST_OFF", "reap_active_step", "run_gate"]
