"""The gate driver: runs once per allocation, on the allocation.

preamble -> health gate -> every run of the pattern (A, X, B, ...) as a job step
(``srun`` under Slurm, ``torchrun`` locally) -> optional extension of the pattern while
the verdict is ``inconclusive``. It reads ``plan.json`` and writes everything else into
the gate folder (:class:`~orchestrator.executors.plan.GatePaths`): each run's output is
parsed ONCE, here, while it streams (step records go to ``NN-R.steps.jsonl`` as they are
printed) and the run's measured outcome is written to ``NN-R.json``; the service only
stores what it finds there. It imports ``health`` and the pure parts of the orchestrator
(records, measure, verdict) and starts the trainer as a subprocess; it never touches the
database or the API.

Evidence a run cannot touch: a run's numbers come only from the output the driver
captured and hashed (``runs/``, the driver's folder). A run writes into its own folder
(``out/NN-R``, its ``{out_dir}``); a result file it writes there is checked against its
log and never stored (:func:`check_own_results`); the results the driver wrote are
checked again after every later run (:meth:`_Driver._check_evidence`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from orchestrator.executors.driver.evidence import DiskReserve, ResultSeals, check_own_results
from orchestrator.executors.driver.argv import run_argv
from orchestrator.executors.driver.extend import more_roles
from orchestrator.executors.driver.forkserver import ForkServer, fork_server_usable
from orchestrator.executors.driver.health_step import health_argv, read_health_log
from orchestrator.executors.driver.launch import (
    job_hostnames,
    launch_preamble,
    port_collision,
    reaper_leftovers,
)
from orchestrator.executors.driver.phases import run_phases
from orchestrator.executors.driver.process import (
    Cancelled,
    lease_folders,
    prepare_run_as,
    run_step,
    seal_folders,
)
from orchestrator.executors.driver.stream import StepStream, measure_stream, run_log_parser
from orchestrator.executors.driver.window import (
    calibration_plan,
    choose_after_calibration,
    recipe_overrides,
)
from orchestrator.executors.files import hash_file
from orchestrator.executors.plan import GatePaths, GatePlan, read_json, write_json_atomic
from orchestrator.executors.runenv import MULTICAST_OFF, measure_env

__all__ = ["MULTICAST_OFF", "run_gate"]

logger = logging.getLogger(__name__)


class _GateFailed(Exception):
    pass


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


class _Driver:
    def __init__(self, plan: GatePlan) -> None:
        from orchestrator.executors.runenv import RunEnvPolicy

        self.plan = plan
        self.policy = RunEnvPolicy.from_plan(plan.run_env)
        self.paths: GatePaths = plan.paths
        self.paths.runs_dir.mkdir(parents=True, exist_ok=True)
        self.paths.runs_dir.chmod(0o700)  # logs and results: the service's only
        self.paths.out_root.mkdir(parents=True, exist_ok=True)
        self.run_as_env: dict[str, str] = {}
        self.seals = ResultSeals(self.paths.root)
        self.disk = DiskReserve(self.paths.disk_reserve)
        self.under_slurm = plan.executor == "slurm" and "SLURM_JOB_ID" in os.environ
        self.job_id = os.environ.get("SLURM_JOB_ID") or f"local-{os.getpid()}"
        self.hostnames = job_hostnames(self.under_slurm)
        self.roles = list(plan.roles)
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
    def _write_result(self, path: Path, obj: dict[str, Any]) -> None:
        """Write one of the driver's result files and seal it (checked after every run)."""
        write_json_atomic(path, obj)
        self.seals.seal(path)

    def _check_evidence(self, after: str) -> None:
        """Fail the gate if a result file the driver wrote changed since (a run wrote it)."""
        changed = self.seals.changed(after)
        if changed:
            raise _GateFailed(changed)

    def _save_status(self, **update: Any) -> None:
        self.status.update(update)
        write_json_atomic(self.paths.status, self.status)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGUSR2:
            # submitit asks Slurm for SIGUSR2 90 s before the time limit.
            self.time_limit_hit = True
            self.cancel_reason = "allocation reached its time limit (SIGUSR2 warning from Slurm)"
        else:
            self.cancel_reason = f"allocation received {signal.Signals(signum).name}"

    def _step(self, argv: list[str], env: dict[str, str], cwd: Path, log_path: Path,
              deadline_s: float, on_line=None, spawn=None):
        server = getattr(self, "fork_server", None)
        step = run_step(argv, env=env, cwd=cwd, log_path=log_path, deadline_s=deadline_s,
                        max_log_bytes=self.plan.max_log_bytes, pgid_file=self.paths.active_pgid,
                        cancel_reason=lambda: self.cancel_reason, on_line=on_line, spawn=spawn,
                        run_as=self.policy.run_as_user,
                        log_name=str(log_path.relative_to(self.paths.root)),
                        spawn_pid=server.pid if (spawn is not None and server is not None) else None)
        if step.log_write_error:
            self.disk.release()  # room for the results and status.json that say so
        if self.under_slurm and step.exit_code in (128 + signal.SIGUSR2, -signal.SIGUSR2):
            self._on_signal(signal.SIGUSR2, None)  # Slurm signals the steps too, maybe first
            raise Cancelled(self.cancel_reason)
        return step

    def _start_fork_server(self) -> None:
        """Start the trainer's fork server now, so torch is imported while health runs."""
        from orchestrator.executors.runenv import inherited_env

        self.fork_server = None
        if not (self.plan.fork_server and self.plan.workload.get("recipe")) or self.under_slurm:
            return
        if self.policy.run_as_user:  # forked runs would keep the driver's account
            self.status.setdefault("launch_notes", []).append(
                f"fork server off: steps run as {self.policy.run_as_user}")
            return
        # The allow-listed environment only: forked runs show the server's initial one in
        # /proc/<pid>/environ, whatever the leader sets afterwards.
        env = inherited_env(os.environ, self.policy)
        env["PYTHONPATH"] = os.pathsep.join([self.plan.project_root, env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        self.fork_server = ForkServer(self.plan.python, self.paths.fork_server_socket,
                                      self.paths.fork_server_log, env)

    def _fork_spawner(self, side: str, source_dir: Path | None, env: dict[str, str], cwd: Path):
        """A spawn callable for run_step, or None (and why) when torchrun must be used."""
        server = getattr(self, "fork_server", None)
        why = "fork server off" if server is None else fork_server_usable(
            self.plan.sides[side].get("env", {}), source_dir)
        if why is None and not server.ready(timeout_s=180.0):
            why = f"fork server did not start (see {self.paths.fork_server_log})"
        if why is not None:
            self.status.setdefault("launch_notes", []).append(why)
            return None
        args = ["--recipe", self.plan.workload["recipe"], *recipe_overrides(self.plan, side)]
        return lambda: server.spawn(args, env=env, cwd=cwd, nproc=self.plan.ranks_per_node)

    def _preamble(self) -> dict[str, str]:
        """Launch environment of the next step (:func:`launch_preamble`), recorded."""
        env, record = launch_preamble(self.plan.preamble, self.job_id, self.hostnames, self.port_index)
        self.port_index = record["index"]
        self.status.setdefault("preamble", []).append(record)
        return env

    def _base_env(self, side_env: dict[str, str], source_dir: Path | None, run=False,
                  compile_cache: Path | None = None, home: Path | None = None) -> dict[str, str]:
        """A step's environment (:func:`~orchestrator.executors.runenv.step_env`): never the
        whole allocation's environment; secrets resolved here; a run gets the gate's rule."""
        from orchestrator.executors.runenv import step_env

        run_as_env = dict(self.run_as_env)
        if self.run_as_env and home is not None:
            run_as_env.update(HOME=str(home), TMPDIR=str(home / "tmp"))
        try:
            return step_env(os.environ, self.policy, preamble=self._preamble(), side_env=side_env,
                            compile_cache=compile_cache or self.paths.compile_cache,
                            run_as_env=run_as_env,
                            python_root=str(source_dir or self.plan.project_root),
                            measure=measure_env(self.plan) if run else None)
        except KeyError as exc:
            raise _GateFailed(str(exc.args[0])) from None

    # ---- phases -------------------------------------------------------------------
    def _source_dirs(self) -> dict[str, Path | None]:
        from orchestrator.vcs.sources import ensure_worktree

        dirs: dict[str, Path | None] = {}
        for side, spec in self.plan.sides.items():
            src = spec.get("source") or {}
            if src.get("repo") and src.get("sha"):
                dirs[side] = ensure_worktree(src["repo"], src["sha"],
                                             self.paths.sources_dir / src["sha"][:12])
            else:
                dirs[side] = None
        return dirs

    def _health(self, tag: str) -> str:
        """Run the health gate; write what it found to ``<tag>.json``; raise if failed."""
        spec = self.plan.health
        log_path = self.paths.health_log(tag)
        argv = health_argv(self.plan, f"{self.job_id}-{tag}", self.hostnames, under_slurm=self.under_slurm)
        home = self.paths.run_home / tag
        if self.policy.run_as_user:
            lease_folders(self.policy.run_as_user, [home, home / "tmp"])
        try:
            step = self._step(argv, self._base_env({}, None, home=home), self.paths.root, log_path,
                              float(spec.get("timeout_s", 300)))
        finally:
            seal_folders(self.policy.run_as_user, [home])
        verdict, reason, facts, checks = read_health_log(log_path, step.error)
        sha, size = hash_file(log_path)
        self._write_result(self.paths.health_result(tag), {
            "exit_code": step.exit_code, "verdict": verdict, "reason": reason, "wall_s": step.wall_s,
            "allocation": facts, "checks": checks, "log_sha256": sha, "log_size_bytes": size,
        })
        self.status["timeline"].append({"phase": tag, "wall_s": step.wall_s})
        if verdict == "failed":
            raise _GateFailed(reason or "health gate failed")
        return verdict

    def _run_argv(self, order: int, role: str, side: str, source_dir: Path | None) -> list[str]:
        return run_argv(self.plan, order, role, side, source_dir, out_dir=self.paths.run_out(order, role),
                        under_slurm=self.under_slurm)

    def _run_folders(self, order: int, role: str, side: str) -> tuple[Path, Path, Path | None]:
        """The run's own folders: output (``{out_dir}``), home and, under ``run_as_user``,
        its side's compile cache (shared by a side's runs only)."""
        cache = self.paths.side_compile_cache(side) if self.policy.run_as_user else None
        return self.paths.run_out(order, role), self.paths.run_home_of(order, role), cache

    def _attempt(self, order: int, role: str, side: str, source_dir: Path | None):
        """Start one run's process and wait for it: (step, stream, argv, launch, env)."""
        plan = self.plan
        log_path = self.paths.run_log(order, role)
        out, home, cache = self._run_folders(order, role, side)
        env = self._base_env(plan.sides[side].get("env", {}), source_dir, run=True,
                             compile_cache=cache, home=home)
        argv = [a.replace("{MASTER_ADDR}", env["MASTER_ADDR"]).replace("{MASTER_PORT}", env["MASTER_PORT"])
                for a in self._run_argv(order, role, side, source_dir)]
        write_json_atomic(self.paths.run_started(order, role),
                          {"order": order, "role": role, "started_at": _now(), "command": argv})
        launch_unix = time.time()
        stream = StepStream(self.paths.run_steps(order, role), str(log_path.relative_to(self.paths.root)),
                            parser=run_log_parser(plan))
        cwd = source_dir or out
        spawn = None
        if plan.workload.get("recipe") and not self.under_slurm:
            spawn = self._fork_spawner(side, source_dir, env, cwd)
            if spawn is not None:
                argv = ["(fork server)", plan.python, "-m", "trainer", "train", "--recipe",
                        plan.workload["recipe"], *recipe_overrides(self.plan, side)]
        folders = [f for f in (out, home, cache) if f is not None]
        lease_folders(self.policy.run_as_user, [*folders, home / "tmp"])
        try:
            step = self._step(argv, env, cwd, log_path, plan.run_timeout_s, on_line=stream,
                              spawn=spawn)
        finally:
            stream.close()
            seal_folders(self.policy.run_as_user, folders)
        return step, stream, argv, launch_unix, env

    def _run(self, order: int, role: str, sources: dict[str, Path | None]) -> dict[str, Any]:
        """Run one pattern entry; returns its outcome, or raises _GateFailed. A run that
        failed on a port already in use (EADDRINUSE) is retried once on the next port."""
        plan = self.plan
        side = "control" if role in ("A", "B") else "candidate"
        source_dir = sources.get(side)
        log_path = self.paths.run_log(order, role)
        log_name = str(log_path.relative_to(self.paths.root))
        log_path.unlink(missing_ok=True)
        if plan.health.get("between_runs") and order > 0 and plan.health.get("enabled", True):
            self._health(f"health-{order:02d}")
        started = _now()
        step, stream, argv, launch_unix, env = self._attempt(order, role, side, source_dir)
        leftovers = list(step.leftovers) + (reaper_leftovers(log_path) if self.under_slurm else [])
        collision = step.error and port_collision(log_path)
        if collision:
            first = env["MASTER_PORT"]
            log_path.rename(log_path.with_suffix(".attempt1.log"))
            step, stream, argv, launch_unix, env = self._attempt(order, role, side, source_dir)
            leftovers += step.leftovers + (reaper_leftovers(log_path) if self.under_slurm else [])
            self.status["timeline"].append({"phase": "port_retry", "order": order, "role": role,
                                            "port": int(first), "retry_port": int(env["MASTER_PORT"]),
                                            "retry_error": step.error})
            if step.error:
                step.error = (f"port collision: MASTER_PORT {first} and, on the retry, "
                              f"{env['MASTER_PORT']} were in use or failed ({step.error})")
        exit_unix = time.time()
        outcome, error = measure_stream(plan, stream, step.error)
        if error is None:
            error = check_own_results(self.paths.run_own_results(order, role), outcome.get("fields") or {},
                                      log_name)
            if error is not None:
                outcome = {**outcome, "status": "failed", "error": error}
        phases = run_phases(outcome.get("fields") or {}, launch_unix, exit_unix)
        sha, size = hash_file(log_path)
        contained = {"count": len(leftovers), "processes": leftovers[:50],
                     "containment": (step.containment or "none") + (" + per-task reaper in the srun step"
                                                        if self.under_slurm else "")}
        self._write_result(self.paths.run_result(order, role), {
            "order": order, "role": role, "side": side, "exit_code": step.exit_code,
            "status": "failed" if error else "succeeded", "error": error,
            "started_at": started, "ended_at": _now(), "wall_s": step.wall_s,
            "measured_s": phases.get("measured_s"), "launch_unix": launch_unix,
            "exit_unix": exit_unix, "phases": phases,
            "command": argv, "env_overrides": plan.sides[side].get("env", {}),
            "source_dir": str(source_dir) if source_dir else None,
            "source_sha": (plan.sides[side].get("source") or {}).get("sha"),
            "log_sha256": sha, "log_size_bytes": size, "outcome": outcome,
            "leftovers": contained,
        })
        # Wall time from launch (including a wait for the fork server) to exit.
        self.status["timeline"].append({"phase": "run", "order": order, "role": role,
                                        "wall_s": exit_unix - launch_unix, **phases})
        if leftovers:
            self.status.setdefault("leftovers", []).append({"order": order, "role": role, **contained})
        self._save_status()
        self._check_evidence(f"run {order} ({role})")
        if error:
            raise _GateFailed(f"run {order} ({role}) failed: {error}")
        return outcome["fields"]

    def run(self) -> dict[str, Any]:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
            signal.signal(sig, self._on_signal)
        self._save_status()
        self._start_fork_server()
        try:
            try:
                self.run_as_env = prepare_run_as(self.policy.run_as_user, self.paths)
            except (RuntimeError, KeyError, OSError) as exc:
                raise _GateFailed(f"cannot run steps as {self.policy.run_as_user}: {exc}") from None
            sources = self._source_dirs()
            self._save_status(sources={k: str(v) if v else None for k, v in sources.items()})
            if self.plan.health.get("enabled", True):
                self._save_status(health_verdict=self._health("health"))
            done: list[tuple[str, dict[str, Any]]] = []
            extends = 0
            base_plan = self.plan
            if base_plan.auto_window:  # the conditioning run calibrates the cost model
                self.plan = calibration_plan(base_plan)
            while len(done) < len(self.roles):
                order = len(done)
                done.append((self.roles[order], self._run(order, self.roles[order], sources)))
                if order == 0 and base_plan.auto_window:
                    self.plan, window = choose_after_calibration(
                        base_plan, done[0][1], self.status["timeline"][-1])
                    self._save_status(window=window)
                if len(done) == len(self.roles):
                    more = more_roles(self.plan, done, extends)
                    if more:
                        extends += 1
                        self.roles.extend(more)
                        self._save_status(roles=self.roles, extends=extends)
            self._save_status(state="finished", ended_at=_now())
        except Cancelled as exc:
            state = "failed" if self.time_limit_hit else "cancelled"
            self._save_status(state=state, reason=str(exc), ended_at=_now())
        except _GateFailed as exc:
            self._save_status(state="failed", reason=str(exc), ended_at=_now())
        except Exception as exc:  # the driver itself broke: record it, never hang
            self.paths.driver_error.write_text(traceback.format_exc())
            self._save_status(state="failed", reason=f"driver error: {exc!r}", ended_at=_now())
        finally:
            if getattr(self, "fork_server", None) is not None:
                self.fork_server.stop()
        return self.status


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
    status = read_json(plan.paths.status)
    if status and status.get("state") in ("finished", "failed", "cancelled"):
        return status  # a re-queued job must not run the gate twice
    if status:  # requeued (node failure, preemption) after a first allocation started it
        status.update(state="failed", ended_at=_now(), reason=(
            f"job was requeued after allocation {status.get('scheduler_job_id')} on "
            f"{','.join(status.get('hostnames') or [])} had started the gate; runs of two "
            "allocations are never judged together: submit the gate again"))
        write_json_atomic(plan.paths.status, status)
        return status
    return _Driver(plan).run()


if __name__ == "__main__":
    run_gate(sys.argv[1])
