"""Writing computed cells shard by shard (the caller is the only writer of those shards), and the one line a
worker task returns instead of raising when the store refuses its writes (:class:`StoreFault`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosweep.sweeps import checkpoints, extension, visibility
from geosweep.sweeps.cells import CellRun, run_arrays
from geosweep.sweeps.gc_policy import fewer_collections
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.lease import LeaseLost, StoreWriteError, fence, store_write_error
from geosweep.sweeps.store import StoreRef, group_by_shard, sweep_shards, write_shard
from geosweep.sweeps.together import CellBatch


def _carry_saver(
    ref: StoreRef, index: tuple[int, ...], kept: dict[Cell, dict | None], together: list[tuple[CellBatch, np.ndarray]]
) -> Callable[[dict[Cell, int]], None]:
    """What the shard's writer calls with the checksums of the cells it writes, before their flags:
    their final carries saved, each sealed with its cell and checksum (:func:`geosweep.sweeps.extension.sealed`);
    without carries kept (``ref.carries`` off) any older carry of theirs is dropped."""

    def save(checksums: dict[Cell, int]) -> None:
        if not ref.carries:
            gone = {c: None for c in checksums}
            extension.save_shard(ref, index, gone)
            return
        mine = {c: extension.sealed(a, c, checksums[c]) for c, a in kept.items() if c in checksums and a is not None}
        stacked = []
        for b, ix in together:
            cells, arrays = b.carries_of(ix)
            sel = [k for k, c in enumerate(cells) if c in checksums]
            if sel and len(sel) < len(cells):
                cells, arrays = [cells[k] for k in sel], {n: a[sel] for n, a in arrays.items()}
            if sel:
                stacked.append((cells, extension.sealed_stack(cells, arrays, [checksums[c] for c in cells])))
        extension.save_shard(ref, index, mine, stacked)

    return save


def write_runs(ref: StoreRef, runs: list[CellRun | CellBatch], group=None) -> list[tuple]:
    """Write computed cells shard by shard (:func:`geosweep.sweeps.store.write_shard`; the caller is the
    only writer of those shards), then drop their checkpoints. ``runs``: :func:`compute_slice`'s items
    (cells computed together as :class:`CellBatch`). Returns ``(cell, status, wall time, segments,
    resumed, ran)`` per cell, ``ran`` False for a cell found already done."""
    group = group if group is not None else run_arrays(ref, "r+")
    batches = [r for r in runs if isinstance(r, CellBatch)]
    own = [r for r in runs if not isinstance(r, CellBatch)]
    computed = {r[0]: (r[6], r[1], r[2]) for r in own if r[5]}
    extra = {r[0]: (r[7], r[8]) if len(r) > 8 else (None, (0, 0)) for r in own if r[5]}
    # the rows of cells continued from thin carries whose values are the store's
    from_store = {r[0]: r[9] for r in own if r[5] and len(r) > 9 and r[9] != (0, 0)}
    row_of = {c: (b, i) for b in batches for i, c in enumerate(b.cells)}  # a cell computed together: its row
    written: set[Cell] = set()
    for index, cells in group_by_shard([*computed, *row_of], sweep_shards(group)).items():
        mine = [c for c in cells if c in computed]
        parts: dict[int, tuple[CellBatch, list[int]]] = {}
        for c in cells:
            if c in row_of:
                b, i = row_of[c]
                parts.setdefault(id(b), (b, []))[1].append(i)
        together = [(b, np.asarray(ix, dtype=np.intp)) for b, ix in parts.values()]
        # the final carries after the values and before the flags: a cell marked done always has
        # the carry of its values, sealed with the checksum written for them
        keep = _carry_saver(ref, index, {c: extra[c][0] for c in mine}, together)
        rows = {"time": min((extra[c][1][0] for c in mine), default=0),
                "snapshot": min((extra[c][1][1] for c in mine), default=0)}  # fmt: skip
        with fence(ref):  # this run still holds the store's lease, for the whole shard write
            stored_rows = {c: from_store[c] for c in mine if c in from_store}
            written.update(
                write_shard(
                    group,
                    {c: computed[c] for c in mine},
                    rows if any(rows.values()) else None,
                    together,
                    keep,
                    stored_rows,
                )
            )
    saved = checkpoints.present(ref) if written else set()  # one listing per write, not a probe per cell
    for cell in written if saved else ():
        if checkpoints.cell_key(cell) in saved:
            checkpoints.delete(ref, cell)
    reports = [(r[0], r[1], r[2], r[3], r[4], r[0] in written) for r in own]
    return reports + [(*r[:5], r[0] in written) for b in batches for r in b.reports()]


@dataclass(frozen=True)
class StoreFault:
    """What a worker task returns instead of raising when the store refuses its writes: the lease
    was lost (``lost``) or a write failed for good (disk full, read-only). The driver stops the
    run with this one line; no retry, no worker traceback in the logs."""

    message: str
    lost: bool

    def error(self) -> Exception:
        return LeaseLost(self.message) if self.lost else StoreWriteError(self.message)


def store_fault(ref: StoreRef, exc: BaseException) -> StoreFault | None:
    """The :class:`StoreFault` of ``exc`` (a lost lease or a store write no retry fixes), else None."""
    if isinstance(exc, LeaseLost):
        return StoreFault(str(exc), True)
    if isinstance(exc, StoreWriteError):
        return StoreFault(str(exc), False)
    if isinstance(exc, OSError) and (err := store_write_error(ref.url, exc)) is not None:
        return StoreFault(str(err), False)
    return None


def guarded(ref: StoreRef, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a worker task: a lost lease or a refused write becomes a :class:`StoreFault`."""
    try:
        visibility.ensure_visible(ref)  # a worker that joined late proves it sees this run's store
        with fewer_collections():
            return fn(*args)
    except Exception as exc:
        if (fault := store_fault(ref, exc)) is not None:
            return fault
        raise
