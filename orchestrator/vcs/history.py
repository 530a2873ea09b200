"""Git queries of tracked repositories: branch heads and commit ranges (argument lists only).

A local repository (an absolute path) is read in place; a remote one is asked with
``git ls-remote`` for its head and kept as a bare mirror under
``<data_dir>/mirrors`` for commit ranges (bisection).
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from pathlib import Path

__all__ = ["GitError", "branch_head", "commit_exists", "commit_subjects", "commits_between",
           "is_remote"]

logger = logging.getLogger(__name__)

_GIT_TIMEOUT_S = 120


class GitError(RuntimeError):
    """A git command failed or timed out; the message is git's."""


def is_remote(url: str) -> bool:
    """True for a URL or ``user@host:path``; False for an absolute local path."""
    return "://" in url or (not url.startswith("/") and "@" in url and ":" in url)


def _git(args: list[str], *, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (subprocess.TimeoutExpired, OSError) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if proc.returncode != 0:
        raise GitError(proc.stderr.strip() or f"git {args[0]} exited {proc.returncode}")
    return proc.stdout.strip()


def branch_head(url: str, branch: str) -> str:
    """Return the full SHA at the tip of ``branch``.

    Args:
        url: Absolute path of a local repository, or a remote URL.
        branch: Branch name (validated by ``RepoCreate``).

    Returns:
        The 40- (or 64-) hex-digit commit id.

    Raises:
        GitError: The repository cannot be read or has no such branch.
    """
    ref = f"refs/heads/{branch}"
    if is_remote(url):
        out = _git(["ls-remote", "--", url, ref])
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        raise GitError(f"branch {branch!r} not found in {url}")
    path = Path(url)
    if not path.is_dir():
        raise GitError(f"{url} is not a directory")
    try:
        return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], cwd=path)
    except GitError:
        raise GitError(f"branch {branch!r} not found in {url}") from None


def _mirror(url: str, mirrors_dir: Path) -> Path:
    """A bare mirror of a remote repository, cloned once and fetched on every use."""
    dest = Path(mirrors_dir) / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")
    if (dest / "HEAD").exists():
        _git(["fetch", "--quiet", "--prune", "origin"], cwd=dest)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git(["clone", "--quiet", "--mirror", "--", url, str(dest)])
        logger.info("mirrored %s at %s", url, dest)
    return dest


def commits_between(url: str, good_sha: str, bad_sha: str, *, mirrors_dir: Path) -> list[str]:
    """Commits after ``good_sha`` up to and including ``bad_sha``, oldest first.

    Uses ``git rev-list --ancestry-path --first-parent``: the commits on the first-parent
    line from good to bad, the line a branch's history (and so a bisection) follows.

    Args:
        url: Local path or remote URL of the repository.
        good_sha: Last commit known good (excluded).
        bad_sha: Commit known bad (included, last).
        mirrors_dir: Where remote repositories are mirrored.

    Returns:
        The SHAs; ``[bad_sha]`` when bad is the direct child of good.

    Raises:
        GitError: The repository cannot be read, or ``good_sha`` is not an ancestor of
            ``bad_sha``.
    """
    cwd = _mirror(url, mirrors_dir) if is_remote(url) else Path(url)
    out = _git(["rev-list", "--reverse", "--first-parent", "--ancestry-path",
                f"{good_sha}..{bad_sha}", "--"], cwd=cwd)
    shas = out.split()
    if not shas or shas[-1] != bad_sha:
        raise GitError(f"{good_sha[:12]} is not a first-parent ancestor of {bad_sha[:12]}")
    return shas


def commit_exists(url: str, sha: str, *, mirrors_dir: Path) -> bool:
    """True when ``sha`` is a commit of the repository (remote ones via their mirror).

    Raises:
        GitError: The repository cannot be read.
    """
    cwd = _mirror(url, mirrors_dir) if is_remote(url) else Path(url)
    try:
        _git(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=cwd)
    except GitError:
        return False
    return True


def commit_subjects(url: str, shas: list[str], *, mirrors_dir: Path) -> dict[str, str]:
    """First line of each commit's message, read without touching the network.

    A local repository is read in place; a remote one only through a mirror that already
    exists (a page view never clones or fetches). Unknown SHAs are left out.

    Args:
        url: Local path or remote URL of the repository.
        shas: Full commit ids (hex only; anything else is ignored).
        mirrors_dir: Where remote repositories are mirrored.

    Returns:
        ``{sha: subject}``; empty when the repository cannot be read.
    """
    wanted = sorted({s for s in shas if s and all(c in "0123456789abcdef" for c in s.lower())})
    if not wanted:
        return {}
    cwd = (Path(mirrors_dir) / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")
           if is_remote(url) else Path(url))
    if not cwd.is_dir():
        return {}
    out: dict[str, str] = {}
    try:
        text = _git(["log", "--no-walk=unsorted", "--ignore-missing", "--format=%H%x00%s",
                     *wanted, "--"], cwd=cwd)
    except GitError as exc:
        logger.warning("commit subjects of %s: %s", url, exc)
        return {}
    for line in text.splitlines():
        sha, _, subject = line.partition("\x00")
        out[sha] = subject
    return out
