"""What files and server variables a gate request may name (docs/security.md).

Path fields (``workload.recipe``, ``health.criteria``) name either a shipped file (a
bundled recipe, a shipped criteria file) or, when the server allows it, a ``.toml`` file
under ``security.files_dir``. A request naming anything else is refused with the same
message whether or not that file exists: the server never opens it, so the answer says
nothing about other files or their keys. The embedded CLI runs with its user's own
rights and may name any file (:meth:`FilePolicy.unrestricted`).

``secret://NAME`` env values must name a variable the operator offers
(``security.secret_refs``).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.domain.secrets import secret_refs_of

__all__ = ["FilePolicy", "check_gate_files", "check_secret_refs"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class FilePolicy:
    """Which files path fields may name."""

    restricted: bool
    """Shipped names and files under ``files_dir`` only (requests to the server)."""
    files_dir: Path | None = None
    """Directory of operator-provided ``.toml`` files (``security.files_dir``)."""

    @classmethod
    def unrestricted(cls) -> FilePolicy:
        """Any file the caller can read (the embedded CLI, acting as its own user)."""
        return cls(restricted=False)

    @classmethod
    def restricted_to(cls, files_dir: Path | None) -> FilePolicy:
        """Shipped names, or ``.toml`` files under ``files_dir`` (none when ``None``)."""
        return cls(restricted=True, files_dir=files_dir)


def _shipped_recipes() -> list[str]:
    from trainer import list_recipes

    return list_recipes()


def _shipped_criteria() -> list[str]:
    from health.criteria import CRITERIA_DIR

    return sorted(p.stem for p in CRITERIA_DIR.glob("*.toml"))


def _check_one(value: str, field: str, shipped: list[str], what: str, policy: FilePolicy) -> str:
    """Return the value to store (an absolute path for a file), or raise."""
    if _NAME_RE.match(value) and not value.endswith(".toml"):
        if value in shipped:
            return value
        raise ValidationFailed(field, f"unknown {what} {value!r}; shipped: {', '.join(shipped)}")
    refusal = (f"{what} files must be shipped names ({', '.join(shipped)})"
               + (" or .toml files under the server's files directory (AXBGATE_SECURITY__FILES_DIR)"
                  if policy.files_dir is not None else
                  "; this server accepts no other files (the operator may set "
                  "AXBGATE_SECURITY__FILES_DIR)"))
    if policy.files_dir is None or "\x00" in value or not value.endswith(".toml"):
        raise ValidationFailed(field, refusal)
    root = policy.files_dir.expanduser().resolve()
    candidate = Path(value)
    if not candidate.is_absolute():
        candidate = root / candidate
    # resolve() follows symlinks, so a link inside the directory to a file outside it is
    # refused like the outside path itself; nothing outside is opened or stat'ed first.
    resolved = Path(candidate).resolve()
    if not resolved.is_relative_to(root):
        raise ValidationFailed(field, refusal)
    if not resolved.is_file():
        raise ValidationFailed(field, f"no {what} file {resolved.relative_to(root)} under the "
                                      "server's files directory")
    return str(resolved)


def _local_file(value: str, field: str, shipped: list[str], what: str, _policy: FilePolicy) -> str:
    """The submitting user's own file: a shipped name, or a path resolved NOW against the
    submitting process's directory (the allocation runs elsewhere), which must exist."""
    if _NAME_RE.match(value) and not value.endswith(".toml"):
        if value in shipped:
            return value
        raise ValidationFailed(field, f"unknown {what} {value!r}; shipped: {', '.join(shipped)}; "
                                      "or give the path of a .toml file")
    if "\x00" in value:
        raise ValidationFailed(field, f"the {what} path contains a NUL character")
    path = Path(value).expanduser()
    resolved = (path if path.is_absolute() else Path.cwd() / path).resolve()
    if not resolved.is_file():
        raise ValidationFailed(field, f"no {what} file {value!r} (looked for {resolved}); give an "
                                      f"existing file or a shipped name ({', '.join(shipped)})")
    return str(resolved)


def check_gate_files(gate_in: GateCreate, policy: FilePolicy) -> GateCreate:
    """Check the request's path fields against ``policy``.

    Args:
        gate_in: The request.
        policy: What may be named.

    Returns:
        The request, with accepted files rewritten to absolute paths (so the allocation
        reads the same file). Under :meth:`FilePolicy.unrestricted` a relative path is
        resolved against the submitting process's current directory.

    Raises:
        ValidationFailed: A path field names something ``policy`` does not allow, an
            unknown shipped name, or a file that does not exist (``workload.recipe`` or
            ``health.criteria``).
    """
    check = _check_one if policy.restricted else _local_file
    update_workload, update_health = {}, {}
    if gate_in.workload.recipe is not None:
        update_workload["recipe"] = check(gate_in.workload.recipe, "workload.recipe",
                                          _shipped_recipes(), "recipe", policy)
    if gate_in.health.criteria is not None:
        update_health["criteria"] = check(gate_in.health.criteria, "health.criteria",
                                          _shipped_criteria(), "criteria", policy)
    return gate_in.model_copy(update={
        "workload": gate_in.workload.model_copy(update=update_workload),
        "health": gate_in.health.model_copy(update=update_health),
    })


def check_secret_refs(env_by_field: dict[str, dict[str, str]], allowed: list[str] | None) -> None:
    """Refuse ``secret://NAME`` values whose ``NAME`` the operator does not offer.

    Args:
        env_by_field: Request field (e.g. ``"candidate.env"``) -> its env mapping.
        allowed: ``security.secret_refs``; ``None`` accepts any name (embedded CLI: the
            variable is read from the CLI user's own environment).

    Raises:
        ValidationFailed: Naming the field and the variable.
    """
    if allowed is None:
        return
    for field, env in env_by_field.items():
        for key, name in secret_refs_of(env).items():
            if name not in allowed:
                offered = ", ".join(allowed) or "none"
                raise ValidationFailed(
                    f"{field}.{key}", f"secret://{name} is not offered by this server (offered: "
                                      f"{offered}; the operator lists them in AXBGATE_SECURITY__SECRET_REFS)")
