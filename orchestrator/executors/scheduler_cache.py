"""One scheduler query per poll interval per machine, whoever polls.

Every process that follows Slurm jobs (each ``axbgate gate`` CLI, each server poller)
asks this cache instead of Slurm. The cache is a JSON file under a file lock
(``fcntl.flock``), one per user and cluster (``SLURM_CONF``): the first process due to
query asks Slurm about EVERY job any process wanted in the last two minutes, in one
``squeue`` call (plus one ``sacct`` call for jobs that ``squeue`` no longer knows or that
ended, for their exit code and canceller); the others read its answer. While every job
followed is pending the interval doubles up to ``max_interval_s`` (backoff); a job seen
for the first time is asked about at once, but never sooner than ``min_interval_s`` after
the last query. So N processes following M jobs cost at most 2 calls per
``min_interval_s`` (measured: tests/integration/test_trays_scale.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.executors.slurm_states import (
    END_STATES,
    SlurmJobInfo,
    base_state,
    parse_sacct,
    parse_squeue_states,
)

__all__ = ["SchedulerCache", "query_slurm"]

logger = logging.getLogger(__name__)

_WANTED_TTL_S = 120.0
"""A job nobody asked about for this long is no longer queried."""
_KEEP_ENDED_S = 3600.0


def _run(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("%s failed: %s", argv[0], exc)
        return None
    if proc.returncode != 0 and not proc.stdout:
        return None
    return proc.stdout


def query_slurm(job_ids: Sequence[str]) -> tuple[dict[str, SlurmJobInfo], int]:
    """Ask Slurm about ``job_ids``: one ``squeue``, then one ``sacct`` for the jobs that
    ended or that ``squeue`` no longer lists.

    Returns:
        ({job_id: info} for the jobs Slurm knows, number of scheduler commands run).
    """
    ids = ",".join(job_ids)
    out = parse_squeue_states(_run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%r", "-j", ids]) or "")
    calls = 1
    rest = [j for j in job_ids if j not in out or base_state(out[j].state) in END_STATES]
    if rest:
        text = _run(["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,State,ExitCode,Reason", "-j", ",".join(rest)])
        calls += 1
        for job_id, info in parse_sacct(text or "").items():
            # sacct can lag squeue (slurmdbd records asynchronously): never go back from an end
            if job_id in rest and (job_id not in out or base_state(info.state) in END_STATES):
                out[job_id] = info
    return out, calls


def default_cache_path() -> Path:
    """``$TMPDIR/axbgate-scheduler-<uid>/<hash of SLURM_CONF>.json`` (one per cluster)."""
    conf = os.environ.get("SLURM_CONF", "default")
    key = hashlib.sha256(conf.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"axbgate-scheduler-{os.getuid()}" / f"{key}.json"


class SchedulerCache:
    """A machine-wide, file-locked cache of Slurm job states.

    Args:
        path: Cache file (its lock is ``<path>.lock``).
        query: ``query(job_ids) -> (infos, calls)``; :func:`query_slurm` by default.
        min_interval_s: Shortest time between two queries, seconds.
        max_interval_s: Longest backoff while every followed job is pending, seconds.
    """

    def __init__(self, path: Path | None = None, *,
                 query: Callable[[Sequence[str]], tuple[dict[str, SlurmJobInfo], int]] = query_slurm,
                 min_interval_s: float = 2.0, max_interval_s: float = 16.0) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.query, self.min_interval_s, self.max_interval_s = query, min_interval_s, max_interval_s

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            if isinstance(data, dict) and isinstance(data.get("jobs"), dict):
                return data
        except (OSError, ValueError):
            pass
        return {"jobs": {}, "wanted": {}, "last_t": 0.0, "next_t": 0.0, "interval_s": 0.0, "calls": 0}

    def states(self, job_ids: Sequence[str], now: float | None = None) -> dict[str, SlurmJobInfo]:
        """The latest known state of every job in ``job_ids`` (querying Slurm if due).

        Returns:
            ``{job_id: info}``; a job Slurm never reported is absent.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            now = time.time() if now is None else now
            data = self._load()
            jobs, wanted = data["jobs"], data["wanted"]
            for job_id in [j for j, t in wanted.items() if now - t > _WANTED_TTL_S]:
                del wanted[job_id]
            for job_id in job_ids:
                if job_id not in wanted:  # asked again after a while: never trust an old answer
                    jobs.pop(job_id, None)  # (a cluster set up afresh reuses job ids)
                wanted[job_id] = now
            for job_id in [j for j, v in jobs.items() if now - v.get("t", 0) > _KEEP_ENDED_S]:
                del jobs[job_id]
            open_ids = [j for j in wanted if base_state(jobs.get(j, {}).get("state", "")) not in END_STATES]
            new = any(j not in jobs for j in job_ids)
            since = now - data["last_t"]
            if open_ids and (now >= data["next_t"] or (new and since >= self.min_interval_s)):
                self._refresh(data, open_ids, now)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.path)
        return {j: SlurmJobInfo(jobs[j]["state"], jobs[j].get("reason"), jobs[j].get("exit_code"))
                for j in job_ids if j in jobs}

    def _refresh(self, data: dict, open_ids: list[str], now: float) -> None:
        infos, calls = self.query(open_ids)
        data["calls"] = data.get("calls", 0) + calls
        for job_id, info in infos.items():
            data["jobs"][job_id] = {"state": info.state, "reason": info.reason,
                                    "exit_code": info.exit_code, "t": now}
        pending = all(base_state(data["jobs"].get(j, {}).get("state", "PENDING")) == "PENDING"
                      for j in open_ids)
        interval = (min(self.max_interval_s, max(self.min_interval_s, 2 * data.get("interval_s", 0.0)))
                    if pending else self.min_interval_s)
        data.update(last_t=now, next_t=now + interval, interval_s=interval)
