"""Cell checksums: a 63-bit hash of a cell's status and every stored value (name, dtype, shape,
bytes; the run-dependent timings and stamps left out), stored in ``checksum`` when the cell is
written and checked by ``geosweep verify`` (:mod:`geosweep.sweeps.store.integrity`) and by the flag
repair (:mod:`geosweep.sweeps.repair`). :func:`cell_checksum` hashes one cell; :func:`shard_checksums`
and :class:`ShardChecksums` hash many cells of a shard at once, bitwise the same.
"""

from __future__ import annotations

import hashlib

import numpy as np

from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.sweeps.grid import Cell

#: stored values that differ from run to run (timings, stamps): not part of a cell's checksum
CHECKSUM_SKIP = RUN_DEPENDENT


#: process-wide state: each dtype's name as checksummed, computed once per dtype
_DTYPE_NAMES: dict[np.dtype, bytes] = {}


def dtype_name(dtype: np.dtype) -> bytes:
    """``str(dtype).encode()``, remembered (numpy builds the name anew on every call)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).encode()
    return name


def cell_checksum(arrays: dict[str, np.ndarray], status: int) -> int:
    """A 63-bit checksum of a cell: its status and every stored value (name, dtype, bytes),
    timings (:data:`CHECKSUM_SKIP`) left out, so identical physics gives identical checksums."""
    h = _checksum_start(status)
    for name in sorted(arrays):
        if name in CHECKSUM_SKIP:
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + dtype_name(a.dtype) + str(a.shape).encode())
        h.update(a.tobytes())
    return _checksum_end(h)


def _checksum_start(status: int):
    """The hash :func:`cell_checksum` feeds, with the status in it."""
    h = hashlib.blake2b(digest_size=8)
    h.update(str(int(status)).encode())
    return h


def _checksum_end(h) -> int:
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1) or 1


#: bytes of cell rows hashed at once by :func:`shard_checksums` (bounds its extra memory)
CHECKSUM_BATCH_BYTES = 64 << 20


def shard_checksums(blocks: dict[str, np.ndarray], status: np.ndarray, cells: np.ndarray | None = None) -> np.ndarray:
    """:func:`cell_checksum` of many cells of one shard at once, bitwise the same.

    ``blocks``: each stored variable's block over the shard (sweep axes first, then the per-cell
    axes), ``status``: the block of status codes (the sweep axes), ``cells``: boolean mask over
    them of the cells to check (default: all). Returns the checksums of those cells, in C order
    of the sweep axes. Each cell's bytes are laid out once for all cells (header and values of
    every variable, by name) and hashed row by row: no per-variable Python work per cell."""
    status = np.asarray(status)
    mask = np.ones(status.shape, bool) if cells is None else np.asarray(cells, bool)
    picked = np.flatnonzero(mask.ravel())
    parts: list[tuple[np.ndarray, bytes]] = []  # (per-cell bytes (n_cells, k), header) by variable
    for name in sorted(blocks):
        if name in CHECKSUM_SKIP:
            continue
        a = np.asarray(blocks[name])
        cell_shape = a.shape[status.ndim :] or (1,)  # np.ascontiguousarray of a cell: at least 1-d
        header = name.encode() + dtype_name(a.dtype) + str(cell_shape).encode()
        rows = np.ascontiguousarray(a.reshape(status.size, -1)[picked]).view(np.uint8)
        parts.append((rows.reshape(len(picked), -1), header))
    width = sum(len(h) + r.shape[1] for r, h in parts)
    step = max(1, CHECKSUM_BATCH_BYTES // max(width, 1))
    texts = {c: str(c).encode() for c in np.unique(status).tolist()}
    codes = [texts[c] for c in status.ravel()[picked].tolist()]
    digests: list[bytes] = []
    for lo in range(0, len(picked), step):
        hi = min(lo + step, len(picked))
        pieces = []
        for rows, header in parts:
            pieces.append(np.broadcast_to(np.frombuffer(header, np.uint8), (hi - lo, len(header))))
            pieces.append(rows[lo:hi])
        batch = np.concatenate(pieces, axis=1) if pieces else np.zeros((hi - lo, 0), np.uint8)
        for k in range(hi - lo):
            h = hashlib.blake2b(codes[lo + k], digest_size=8)
            h.update(batch[k])
            digests.append(h.digest())
    sums = np.frombuffer(b"".join(digests), dtype="<u8") & np.uint64((1 << 63) - 1)  # as int.from_bytes(…, "little")
    return np.where(sums == 0, np.uint64(1), sums).astype(np.int64)


class ShardChecksums:
    """The :func:`cell_checksum` of each cell of a shard write, fed variable by variable in sorted
    name order: whole shards of values at once (:meth:`add_rows`, one hash update per cell at the
    end) or one cell's value (:meth:`add_one`) — the same bytes in the same order either way."""

    def __init__(self, cells: list[Cell], statuses: list[int]) -> None:
        self.cells = cells
        self.hashes = [_checksum_start(s) for s in statuses]
        self.pending: list[np.ndarray] = []

    def add_rows(self, head: bytes, rows: np.ndarray) -> None:
        """``head`` then row ``i`` of ``rows`` (C order) into cell ``i``'s hash."""
        n = len(self.cells)
        self.pending.append(np.broadcast_to(np.frombuffer(head, dtype=np.uint8), (n, len(head))))
        self.pending.append(np.ascontiguousarray(rows).reshape(n, -1).view(np.uint8))

    def add_one(self, i: int, head: bytes, value: np.ndarray) -> None:
        self._flush()
        self.hashes[i].update(head)
        self.hashes[i].update(np.ascontiguousarray(value).tobytes())

    def _flush(self) -> None:
        if self.pending:
            joined = np.concatenate(self.pending, axis=1)
            for h, row in zip(self.hashes, joined):
                h.update(row)
            self.pending = []

    def result(self) -> dict[Cell, int]:
        self._flush()
        return {c: _checksum_end(h) for c, h in zip(self.cells, self.hashes)}
