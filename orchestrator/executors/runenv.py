"""What environment an allocation job and its runs start with (docs/security.md).

A run never inherits the server's environment wholesale: the driver job is submitted with
a scrubbed environment (:func:`submission_env`: the allow-list, the operator's explicit
pass-through names and the server variables the gate references as ``secret://NAME``),
and each step starts from the same filter applied again on the allocation
(:func:`inherited_env`) plus the gate's own env. Names that look secret
(``security.secret_patterns``) are dropped even when a glob of the allow-list matches them;
only an exact pass-through name or a secret reference brings one in. The service's own
``AXBGATE_*`` settings (API token, database URL) never pass.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.domain.secrets import SECRET_REF_PREFIX, is_secret_name, secret_refs_of

__all__ = ["MULTICAST_OFF", "RunEnvPolicy", "inherited_env", "measure_env", "referenced_names",
           "resolve_secret_refs", "step_env", "submission_env"]

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""NVLink multicast off for every step unless the gate's env sets it (KINDS.md, H200)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunEnvPolicy:
    """The settings that shape a run's environment, as stored in ``plan.json``."""

    allow: tuple[str, ...] = ()
    """Globs of server variables a run inherits (``security.run_env_allow``)."""
    passthrough: tuple[str, ...] = ()
    """Exact names passed even when they look secret (``security.run_env_passthrough``)."""
    secret_patterns: tuple[str, ...] = ()
    """Globs of secret names (``security.secret_patterns``)."""
    run_as_user: str | None = None
    """Local executor: the account every step runs as (``security.run_as_user``)."""

    @classmethod
    def from_settings(cls, security: Any) -> RunEnvPolicy:
        """Build from ``settings.security``."""
        from orchestrator.domain.secrets import active_patterns

        return cls(allow=tuple(security.run_env_allow), passthrough=tuple(security.run_env_passthrough),
                   secret_patterns=tuple(dict.fromkeys([*active_patterns(), *security.secret_patterns])),
                   run_as_user=security.run_as_user)

    @classmethod
    def from_plan(cls, data: Mapping[str, Any] | None) -> RunEnvPolicy:
        """Read back what :meth:`to_plan` wrote (defaults when the plan has none)."""
        if not data:
            from orchestrator.settings import SecuritySettings

            return cls.from_settings(SecuritySettings())
        return cls(allow=tuple(data.get("allow", ())), passthrough=tuple(data.get("passthrough", ())),
                   secret_patterns=tuple(data.get("secret_patterns", ())),
                   run_as_user=data.get("run_as_user"))

    def to_plan(self) -> dict[str, Any]:
        """JSON form for ``plan.json``."""
        return {"allow": list(self.allow), "passthrough": list(self.passthrough),
                "secret_patterns": list(self.secret_patterns), "run_as_user": self.run_as_user}

    def inherits(self, name: str) -> bool:
        """True when a server variable ``name`` may reach a run."""
        if name in self.passthrough:
            return True
        if name.upper().startswith("AXBGATE_"):
            return False
        if not any(fnmatch.fnmatchcase(name, glob) for glob in self.allow):
            return False
        return not is_secret_name(name, self.secret_patterns)


def inherited_env(environ: Mapping[str, str], policy: RunEnvPolicy) -> dict[str, str]:
    """The part of ``environ`` a run inherits under ``policy``."""
    return {k: v for k, v in environ.items() if policy.inherits(k)}


def referenced_names(sides: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Server variables the gate's sides reference as ``secret://NAME``."""
    names: list[str] = []
    for spec in sides.values():
        names += secret_refs_of(spec.get("env") or {}).values()
    return list(dict.fromkeys(names))


def submission_env(environ: Mapping[str, str], policy: RunEnvPolicy,
                   references: Iterable[str] = ()) -> dict[str, str]:
    """The environment the allocation job is submitted with.

    Args:
        environ: The submitting process's environment (the server's).
        policy: The gate's policy.
        references: Server variables the gate references (:func:`referenced_names`);
            they travel to the allocation so the driver can resolve them there.

    Returns:
        The scrubbed environment (no ``AXBGATE_*`` setting, no secret-looking name unless
        passed through or referenced).
    """
    env = inherited_env(environ, policy)
    for name in references:
        if name in environ:
            env[name] = environ[name]
    return env


def resolve_secret_refs(side_env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Replace ``secret://NAME`` values by the value of ``NAME`` in ``environ``.

    Raises:
        KeyError: A referenced variable is not set (the message names it).
    """
    out = {}
    for key, value in side_env.items():
        if isinstance(value, str) and value.startswith(SECRET_REF_PREFIX):
            name = value[len(SECRET_REF_PREFIX):]
            if name not in environ:
                raise KeyError(f"{key}=secret://{name}: the server variable {name} is not set "
                               "where the gate runs")
            out[key] = environ[name]
        else:
            out[key] = value
    return out


def measure_env(plan: Any) -> dict[str, str]:
    """The gate's measurement rule as the ``AXBGATE_*`` variables every run gets
    (docs/record-contract.md, "The measurement rule in the environment"; read by
    ``axbgate_record.MeasureRule.from_env``). Steady window 5 and tolerance 1% are the
    gate's (``GateOptions.warmup_mode``).

    Args:
        plan: The gate's :class:`~orchestrator.executors.plan.GatePlan`.
    """
    from axbgate_record.rule import MeasureRule

    return MeasureRule(warmup_mode=plan.warmup_mode, warmup_steps=plan.num_warmup_steps,
                       max_warmup_steps=max(plan.max_warmup_steps, plan.num_warmup_steps, 2),
                       measured_steps=plan.num_measured_steps,
                       measured_seconds=plan.measured_seconds).to_env()


def step_env(environ: Mapping[str, str], policy: RunEnvPolicy, *, preamble: Mapping[str, str],
             side_env: Mapping[str, str], compile_cache: Path, python_root: str,
             run_as_env: Mapping[str, str], measure: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of one step (health gate or run) on the allocation.

    The allow-listed part of ``environ`` (:func:`inherited_env`), the launch preamble,
    multicast off, one compile cache per allocation (an operator's own cache setting is
    kept: Inductor keys its entries by graph and configuration, so sharing is safe),
    ``PYTHONPATH`` led by ``python_root``, the gate's env with its ``secret://``
    references resolved from ``environ``, the run-as account's ``HOME``/``USER``, and
    ``AXBGATE_MASKED_ENV``: the secret-looking names the trainer masks in provenance, and
    for a run ``measure``, the gate's rule (:func:`measure_env`; set last: a side's env
    cannot change it).

    Raises:
        KeyError: A referenced server variable is not set (the message names it).
    """
    side_env = resolve_secret_refs(side_env, environ)
    env = inherited_env(environ, policy)
    env.update(preamble)
    env.update(MULTICAST_OFF)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(compile_cache / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(compile_cache / "triton"))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([python_root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(side_env)
    env.update({k: v for k, v in MULTICAST_OFF.items() if k not in side_env})
    env.update(run_as_env)
    env.update(measure or {})
    env["AXBGATE_MASKED_ENV"] = ",".join(
        sorted(k for k in env if is_secret_name(k, policy.secret_patterns)))
    return env
