"""Under ``AXBGATE_SECURITY__RUN_AS_USER`` the run account cannot read the ledger (issue 24
point 4): a real server (``axbgate serve``, root) with a real second account (``nobody``,
through ``runuser``); the server refuses to start when that account could read the ledger."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

def _nobody() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


NOBODY = _nobody()
needs_root_and_nobody = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None or NOBODY is None,
    reason="needs root, runuser and the account nobody (a real second account)")


def _as_nobody(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True, text=True,
                          timeout=60, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def walkable():
    """A folder every account can walk into (pytest's tmp folders are 0700, and a parallel
    pytest session resets their root to 0700), so that what keeps nobody out below it is
    the modes the server set, nothing above. Removed afterwards."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="axbgate-private-files-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _server_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AXBGATE_")}
    env.update(AXBGATE_DATA_DIR=str(data), AXBGATE_SECURITY__RUN_AS_USER="nobody",
               AXBGATE_GATES__ENABLED="false", AXBGATE_NIGHTLY__ENABLED="false")
    return env


def _serve(data: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "orchestrator.app.cli", "serve", "--port", str(port)],
                            env=_server_env(data), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_ready(proc: subprocess.Popen, port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {proc.stdout.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("server not ready in time")


@needs_root_and_nobody
def test_run_account_cannot_read_the_ledger_wal_or_shm(walkable):
    data = walkable / "data"
    control = walkable / "readable.txt"
    control.write_text("x")
    control.chmod(0o644)
    assert _as_nobody("cat", str(control)).returncode == 0  # nobody reaches this folder
    port = _free_port()
    proc = _serve(data, port)
    try:
        _wait_ready(proc, port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/gates", timeout=5) as resp:
            assert resp.status == 200  # the ledger is open (WAL mode: -wal and -shm exist)
        ledger = [data / "axbgate.db", data / "axbgate.db-wal", data / "axbgate.db-shm"]
        for path in ledger:
            info = path.stat()
            assert stat.S_IMODE(info.st_mode) == 0o600, (path, oct(info.st_mode))
            assert info.st_uid == 0
            denied = _as_nobody("cat", str(path))
            assert denied.returncode != 0 and "Permission denied" in denied.stderr, (path, denied)
        assert stat.S_IMODE(data.stat().st_mode) == 0o711
        listing = _as_nobody("ls", str(data))
        assert listing.returncode != 0 and "Permission denied" in listing.stderr
        assert stat.S_IMODE((data / "artifacts").stat().st_mode) == 0o700
        assert _as_nobody("ls", str(data / "artifacts")).returncode != 0
        # The run account can still walk through the data folder (to its own run folder).
        assert _as_nobody("test", "-x", str(data)).returncode == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@needs_root_and_nobody
def test_server_refuses_a_run_account_that_owns_the_ledger(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = data / "axbgate.db"
    db.touch()
    os.chown(db, NOBODY.pw_uid, NOBODY.pw_gid)  # an older install handed it to the run account
    proc = _serve(data, _free_port())
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "AXBGATE_SECURITY__RUN_AS_USER=nobody could read or change the ledger" in out
    assert f"{db} (it is owned by nobody)" in out and "chown" in out


@needs_root_and_nobody
def test_run_account_that_is_the_service_account_is_refused(tmp_path):
    """A server process running as nobody with run_as_user=nobody (a forked child that
    dropped to nobody's uid and gid): every run could read the ledger."""
    from orchestrator.runtime.private_files import PrivateFilesError, check_private_files
    from orchestrator.settings import Settings

    data = tmp_path / "data"
    data.mkdir()
    settings = Settings(data_dir=data, security={"run_as_user": "nobody"})
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the server as nobody
        code = 3
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
            try:
                check_private_files(settings)
                code = 0
            except PrivateFilesError as exc:
                os.write(write_end, str(exc).encode())
                code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as fh:
        message = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1, message
    assert message.startswith("AXBGATE_SECURITY__RUN_AS_USER=nobody is the account the server runs as")
    # The same settings in the root server pass (nobody reaches nothing of the empty folder).
    data.chmod(0o711)
    check_private_files(settings)
