"""The gate driver: runs once per allocation, on the allocation.

preamble -> health gate -> every run of the pattern (A, X, B, ...) as a job step
(``srun`` under Slurm, ``torchrun`` locally) -> optional auto-extend while the verdict is
``inconclusive``. It reads ``plan.json`` and writes everything else into the gate folder
(see :mod:`orchestrator.executors.plan`). It imports ``health`` and the pure parts of the
orchestrator (records, measure, verdict) and starts the trainer as a subprocess; it
never touches the database or the API.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from orchestrator.executors.plan import GatePlan, read_json, run_file_stem, write_json_atomic

__all__ = ["ACTIVE_PGID_FILE", "reap_active_step", "run_gate"]

logger = logging.getLogger(__name__)

_KILL_GRACE_S = 10.0
_POLL_S = 0.25
_OOM_RE = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


ACTIVE_PGID_FILE = "active-step.pgid"
"""File in the gate folder naming the process group of the step that is running."""


def _kill_group(pgid: int) -> None:
    """SIGKILL a process group if any member is left (no error if it is gone)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap_active_step(gate_dir: Path) -> bool:
    """Kill the process group of a gate's running step after its driver died.

    Args:
        gate_dir: The gate folder.

    Returns:
        True if a process group was signalled.
    """
    path = Path(gate_dir) / ACTIVE_PGID_FILE
    try:
        pgid = int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
        killed = True
    except (ProcessLookupError, PermissionError):
        killed = False
    path.unlink(missing_ok=True)
    return killed


class _LogPump(threading.Thread):
    """Copies a step's output pipe into its log, up to ``max_bytes`` (then drains)."""

    def __init__(self, pipe, log, max_bytes: int) -> None:
        super().__init__(daemon=True, name="axbgate-log-pump")
        self.pipe, self.log, self.max_bytes = pipe, log, max_bytes
        self.overflowed = threading.Event()

    def run(self) -> None:
        written = 0
        while chunk := self.pipe.read1(1 << 16):
            if written + len(chunk) > self.max_bytes:
                if not self.overflowed.is_set():
                    self.log.write(chunk[: max(0, self.max_bytes - written)])
                    self.log.write(b"\n# axbgate: output truncated at max_log_bytes\n")
                    self.overflowed.set()
                continue  # keep draining so the step never blocks on a full pipe
            self.log.write(chunk)
            written += len(chunk)
        self.pipe.close()


class Cancelled(Exception):
    """The allocation was asked to stop (scancel, Ctrl-C, time-limit warning)."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def _sha256(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest(), path.stat().st_size


class _Driver:
    def __init__(self, plan: GatePlan) -> None:
        self.plan = plan
        self.gate_dir = Path(plan.gate_dir)
        self.runs_dir = self.gate_dir / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.cache_dir = self.gate_dir / "compile-cache"
        self._active_pgid_file = self.gate_dir / ACTIVE_PGID_FILE
        self.under_slurm = plan.executor == "slurm" and "SLURM_JOB_ID" in os.environ
        self.job_id = os.environ.get("SLURM_JOB_ID") or f"local-{os.getpid()}"
        self.hostnames = self._hostnames()
        self.roles = list(plan.roles)
        self.child: subprocess.Popen | None = None
        self.cancel_reason: str | None = None
        self.time_limit_hit = False
        self.port_index = 0
        self.status: dict[str, Any] = {
            "state": "running",
            "started_at": _now(),
            "scheduler_job_id": self.job_id,
            "executor": plan.executor,
            "hostnames": self.hostnames,
            "driver_host": socket.gethostname(),
            "driver_pid": os.getpid(),
            "roles": self.roles,
            "timeline": [],
        }

    # ---- plumbing -------------------------------------------------------------------
    def _hostnames(self) -> list[str]:
        nodelist = os.environ.get("SLURM_JOB_NODELIST")
        if self.under_slurm and nodelist:
            out = subprocess.run(
                ["scontrol", "show", "hostnames", nodelist],
                capture_output=True, text=True, timeout=30, check=False,
            )
            names = out.stdout.split()
            if names:
                return names
        return [socket.gethostname()]

    def _save_status(self, **update: Any) -> None:
        self.status.update(update)
        write_json_atomic(self.gate_dir / "status.json", self.status)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGUSR2:
            # submitit asks Slurm for SIGUSR2 90 s before the time limit.
            self.time_limit_hit = True
            self.cancel_reason = "allocation reached its time limit (SIGUSR2 warning from Slurm)"
        else:
            self.cancel_reason = f"allocation received {signal.Signals(signum).name}"
        self._kill_child()

    def _kill_child(self) -> None:
        child = self.child
        if child is None or child.poll() is not None:
            return
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + _KILL_GRACE_S
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _preamble(self) -> dict[str, str]:
        """Launch environment of the next step: fresh MASTER_PORT every call."""
        from health.network import gather_address_facts
        from health.preamble import build_preamble, derive_master_port

        self.port_index += 1
        facts = gather_address_facts(self.hostnames, node_rank=0)
        pre = build_preamble(
            facts,
            master_port=derive_master_port(self.job_id, self.port_index),
            base_env=os.environ,
        )
        self.status.setdefault("preamble", []).append(
            {"index": self.port_index, "interface": pre.interface, "master_addr": pre.master_addr,
             "master_port": pre.master_port, "reason": pre.reason}
        )
        return dict(pre.env)

    def _base_env(self, side_env: dict[str, str], source_dir: Path | None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self._preamble())
        env.update(MULTICAST_OFF)
        # One compile cache per allocation, so X and B do not pay A's compile again.
        env["TORCHINDUCTOR_CACHE_DIR"] = str(self.cache_dir / "inductor")
        env["TRITON_CACHE_DIR"] = str(self.cache_dir / "triton")
        env["PYTHONUNBUFFERED"] = "1"
        root = str(source_dir) if source_dir is not None else self.plan.project_root
        env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.update(side_env)
        env.update({k: v for k, v in MULTICAST_OFF.items() if k not in side_env})
        return env

    def _launch(self, argv: list[str], env: dict[str, str], cwd: Path, log_path: Path,
                deadline_s: float) -> tuple[int | None, str | None, float]:
        """Run one step with a deadline. Returns (exit code, error, wall seconds)."""
        if self.cancel_reason:
            raise Cancelled(self.cancel_reason)
        start = time.monotonic()
        with open(log_path, "ab", buffering=0) as log:
            log.write(f"# axbgate step: {argv!r}\n".encode())
            self.child = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
            # If this driver is killed outright (SIGKILL from its controller), the
            # executor reaps the step's process group from this file.
            self._active_pgid_file.write_text(f"{self.child.pid}\n")
            # The driver copies the step's output into the log, so it can stop at
            # max_log_bytes exactly instead of finding a flooded disk afterwards.
            pump = _LogPump(self.child.stdout, log, self.plan.max_log_bytes)
            pump.start()
            error = None
            while self.child.poll() is None:
                if pump.overflowed.is_set():
                    error = (f"wrote more than {self.plan.max_log_bytes} bytes of output and "
                             "was killed (max_log_bytes)")
                    self._kill_child()
                    break
                if time.monotonic() - start > deadline_s:
                    error = f"exceeded its deadline of {deadline_s:g} s and was killed"
                    self._kill_child()
                    break
                if self.cancel_reason:
                    self._kill_child()
                    break
                time.sleep(_POLL_S)
            code = self.child.wait()
            # Whatever the step left behind in its process group (a forked helper, a
            # torchrun worker) dies with it, so nothing outlives the run it belongs to.
            _kill_group(self.child.pid)
            pump.join(timeout=30)
            if error is None and pump.overflowed.is_set():
                error = (f"wrote more than {self.plan.max_log_bytes} bytes of output and "
                         "was killed (max_log_bytes)")
            self.child = None
            self._active_pgid_file.unlink(missing_ok=True)
        wall = time.monotonic() - start
        if self.cancel_reason:
            raise Cancelled(self.cancel_reason)
        if error is None and code != 0:
            if code < 0:
                error = f"killed by signal {signal.Signals(-code).name}"
            else:
                error = f"exited with status {code}"
            tail = log_path.read_bytes()[-20000:].decode("utf-8", "replace")
            if _OOM_RE.search(tail):
                error += " (out of memory)"
        return code, error, wall

    # ---- phases -------------------------------------------------------------------
    def _source_dirs(self) -> dict[str, Path | None]:
        from orchestrator.sources import ensure_worktree

        dirs: dict[str, Path | None] = {}
        for side, spec in self.plan.sides.items():
            src = spec.get("source") or {}
            if src.get("repo") and src.get("sha"):
                dest = self.gate_dir / "src" / src["sha"][:12]
                dirs[side] = ensure_worktree(src["repo"], src["sha"], dest)
            else:
                dirs[side] = None
        return dirs

    def _step_launcher(self, nproc_local: int) -> list[str]:
        if self.under_slurm:
            return ["srun", f"--ntasks={self.plan.nodes * self.plan.ranks_per_node}",
                    f"--ntasks-per-node={self.plan.ranks_per_node}", "--kill-on-bad-exit=1",
                    "--export=ALL"]
        return []

    def _health(self, tag: str) -> str:
        spec = self.plan.health
        log_path = self.gate_dir / f"{tag}.log"
        argv = [self.plan.python, "-m", "health", "--json", "--nproc", str(self.plan.ranks_per_node),
                "--job-id", f"{self.job_id}-{tag}"]
        if spec.get("criteria"):
            argv += ["--criteria", spec["criteria"]]
        if self.under_slurm and self.plan.nodes > 1:
            # One health process per node; each spawns its local ranks.
            argv = ["srun", f"--ntasks={self.plan.nodes}", "--ntasks-per-node=1",
                    "--kill-on-bad-exit=1", "--export=ALL", *argv, "--nodes", ",".join(self.hostnames)]
        env = self._base_env({}, None)
        code, error, wall = self._launch(argv, env, self.gate_dir, log_path,
                                          float(spec.get("timeout_s", 300)))
        from orchestrator.records import parse

        verdict = "failed"
        reason = error
        try:
            parsed = parse(log_path.read_text(errors="replace"))
            if parsed.allocation:
                verdict = parsed.allocation["health_verdict"]
            bad = [f"{h.check}={h.status}" for h in parsed.health if h.status in ("FAIL", "HANG")]
            if verdict == "failed" and not reason:
                reason = "health gate failed: " + (", ".join(bad) or "no allocation verdict")
            elif verdict == "failed":
                reason = f"health gate {error}" + (f": {', '.join(bad)}" if bad else "")
        except Exception as exc:  # malformed health output is a failed health gate
            reason = f"health output unreadable: {exc}"
        write_json_atomic(self.gate_dir / f"{tag}.json",
                          {"exit_code": code, "verdict": verdict, "reason": reason, "wall_s": wall})
        self.status["timeline"].append({"phase": tag, "wall_s": wall})
        if verdict == "failed":
            raise _GateFailed(reason or "health gate failed")
        return verdict

    def _run_argv(self, order: int, role: str, side: str, source_dir: Path | None) -> list[str]:
        plan = self.plan
        if plan.workload.get("recipe"):
            overrides = [
                *plan.sides[side].get("recipe_overrides", []),
                f"measure.warmup_steps={plan.num_warmup_steps}",
                f"measure.measured_steps={plan.num_measured_steps}",
            ]
            trainer = ["-m", "trainer", "train", "--recipe", plan.workload["recipe"], *overrides]
            if self.under_slurm:
                return self._step_launcher(plan.ranks_per_node) + [plan.python, *trainer]
            return [plan.python, "-m", "torch.distributed.run", "--nnodes=1",
                    f"--nproc_per_node={plan.ranks_per_node}", "--master_addr", "{MASTER_ADDR}",
                    "--master_port", "{MASTER_PORT}", *trainer]
        values = {
            "warmup_steps": str(plan.num_warmup_steps),
            "measured_steps": str(plan.num_measured_steps),
            "source_dir": str(source_dir or plan.project_root),
            "role": role,
            "run_index": str(order),
            "nproc": str(plan.nodes * plan.ranks_per_node),
            "out_dir": str(self.runs_dir),
        }
        return [_substitute(arg, values) for arg in plan.workload["command"]]

    def _run(self, order: int, role: str, sources: dict[str, Path | None]) -> float | None:
        """Run one pattern entry. Returns its run median in seconds, or raises _GateFailed."""
        from orchestrator.measure import measure_run
        from orchestrator.records import parse

        plan = self.plan
        side = "control" if role in ("A", "B") else "candidate"
        source_dir = sources.get(side)
        stem = run_file_stem(order, role)
        log_path = self.runs_dir / f"{stem}.log"
        log_path.unlink(missing_ok=True)
        if plan.health.get("between_runs") and order > 0 and plan.health.get("enabled", True):
            self._health(f"health-{order:02d}")
        env = self._base_env(plan.sides[side].get("env", {}), source_dir)
        argv = [a.replace("{MASTER_ADDR}", env["MASTER_ADDR"]).replace("{MASTER_PORT}", env["MASTER_PORT"])
                for a in self._run_argv(order, role, side, source_dir)]
        cwd = source_dir or self.gate_dir
        started = _now()
        write_json_atomic(self.runs_dir / f"{stem}.started.json",
                          {"order": order, "role": role, "started_at": started, "command": argv})
        code, error, wall = self._launch(argv, env, cwd, log_path, plan.run_timeout_s)
        median = None
        measured_s = None
        try:
            parsed = parse(log_path.read_text(errors="replace"))
            outcome = measure_run(parsed, expected_warmup_steps=plan.num_warmup_steps,
                                  expected_measured_steps=plan.num_measured_steps)
            if error is None and outcome.status == "failed":
                error = outcome.error
            if outcome.status == "succeeded":
                median = outcome.fields["median_step_s"]
                times = outcome.fields["slowest_rank_step_s"]
                measured_s = sum(times[plan.num_warmup_steps:plan.num_warmup_steps + plan.num_measured_steps])
        except Exception as exc:  # RecordError: a malformed record fails the run
            error = error or f"malformed record output: {exc}"
        sha, size = _sha256(log_path)
        write_json_atomic(self.runs_dir / f"{stem}.json", {
            "order": order, "role": role, "side": side, "exit_code": code,
            "status": "failed" if error else "succeeded", "error": error,
            "started_at": started, "ended_at": _now(), "wall_s": wall, "measured_s": measured_s,
            "command": argv, "env_overrides": plan.sides[side].get("env", {}),
            "source_dir": str(source_dir) if source_dir else None,
            "source_sha": (plan.sides[side].get("source") or {}).get("sha"),
            "log_sha256": sha, "log_size_bytes": size,
        })
        self.status["timeline"].append(
            {"phase": "run", "order": order, "role": role, "wall_s": wall, "measured_s": measured_s}
        )
        self._save_status()
        if error:
            raise _GateFailed(f"run {order} ({role}) failed: {error}")
        return median

    def _inconclusive(self, medians: list[tuple[str, float]]) -> bool:
        from orchestrator.verdict import GateMeasurement, RunSummary, get_policy, judge

        params = {k: v for k, v in self.plan.policy_params.items() if not k.startswith("_")}
        measurement = GateMeasurement(
            runs=tuple(RunSummary(role=r, order=i, median_step_s=m) for i, (r, m) in enumerate(medians)),
            kind="regate" if self.plan.kind == "regate" else "candidate",
        )
        return judge(measurement, get_policy(self.plan.policy, **params)).verdict == "inconclusive"

    def run(self) -> dict[str, Any]:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
            signal.signal(sig, self._on_signal)
        self._save_status()
        try:
            sources = self._source_dirs()
            self._save_status(sources={k: str(v) if v else None for k, v in sources.items()})
            if self.plan.health.get("enabled", True):
                self._save_status(health_verdict=self._health("health"))
            medians: list[tuple[str, float]] = []
            order = 0
            extends = 0
            while order < len(self.roles):
                median = self._run(order, self.roles[order], sources)
                medians.append((self.roles[order], float(median)))
                order += 1
                if (order == len(self.roles) and extends < self.plan.max_extend
                        and self.plan.kind == "candidate" and self._inconclusive(medians)):
                    extends += 1
                    self.roles.extend(["X", "B"])
                    self._save_status(roles=self.roles, extends=extends)
            self._save_status(state="finished", ended_at=_now())
        except Cancelled as exc:
            state = "failed" if self.time_limit_hit else "cancelled"
            self._save_status(state=state, reason=str(exc), ended_at=_now())
        except _GateFailed as exc:
            self._save_status(state="failed", reason=str(exc), ended_at=_now())
        except Exception as exc:  # the driver itself broke: record it, never hang
            (self.gate_dir / "driver-error.log").write_text(traceback.format_exc())
            self._save_status(state="failed", reason=f"driver error: {exc!r}", ended_at=_now())
        return self.status


class _GateFailed(Exception):
    pass


def _substitute(arg: str, values: dict[str, str]) -> str:
    return re.sub(r"\{([a-z_]+)\}", lambda m: values.get(m.group(1), m.group(0)), arg)


def run_gate(plan_path: str) -> dict[str, Any]:
    """Run a whole gate on this allocation (the submitit job function).

    Args:
        plan_path: Path of ``plan.json`` in the gate folder.

    Returns:
        The final ``status.json`` content (``state`` is ``finished``, ``failed`` or
        ``cancelled``, with ``reason``).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    plan = GatePlan.load(Path(plan_path))
    status = read_json(Path(plan.gate_dir) / "status.json")
    if status and status.get("state") in ("finished", "failed", "cancelled"):
        return status  # a re-queued job must not run the gate twice
    return _Driver(plan).run()


if __name__ == "__main__":
    run_gate(sys.argv[1])
