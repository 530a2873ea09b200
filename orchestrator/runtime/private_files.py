"""The service's own files out of a run account's reach (issue 24 point 4; docs/security.md).

Under ``security.run_as_user`` (``AXBGATE_SECURITY__RUN_AS_USER``) every step of a local gate
runs as an unprivileged account; the ledger keeps env values verbatim and the webhook
signing secrets, so that account must not read it. When the setting is on, the server at
start-up:

* sets the umask to :data:`SERVICE_UMASK` (077 for files: every file it creates is 0600;
  folders 0711, traversable but not listable, since the run account must walk
  ``<data_dir>/gates/NNNNNN/`` to its own run folder, whose mode the driver sets);
* creates the data folder 0711 and the SQLite ledger ``axbgate.db`` 0600 before SQLite
  opens it (SQLite gives ``-wal``, ``-shm`` and ``-journal`` the mode of the database
  file), tightens ledger files of an older install to 0600, and the folders a run never
  needs (``artifacts``, ``mirrors``, ``logs``) to 0700;
* refuses to start (:class:`PrivateFilesError`, naming the setting and the fix) when the
  run account is the service account, or could read, rename or change the ledger, its
  WAL/SHM/journal or the data folder (it owns one of them, or a group or other bit lets it).

The local executor starts the driver with the usual umask 022 again
(:data:`DRIVER_UMASK`): the driver sets the modes of the gate folder's contents itself.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator.settings import Settings

__all__ = ["DRIVER_UMASK", "SERVICE_UMASK", "PrivateFilesError", "check_private_files", "ledger_files",
           "prepare_private_files"]

SERVICE_UMASK = 0o066
"""The service's umask under ``run_as_user``: files 0600, folders 0711 (no read or write
for group and others; the execute bit of a folder only lets an account walk through it)."""
DRIVER_UMASK = 0o022
"""The umask the local executor gives the driver (what it had before ``run_as_user``)."""
_PRIVATE_FOLDERS = ("artifacts", "mirrors", "logs")
"""Folders of the data folder that no run ever needs: 0700."""
_SETTING = "AXBGATE_SECURITY__RUN_AS_USER"


class PrivateFilesError(RuntimeError):
    """The server cannot keep its files from the run account; the message says how to fix it."""


@dataclass(frozen=True)
class _Account:
    name: str
    uid: int
    gids: frozenset[int]


def _account(name: str) -> _Account:
    entry = pwd.getpwnam(name)
    return _Account(name, entry.pw_uid, frozenset(os.getgrouplist(name, entry.pw_gid)))


def ledger_files(settings: Settings) -> list[Path]:
    """The SQLite ledger and its ``-wal``, ``-shm`` and ``-journal`` files (empty for a
    server database such as PostgreSQL, whose files are the database server's)."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    if not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
        return []
    db = Path(url.database).expanduser()
    return [db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def prepare_private_files(settings: Settings) -> None:
    """Create the data folder and the ledger private to the service (module docstring).

    Does nothing without ``security.run_as_user``.

    Args:
        settings: The server's settings.

    Raises:
        OSError: The data folder or the ledger cannot be created.
    """
    if not settings.security.run_as_user:
        return
    os.umask(SERVICE_UMASK)
    data = Path(settings.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    _chmod_own(data, 0o711)
    for name in _PRIVATE_FOLDERS:
        folder = data / name
        folder.mkdir(exist_ok=True)
        _chmod_own(folder, 0o700)
    files = ledger_files(settings)
    if files:
        files[0].parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(files[0], os.O_CREAT | os.O_WRONLY, 0o600))  # before SQLite opens it
    for path in files:
        if path.exists():
            _chmod_own(path, 0o600)


def _chmod_own(path: Path, mode: int) -> None:
    """``chmod`` a path the service owns (root may chmod anything, but a path owned by
    another account stays as it is and is judged by :func:`check_private_files`)."""
    info = path.lstat()
    if info.st_uid == os.geteuid() and not stat.S_ISLNK(info.st_mode):
        path.chmod(mode)


def _reaches(info: os.stat_result, account: _Account) -> str | None:
    """Why ``account`` can read (list) or change a path with these stat fields (None: it cannot)."""
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid == account.uid:
        return f"it is owned by {account.name}"
    if info.st_gid in account.gids and mode & 0o060:
        return (f"its group (gid {info.st_gid}) holds {account.name} and may "
                f"{'read' if mode & 0o040 else 'write'} it (mode {mode:04o})")
    if mode & 0o006:
        return f"others may {'read' if mode & 0o004 else 'write'} it (mode {mode:04o})"
    return None


def check_private_files(settings: Settings) -> None:
    """Refuse a run account that could read the ledger or the data folder.

    Does nothing without ``security.run_as_user``. Checked: the account is not the
    service's own; it cannot read or write the ledger files that exist, nor list or
    write the data folder and the ledger's folder, nor own any of them.

    Args:
        settings: The server's settings.

    Raises:
        PrivateFilesError: What the run account could reach and how to fix it.
    """
    user = settings.security.run_as_user
    if not user:
        return
    account = _account(user)
    if account.uid == os.geteuid():
        raise PrivateFilesError(
            f"{_SETTING}={user} is the account the server runs as (uid {account.uid}): every run could "
            "read the ledger and its secrets; run the server as root (or another account) and name "
            "an unprivileged account of its own here, e.g. nobody")
    problems = []
    files = ledger_files(settings)
    folders = {Path(settings.data_dir)} | ({files[0].parent} if files else set())
    for folder in sorted(folders):
        why = _reaches(folder.stat(), account)
        if why:
            problems.append(f"the folder {folder} ({why})")
    for path in files:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        why = _reaches(info, account)
        if why:
            problems.append(f"{path} ({why})")
    if problems:
        raise PrivateFilesError(
            f"{_SETTING}={user} could read or change the ledger: {'; '.join(problems)}. Fix: "
            f"chown the data folder and the ledger to the server's account and chmod 0711 the data "
            f"folder, 0600 the ledger files (the server does this itself for what it owns), or "
            f"choose a run account outside their groups")
