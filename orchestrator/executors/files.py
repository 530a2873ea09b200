"""Keeping raw files: content-addressed copies with SHA-256 (no database here)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["hash_file", "keep_file"]

_CHUNK_BYTES = 1 << 20


def hash_file(path: Path) -> tuple[str, int]:
    """Return the SHA-256 hex digest and size in bytes of a file, read in 1 MiB chunks.

    Raises:
        OSError: The file cannot be read.
    """
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def keep_file(src: Path, store_dir: Path, sha256: str, suffix: str = ".log") -> Path:
    """Copy ``src`` to ``store_dir/<sha256[:2]>/<sha256><suffix>`` atomically.

    The copy is written to a temporary file in the same folder and renamed, so a reader
    never sees half a file; an existing copy (same hash) is left alone.

    Returns:
        The path of the kept copy.
    """
    dest = store_dir / sha256[:2] / f"{sha256}{suffix}"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, _CHUNK_BYTES)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest
