"""Raw files: content-addressed copies with SHA-256, and reading run logs line by line
with a bound on line length (no database here)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from orchestrator.domain.record_limits import MAX_RECORD_LINE_BYTES
from orchestrator.domain.records import ParsedLog, RecordParser, StepRecord

__all__ = ["hash_file", "keep_file", "parse_log_file", "read_line_blocks", "read_lines"]

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


def read_lines(fh: BinaryIO, max_line_bytes: int = MAX_RECORD_LINE_BYTES) -> Iterator[bytes]:
    """Yield the lines of a binary file without their newline (and a trailing CR).

    Memory is bounded by ``max_line_bytes``: a longer line is yielded cut to
    ``max_line_bytes + 1`` bytes (so a parser sees it is too long) and the rest of it is
    skipped.
    """
    while line := fh.readline(max_line_bytes + 1):
        if line.endswith(b"\n"):
            line = line[:-1]
        elif len(line) > max_line_bytes:
            while (rest := fh.readline(_CHUNK_BYTES)) and not rest.endswith(b"\n"):
                pass
        yield line[:-1] if line.endswith(b"\r") else line


def read_line_blocks(fh: BinaryIO, max_line_bytes: int = MAX_RECORD_LINE_BYTES,
                     block_bytes: int = 4 * _CHUNK_BYTES) -> Iterator[list[bytes]]:
    """Yield the lines of a binary file in blocks (lists), as :func:`read_lines` would one
    by one: without newline or trailing CR; a line longer than ``max_line_bytes`` is cut
    to ``max_line_bytes + 1`` bytes (so a parser sees it is too long).

    Reads ``block_bytes`` at a time and splits in C: a million short lines cost a few
    hundred reads, not a million. Memory is bounded by ``block_bytes + max_line_bytes``.
    """
    tail = b""
    skipping = False  # inside an over-long line whose head was already yielded
    while chunk := fh.read(block_bytes):
        parts = chunk.split(b"\n")
        block: list[bytes] = []
        if skipping:
            if len(parts) == 1:
                continue
            skipping, parts = False, parts[1:]
        else:
            parts[0] = tail + parts[0]
        tail = parts.pop()
        for line in parts:
            if len(line) > max_line_bytes:
                line = line[:max_line_bytes + 1]
            block.append(line[:-1] if line.endswith(b"\r") else line)
        if len(tail) > max_line_bytes:
            head = tail[:max_line_bytes + 1]
            block.append(head[:-1] if head.endswith(b"\r") else head)
            tail, skipping = b"", True
        if block:
            yield block
    if tail and not skipping:
        yield [tail[:-1] if tail.endswith(b"\r") else tail]


def parse_log_file(path: Path, on_step: Callable[[StepRecord], None] | None = None) -> ParsedLog:
    """Parse a run or health log on disk, streaming, in bounded memory.

    Args:
        path: The log.
        on_step: Called with every step record as it is read.

    Returns:
        The :class:`~orchestrator.domain.records.ParsedLog`.

    Raises:
        orchestrator.domain.errors.RecordError: The first malformed record line (stops
            reading there).
        OSError: The file cannot be read.
    """
    parser = RecordParser()
    with open(path, "rb") as fh:
        for line in read_lines(fh):
            step = parser.feed(line)
            if parser.error is not None:
                raise parser.error
            if step is not None and on_step is not None:
                on_step(step)
    return parser.finish()
