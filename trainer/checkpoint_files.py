"""safetensors checkpoint files: find them, list their tensors, read row slices, write shards.

Reading is lazy (safetensors ``safe_open`` + ``get_slice``): a slice is a view of the
memory-mapped file, so copying it into a parameter shard touches only that slice's
pages. Those pages count toward the process's resident memory until the file is
unmapped, so :class:`SliceReader` closes and reopens a file once it has touched
``budget_bytes`` of it, and reads longer slices in row chunks of at most that size:
host memory stays at the destination tensors plus at most one budget of file pages
(measured by ``benchmarks/checkpoint_rss.py``).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.diffusers_layout import DTYPE_BYTES, INDEX_NAME, WEIGHTS_NAME

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_BYTES = 64 * 2**20
"""File pages one :class:`SliceReader` keeps mapped before reopening the file (64 MiB: a
reopen costs ~1-6 ms, so 13 GB of fp32 weights take ~200 reopens, well under a second)."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """Where one tensor of a checkpoint lives."""

    file: Path
    """The ``.safetensors`` file holding it."""
    dtype: str
    """safetensors dtype name (``F32``, ``BF16``, ...)."""
    shape: tuple[int, ...]
    """Shape."""

    @property
    def nbytes(self) -> int:
        """Size in the file, bytes."""
        n = 1
        for s in self.shape:
            n *= s
        return n * DTYPE_BYTES.get(self.dtype, 0)


def resolve_files(path: str | Path) -> tuple[list[Path], Path | None]:
    """The weight files of a checkpoint given as a file, an index or a model folder.

    Args:
        path: A ``.safetensors`` file, a ``*.safetensors.index.json``, or a folder
            holding ``diffusion_pytorch_model.safetensors.index.json``,
            ``diffusion_pytorch_model.safetensors``, or exactly one index or one
            ``.safetensors`` file.

    Returns:
        ``(files, index)``: the weight files in index order, and the index used
        (None for a single file).

    Raises:
        ValueError: The path does not exist, a folder holds no (or several candidate)
            weight files, or an index is unreadable or names a missing file.
    """
    p = Path(path)
    if not p.exists():
        raise ValueError(f"checkpoint.load_safetensors: {p} does not exist")
    if p.is_dir():
        p = _pick_in_folder(p)
    if p.name.endswith(".index.json"):
        try:
            index = json.loads(p.read_text(encoding="utf-8"))
            weight_map = index["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"checkpoint index {p} is not a safetensors index "
                             f"(weight_map missing or invalid JSON: {exc})") from None
        names = list(dict.fromkeys(weight_map.values()))
        files = [p.parent / name for name in names]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise ValueError(f"checkpoint index {p} names missing shard files {missing[:3]}")
        return files, p
    if p.suffix != ".safetensors":
        raise ValueError(f"checkpoint.load_safetensors: {p} is neither a .safetensors file, "
                         "a .safetensors.index.json nor a model folder")
    return [p], None


def _pick_in_folder(folder: Path) -> Path:
    for name in (INDEX_NAME, WEIGHTS_NAME):
        if (folder / name).is_file():
            return folder / name
    indexes = sorted(folder.glob("*.safetensors.index.json"))
    singles = sorted(folder.glob("*.safetensors"))
    if len(indexes) == 1:
        return indexes[0]
    if not indexes and len(singles) == 1:
        return singles[0]
    hint = " (a Diffusers pipeline folder? use its transformer/ subfolder)" \
        if (folder / "transformer").is_dir() else ""
    raise ValueError(f"checkpoint folder {folder} holds {len(indexes)} index files and "
                     f"{len(singles)} .safetensors files; expected {INDEX_NAME} or "
                     f"{WEIGHTS_NAME}{hint}")


def list_tensors(files: list[Path]) -> dict[str, TensorInfo]:
    """Read the headers of the weight files (no tensor data).

    Args:
        files: From :func:`resolve_files`.

    Returns:
        ``{key: TensorInfo}`` over all files.

    Raises:
        ValueError: A key appears in two files, or a file is not safetensors.
    """
    from safetensors import SafetensorError, safe_open

    out: dict[str, TensorInfo] = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as handle:
                entries = [(key, handle.get_slice(key)) for key in handle.keys()]
                entries = [(key, s.get_dtype(), tuple(s.get_shape())) for key, s in entries]
        except (OSError, SafetensorError) as exc:
            raise ValueError(f"checkpoint file {f} is not readable as safetensors: {exc}") from None
        for key, dtype, shape in entries:
            if key in out:
                raise ValueError(f"checkpoint key {key!r} is in both {out[key].file} and {f}")
            out[key] = TensorInfo(f, dtype, shape)
    return out


@dataclass(slots=True)
class SliceReader:
    """Reads row slices of tensors, keeping at most ``budget_bytes`` of one file mapped.

    Use as a context manager; call :meth:`rows` in any order (grouped by file is
    cheapest: each switch of file or exhausted budget reopens, ~6 ms for a 3,510-key
    header).
    """

    budget_bytes: int = DEFAULT_BUDGET_BYTES
    """File pages touched before the mapping is dropped and the file reopened, bytes."""
    bytes_read: int = 0
    """Bytes of tensor data read so far."""
    num_opens: int = 0
    """Files opened so far (reopens included)."""
    _file: Path | None = None
    _handle: Any = None
    _touched: int = 0

    def __enter__(self) -> SliceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Unmap the open file (its pages stop counting toward this process's memory)."""
        if self._handle is not None:
            self._handle.__exit__(None, None, None)
        self._handle, self._file, self._touched = None, None, 0

    def chunks(self, info: TensorInfo, start: int, stop: int) -> list[tuple[int, int]]:
        """Split rows ``[start, stop)`` into ranges of at most ``budget_bytes`` each
        (at least one row per range)."""
        row_bytes = info.nbytes // max(info.shape[0], 1) if info.shape else info.nbytes
        step = max(1, self.budget_bytes // max(row_bytes, 1))
        return [(lo, min(lo + step, stop)) for lo in range(start, stop, step)]

    def rows(self, info: TensorInfo, key: str, start: int, stop: int):
        """Rows ``[start, stop)`` of a tensor along dim 0 (a file-backed view).

        Copy the result into its destination before the next call: the view may be
        unmapped by it.

        Args:
            info: The tensor's :class:`TensorInfo`.
            key: Its key.
            start: First row.
            stop: One past the last row (``start <= stop <= shape[0]``).

        Returns:
            A tensor of shape ``[stop - start, *shape[1:]]`` in the file's dtype.
        """
        from safetensors import safe_open

        row_bytes = info.nbytes // max(info.shape[0], 1) if info.shape else info.nbytes
        want = row_bytes * (stop - start)
        if self._file != info.file or (self._touched and self._touched + want > self.budget_bytes):
            self.close()
            self._handle = safe_open(str(info.file), framework="pt").__enter__()
            self._file = info.file
            self.num_opens += 1
        self._touched += want
        self.bytes_read += want
        return self._handle.get_slice(key)[start:stop]


def save_shard(tensors: dict[str, Any], path: Path) -> None:
    """Write one safetensors file atomically (temp file, then rename).

    Args:
        tensors: ``{key: contiguous CPU tensor}``.
        path: Destination file.
    """
    from safetensors.torch import save_file

    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    os.replace(tmp, path)
