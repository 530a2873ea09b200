"""Resolving and checking out source revisions with git (argument lists only)."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

__all__ = ["SourceError", "ensure_worktree", "project_source_state", "resolve_ref"]


class SourceError(ValueError):
    """A repository or ref that cannot be resolved; ``part`` is ``"repo"`` or ``"ref"``."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part

logger = logging.getLogger(__name__)

_GIT_TIMEOUT_S = 120


def _git(args: list[str], *, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"git {args[0]} exited {proc.returncode}")
    return proc.stdout.strip()


def resolve_ref(repo: str, ref: str) -> str:
    """Resolve ``ref`` in ``repo`` to a full commit SHA.

    Args:
        repo: Path of a local git repository (a URL is fetched with ``git ls-remote``).
        ref: Branch, tag, SHA or ``REF~N`` (already validated by ``SourceSpec``).

    Returns:
        The 40-hex-digit SHA.

    Raises:
        SourceError: The repository or the ref does not exist (``part`` says which).
    """
    if "://" in repo or repo.startswith("git@"):
        try:
            out = _git(["ls-remote", "--", repo, ref])
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            raise SourceError("ref", f"cannot read remote {repo}: {exc}") from None
        if not out:
            raise SourceError("ref", f"{ref!r} not found in {repo}")
        return out.split()[0]
    path = Path(repo).expanduser()
    if not (path / ".git").exists() and not (path / "HEAD").exists():
        raise SourceError("repo", f"{repo} is not a git repository")
    try:
        return _git(["rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}"], cwd=path)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        raise SourceError("ref", f"{ref!r} is not a commit in {repo} ({exc})") from None


def project_source_state() -> tuple[str | None, bool]:
    """Return the SHA and dirty flag of the installed axbgate tree (``None`` if not git)."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = _git(["rev-parse", "HEAD"], cwd=root)
        dirty = bool(_git(["status", "--porcelain", "--untracked-files=no"], cwd=root))
    except (RuntimeError, subprocess.TimeoutExpired, FileNotFoundError):
        return None, False
    return sha, dirty


def ensure_worktree(repo: str, sha: str, dest: Path) -> Path:
    """Check out ``sha`` of ``repo`` into ``dest`` once (a detached git worktree).

    A local repository gets ``git worktree add --detach``; a remote one is cloned.
    An existing checkout at the same SHA is reused.

    Returns:
        ``dest``.

    Raises:
        RuntimeError: git failed (the message is git's).
    """
    if (dest / ".git").exists():
        if _git(["rev-parse", "HEAD"], cwd=dest) == sha:
            return dest
        raise RuntimeError(f"{dest} holds another revision")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if "://" in repo or repo.startswith("git@"):
        _git(["clone", "--quiet", "--no-checkout", "--", repo, str(dest)])
        _git(["checkout", "--quiet", "--detach", sha], cwd=dest)
    else:
        _git(["worktree", "add", "--detach", "--force", "--", str(dest), sha],
             cwd=Path(repo).expanduser())
    logger.info("checked out %s at %s", sha[:12], dest)
    return dest
