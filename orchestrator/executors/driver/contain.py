"""Containment of one step: every process it starts is found and killed when it ends.

A step's process group is not enough: a child that calls ``setsid()`` (Python's
``start_new_session=True``) leaves the group and, once its parent exits, is re-parented
out of the step's tree. Two ways to keep hold of it:

- **cgroup v2** (where the host has a writable cgroup2 hierarchy): every step gets its
  own cgroup below the driver's (``axbgate-<driver pid>-<n>``); the driver joins it for
  the instant it forks the step (so the step is in it before its first instruction) and
  leaves it again; the fork server is moved in and out the same way around a spawn.
  Whatever is still in the cgroup when the step's main process has exited is listed,
  killed (``cgroup.kill``, else SIGKILL per pid) and the cgroup removed.
- **subreaper** otherwise: the driver is ``PR_SET_CHILD_SUBREAPER`` (prctl, Linux), so an
  orphan of any step is re-parented to the driver instead of init; after the step, every
  descendant of the driver that was not there before the step (and is not the fork
  server's) is a leftover.

Under Slurm a run's ``srun`` step is contained by Slurm itself (``ProctrackType``); this
module contains the steps the driver starts itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["StepContainer", "cgroup2_mount", "leftover_note"]

_PR_SET_CHILD_SUBREAPER = 36
_GONE_WAIT_S = 10.0
_subreaper_set = False
_counter = 0


def cgroup2_mount(mountinfo: str | None = None) -> Path | None:
    """Mount point of the cgroup2 hierarchy, or None (``/proc/self/mountinfo``)."""
    try:
        text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def _own_cgroup(root: Path) -> Path | None:
    """This process's cgroup2 folder (the ``0::`` line of ``/proc/self/cgroup``)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return root / line[3:].lstrip("/")
    except OSError:
        pass
    return None


def _set_subreaper() -> str | None:
    """Make this process the subreaper of its descendants; the reason if it cannot."""
    global _subreaper_set
    if _subreaper_set:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"prctl unavailable: {exc}"
    _subreaper_set = True
    return None


def _ppid_map() -> dict[int, int]:
    """pid -> parent pid of every live process (``/proc/<pid>/stat``)."""
    out: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":  # a zombie is gone already; only its parent's wait is left
            out[int(entry.name)] = int(fields[1])
    return out


def _descendants(root: int, ppids: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)[:300] or "?"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def leftover_note(leftovers: list[dict]) -> str:
    """One line about the processes a step left behind (for logs and the run's record)."""
    shown = ", ".join(f"{p['pid']} ({p['command'][:60]})" for p in leftovers[:5])
    more = f" and {len(leftovers) - 5} more" if len(leftovers) > 5 else ""
    return f"{len(leftovers)} process(es) outlived the run and were killed: {shown}{more}"


class StepContainer:
    """Holds every process of one step; :meth:`reap` kills what outlived it.

    Args:
        exclude: Pids whose subtrees are never a step's leftovers (the fork server).
        use_cgroup: Try cgroup v2 first (False: the subreaper only, e.g. in tests of it).
    """

    def __init__(self, exclude: tuple[int, ...] = (), use_cgroup: bool = True) -> None:
        self.exclude = set(exclude)
        self.cgroup: Path | None = None
        self.home: Path | None = None
        self.note: str | None = None
        self.kind = "subreaper"
        if use_cgroup:
            self._make_cgroup()
        if self.cgroup is None:
            why = _set_subreaper()
            self.kind = "subreaper" if why is None else "process group only"
            self.note = "; ".join(n for n in (self.note, why) if n) or None
        self.before = self._children_now() if self.cgroup is None else set()

    def _make_cgroup(self) -> None:
        global _counter
        root = cgroup2_mount()
        home = _own_cgroup(root) if root is not None else None
        if home is None:
            self.note = "no cgroup2 hierarchy"
            return
        _counter += 1
        path = home / f"axbgate-{os.getpid()}-{_counter}"
        try:
            path.mkdir()
        except OSError as exc:
            self.note = f"cgroup2 at {home} not writable ({exc.strerror})"
            return
        try:  # can this process move itself there and back? (delegation, no-internal-process rule)
            (path / "cgroup.procs").write_text("0\n")
            (home / "cgroup.procs").write_text("0\n")
        except OSError as exc:
            self.note = f"cannot join a cgroup under {home} ({exc.strerror})"
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.cgroup, self.home, self.kind = path, home, "cgroup v2"

    def _children_now(self) -> set[int]:
        ppids = _ppid_map()
        return _descendants(os.getpid(), ppids)

    @contextlib.contextmanager
    def spawning(self, pid: int | None = None) -> Iterator[None]:
        """While the step's first process is forked: that process (this one, or the
        fork server ``pid``) sits in the step's cgroup, so the fork starts in it."""
        if self.cgroup is None:
            yield
            return
        who = "0" if pid is None else str(pid)
        (self.cgroup / "cgroup.procs").write_text(f"{who}\n")
        try:
            yield
        finally:
            (self.home / "cgroup.procs").write_text(f"{who}\n")  # type: ignore[operator]

    def _members(self) -> set[int]:
        if self.cgroup is not None:
            try:
                return {int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()}
            except OSError:
                return set()
        ppids = _ppid_map()
        skip = set(self.before) | self.exclude
        for pid in self.exclude:
            skip |= _descendants(pid, ppids)
        return _descendants(os.getpid(), ppids) - skip

    def reap(self) -> list[dict]:
        """Kill every process of the step that is still alive; wait until they are gone.

        Returns:
            The leftovers as ``{"pid", "command"}``, as they were before the kill.
        """
        members = sorted(p for p in self._members() if p != os.getpid())
        leftovers = [{"pid": pid, "command": _command(pid)} for pid in members]
        if self.cgroup is not None and (self.cgroup / "cgroup.kill").exists() and members:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1\n")
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + _GONE_WAIT_S
        pending = set(members)
        while pending and time.monotonic() < deadline:
            for pid in list(pending):  # our own re-parented orphans are reaped, never others
                try:
                    done, _status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # not our child (cgroup case): gone once not alive
                    done = pid if not _alive(pid) else 0
                if done:
                    pending.discard(pid)
            if pending:
                time.sleep(0.05)
        if self.cgroup is not None:
            for _ in range(50):
                try:
                    self.cgroup.rmdir()
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.05)
        return leftovers
