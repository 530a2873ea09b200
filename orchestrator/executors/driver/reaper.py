"""A per-task reaper: runs one command and kills whatever it leaves behind.

Used under Slurm, where a run's ``srun`` step is only as contained as the cluster's
``ProctrackType`` makes it (``proctrack/linuxproc`` loses a ``setsid`` grandchild once its
parent exits): every task of a run's step starts as
``python reaper.py -- ARGV...``; the reaper contains ARGV like the driver contains its own
steps (:class:`~orchestrator.executors.driver.contain.StepContainer`: a cgroup v2 where
writable, else it is the subreaper), forwards SIGTERM/SIGINT/SIGUSR2 to it, and when ARGV
exits kills and lists what is left, as one ``# axbgate-reaper {json}`` line on stderr (in
the run log), then exits with ARGV's status. It runs as a script with the standard
library only (the candidate's tree, not this project, is on ``PYTHONPATH``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

MARKER = "# axbgate-reaper "
"""Prefix of the reaper's line in the run log."""


def _container_class():
    spec = importlib.util.spec_from_file_location("_axbgate_contain", Path(__file__).with_name("contain.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.StepContainer


def main(argv: list[str]) -> int:
    """Run ``argv`` contained; return its exit status (128 + signal when killed)."""
    container = _container_class()()
    with container.spawning():
        child = subprocess.Popen(argv, start_new_session=True)

    def forward(signum, _frame):
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
        signal.signal(sig, forward)
    code = child.wait()
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    leftovers = container.reap()
    if leftovers:
        print(MARKER + json.dumps({"containment": container.kind, "leftovers": leftovers}),
              file=sys.stderr, flush=True)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    sys.exit(main(args))
