"""The ledger's files under ``security.run_as_user`` (issue 24 point 4), on the real
filesystem: created private, tightened when the service owns them, refused otherwise."""

from __future__ import annotations

import os
import pwd
import stat

import pytest

from orchestrator.runtime.private_files import (
    SERVICE_UMASK,
    PrivateFilesError,
    check_private_files,
    ledger_files,
    prepare_private_files,
)
from orchestrator.settings import Settings

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="run_as_user needs a root server")


@pytest.fixture(autouse=True)
def _keep_umask():
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def _settings(tmp_path, **database) -> Settings:
    return Settings(data_dir=tmp_path / "data", security={"run_as_user": "nobody"}, **database)


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_prepare_creates_the_ledger_0600_and_the_data_folder_0711(tmp_path):
    settings = _settings(tmp_path)
    prepare_private_files(settings)
    db, wal, shm, journal = ledger_files(settings)
    assert db == tmp_path / "data" / "axbgate.db" and wal.name == "axbgate.db-wal"
    assert _mode(db) == 0o600 and _mode(tmp_path / "data") == 0o711
    assert all(_mode(tmp_path / "data" / name) == 0o700 for name in ("artifacts", "mirrors", "logs"))
    assert os.umask(SERVICE_UMASK) == SERVICE_UMASK  # set for the service's own files
    check_private_files(settings)


def test_prepare_tightens_an_older_install(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    for name in ("axbgate.db", "axbgate.db-wal", "axbgate.db-shm"):
        (data / name).write_bytes(b"")
        (data / name).chmod(0o644)  # what the server made before issue 24
    settings = _settings(tmp_path)
    prepare_private_files(settings)
    assert [_mode(data / n) for n in ("axbgate.db", "axbgate.db-wal", "axbgate.db-shm")] == [0o600] * 3
    assert _mode(data) == 0o711
    check_private_files(settings)


def test_a_file_the_service_does_not_own_is_refused_naming_the_setting(tmp_path):
    nobody = pwd.getpwnam("nobody")
    settings = _settings(tmp_path)
    prepare_private_files(settings)
    shm = tmp_path / "data" / "axbgate.db-shm"
    shm.write_bytes(b"")
    os.chown(shm, 0, nobody.pw_gid)
    shm.chmod(0o640)  # group-readable, the group holds nobody
    with pytest.raises(PrivateFilesError) as info:
        check_private_files(settings)
    message = str(info.value)
    assert message.startswith("AXBGATE_SECURITY__RUN_AS_USER=nobody could read or change the ledger")
    assert f"{shm} (its group (gid {nobody.pw_gid}) holds nobody and may read it (mode 0640))" in message
    shm.chmod(0o604)
    with pytest.raises(PrivateFilesError, match=r"others may read it \(mode 0604\)"):
        check_private_files(settings)
    (tmp_path / "data").chmod(0o755)
    shm.chmod(0o600)
    with pytest.raises(PrivateFilesError, match=r"the folder .*data \(others may read it \(mode 0755\)\)"):
        check_private_files(settings)


def test_nothing_changes_without_run_as_user_or_on_postgres(tmp_path):
    plain = Settings(data_dir=tmp_path / "plain")
    prepare_private_files(plain)
    check_private_files(plain)
    assert not (tmp_path / "plain").exists()
    pg = _settings(tmp_path, database={"url": "postgresql+psycopg://axb@127.0.0.1:5432/axb"})
    assert ledger_files(pg) == []
    prepare_private_files(pg)
    assert _mode(tmp_path / "data") == 0o711
    check_private_files(pg)
