"""Where one run's wall time went, from the driver's launch/exit times and the run's own
``AXBGATE_TIMELINE`` record (Unix seconds of its phases; docs/record-contract.md).

The per-run fixed cost of issue 14 is ``startup_s + teardown_s``: process launch to the
first step's start, plus the last step's end to the process exit; warmup and measured
steps are reported apart.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_phases"]

_SPANS = (  # (name, from key, to key) of the run's timeline; driver times are "launch"/"exit"
    ("launcher_s", "launch", "process_start_unix"),
    ("imports_s", "imports_start_unix", "imports_done_unix"),
    ("process_group_s", "main_start_unix", "process_group_ready_unix"),
    ("model_build_s", "process_group_ready_unix", "model_built_unix"),
    ("first_step_s", "first_step_start_unix", "first_step_end_unix"),
    ("startup_s", "launch", "first_step_start_unix"),
    ("teardown_s", "last_step_end_unix", "exit"),
)


def run_phases(fields: dict[str, Any], launch_unix: float, exit_unix: float) -> dict[str, float]:
    """Seconds per phase of one run.

    Args:
        fields: The run's measured fields (``RunOutcome.fields``): the slowest-rank series,
            warmup/measured counts and ``result_extra.timeline``.
        launch_unix: When the driver started the run's process, Unix seconds.
        exit_unix: When that process had exited, Unix seconds.

    Returns:
        ``warmup_s`` and ``measured_s`` (sums of slowest-rank step seconds), and, where
        the run printed its timeline, ``launcher_s``, ``imports_s``, ``process_group_s``,
        ``model_build_s``, ``first_step_s``, ``startup_s``, ``teardown_s`` and
        ``fixed_s`` = startup + teardown. Phases whose times are missing are left out.
    """
    out: dict[str, float] = {}
    times = fields.get("slowest_rank_step_s") or []
    warmup, measured = fields.get("num_warmup_steps"), fields.get("num_measured_steps")
    if times and warmup is not None and measured is not None:
        out["warmup_s"] = float(sum(times[:warmup]))
        out["measured_s"] = float(sum(times[warmup:warmup + measured]))
    stamps = dict((fields.get("result_extra") or {}).get("timeline") or {})
    stamps.update(launch=launch_unix, exit=exit_unix)
    for name, start, end in _SPANS:
        if isinstance(stamps.get(start), (int, float)) and isinstance(stamps.get(end), (int, float)):
            out[name] = max(0.0, float(stamps[end]) - float(stamps[start]))
    if "startup_s" in out and "teardown_s" in out:
        out["fixed_s"] = out["startup_s"] + out["teardown_s"]
    return out
