"""Writing cells: one task writes a whole shard (:func:`write_shard`), and block reads and writes.

Each shard has exactly one writer: the engine computes the cells of a shard (in parallel slices)
and then one task writes them all — every value variable, then ``status``, ``wall_time``,
``completed_at``, ``progress`` and ``checksum``, and last ``done = 1``. Each variable's shard is
one zarr chunk, replaced whole (an atomic rename locally, one PUT on an object store), and zarr 3
has no write synchronisers, so two writers never share one. A cell is complete only when ``done``
is 1: an interrupted shard write is redone on resume, and a complete cell is never recomputed.
Cells of the shard already ``done`` (finished cells, not-applicable fillers) keep their stored
values: the shard is read and they are written back unchanged with it.

A store grown to a later T (:mod:`geosweep.sweeps.extension`) passes ``rows``: per per-cell axis
the first new row. The recomputed cells' earlier rows are compared with the stored ones, and each
variable is written from the first row that differs bitwise, or from the first new row if none
does (:func:`_rows_from`); the rows before are not written. In an adaptive sweep the last row of
the store as created (the value at T, which a longer run interpolates inside a step) is an object
of its own (:func:`geosweep.sweeps.store.layout.cell_chunks`), so growing it to a later T leaves the
objects of the earlier rows untouched. The checksums always cover every row of the cell.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from geosweep.sweeps.grid import Cell
from geosweep.sweeps.store.checksums import CHECKSUM_SKIP, ShardChecksums, dtype_name
from geosweep.sweeps.store.layout import cell_block, shard_region, sweep_shards
from geosweep.sweeps.store.stored_rows import with_stored_rows


class ArrayCache(dict):
    """``name → zarr array`` of one open group, each opened once (saves a metadata read per write)."""

    def __init__(self, group):
        super().__init__()
        self.group = group

    def __missing__(self, name: str):
        arr = self[name] = self.group[name]
        return arr

    def open_all(self) -> ArrayCache:
        """Open every array of the group at once: one trip through zarr's event loop for all of them
        (one by one, each is a trip of its own: 66 arrays take 8 ms alone, and a first shard writer
        beside busy worker threads took 0.1–0.2 s, each trip waiting for the GIL). Returns self."""
        arrays = getattr(self.group, "arrays", None)
        if arrays is None:  # not a zarr 3 group: opened on first use
            return self
        with warnings.catch_warnings():  # the checkpoint objects beside the arrays are not zarr nodes
            warnings.filterwarnings("ignore", message="Object at .* is not recognized as a component")
            for name, arr in arrays():
                self.setdefault(name, arr)
        return self


def stored_value(arr, value) -> np.ndarray:
    """``value`` as the cell's chunk stores it: padded with the fill value to the per-cell shape."""
    value = np.asarray(value, dtype=arr.dtype)
    shape = arr.shape[len(arr.shape) - value.ndim :] if value.ndim else ()
    if value.shape == shape:
        return value
    out = np.full(shape, arr.fill_value, dtype=arr.dtype)
    out[tuple(slice(0, n) for n in value.shape)] = value
    return out


def read_blocks(arrays: dict[str, Any], region: tuple[slice, ...]) -> dict[str, np.ndarray | BaseException]:
    """``{name: arr[region]}`` read concurrently (one event-loop batch); a read that fails gives its exception."""
    import asyncio

    from zarr.core.sync import sync

    names = list(arrays)

    async def read_all() -> list:
        return await asyncio.gather(*(arrays[n]._async_array.getitem(region) for n in names), return_exceptions=True)

    return {n: (r if isinstance(r, BaseException) else np.asarray(r)) for n, r in zip(names, sync(read_all()))}


_MISSING = object()


def _fill_block(
    arr,
    name: str,
    data: np.ndarray,
    values: list[dict],
    index: tuple,
    sums: ShardChecksums,
    alike: bool = False,
    stacked: list[np.ndarray] | None = None,
) -> None:
    """Put each cell's value of ``name`` into the shard block ``data`` as :func:`stored_value` stores it
    (``values[i]``: cell ``i``'s values, at ``data[index][i]``) and feed it to the cells' checksums.
    The common case — every cell has the value, of the per-cell shape — is one vectorised
    assignment; otherwise cell by cell (padded by :func:`stored_value`). ``alike``: every cell is
    known to have the value (the same names in every cell's values). ``stacked``: the values of the
    cells after ``values``' (cells computed together), arrays of the per-cell shape with a leading
    cell axis."""
    nd = len(index)
    cell_shape = tuple(int(n) for n in data.shape[nd:])
    skip = name in CHECKSUM_SKIP
    head = name.encode() + dtype_name(data.dtype)
    rows = None
    if alike or all(name in v for v in values):
        try:
            rows = np.array([v[name] for v in values], dtype=data.dtype)
        except ValueError:  # values of different shapes
            rows = None
        if rows is not None and rows.shape != (len(values), *cell_shape):
            rows = None
    if stacked:
        if rows is None and values:  # the cells of their own one by one, then those computed together
            values = values + [{name: row} for part in stacked for row in part]
        else:
            own = [] if rows is None else [rows.reshape(len(values), *cell_shape)]
            rows = np.concatenate([*own, *stacked]).astype(data.dtype, copy=False)
    if rows is not None:
        data[index] = rows
        if not skip:  # the shape as cell_checksum sees it: np.ascontiguousarray makes scalars (1,)
            sums.add_rows(head + str(cell_shape or (1,)).encode(), rows)
        return
    for i, vals in enumerate(values):
        v = vals.get(name, _MISSING)
        if v is _MISSING:
            continue
        value = stored_value(arr, v)
        data[tuple(ix[i] for ix in index)] = value
        if not skip:
            sums.add_one(i, head + str(np.shape(value) or (1,)).encode(), value)


#: one computed cell: (values by stored name, status, wall time in s)
CellOutput = tuple[dict[str, Any], int, float]


def set_blocks(blocks: list[tuple[Any, np.ndarray]], region: tuple[slice, ...]) -> None:
    """``arr[region] = data`` for every ``(arr, data)``, all at once (one trip through zarr's event
    loop, the objects encoded and stored concurrently); returns when every block is written."""
    if not all(hasattr(arr, "_async_array") for arr, _ in blocks):  # not a zarr 3 Array: one by one
        for arr, data in blocks:
            arr[region] = data
        return
    import asyncio

    from zarr.core.sync import sync

    async def write_all() -> list:
        # every write ends before this returns (also when one fails): none outlives the caller's fence
        return await asyncio.gather(
            *(arr._async_array.setitem(region, data) for arr, data in blocks), return_exceptions=True
        )

    for result in sync(write_all()):
        if isinstance(result, BaseException):
            raise result


def _stacks_fit(group, parts: list[tuple[Any, np.ndarray]], names: set[str] | None) -> bool:
    """Whether cells computed together (``parts``: (batch, rows)) can be written as their stacked values:
    every part stores ``names`` (when given; else the first part's), each of the store's per-cell shape."""
    want = names if names is not None else set(parts[0][0].values)
    nd = len(group["done"].shape)
    for batch, _ in parts:
        if set(batch.values) != want:
            return False
        for name, v in batch.values.items():
            try:
                arr = group[name]
            except KeyError:
                continue
            if v.shape[1:] != tuple(arr.shape[nd:]):
                return False
    return True


def write_shard(
    group,
    outputs: dict[Cell, CellOutput],
    rows: dict[str, int] | None = None,
    together: list | None = None,
    before_flags: Callable[[dict[Cell, int]], None] = lambda checksums: None,
    from_store: dict[Cell, tuple[int, int]] | None = None,
) -> list[Cell]:
    """Write computed cells of ONE shard: every value variable, then the flags and checksums,
    then ``done`` — each variable's shard as one whole-object write. Returns the cells written.
    ``rows`` (a grown store, :mod:`geosweep.sweeps.extension`): per-cell axis → first row to write; the rows
    before it are compared with the stored ones, and written only from the first that differs
    (the checksums still cover every row of the given values).

    Cells already ``done`` in the store are left as stored (their values are read and written
    back unchanged with the shard); so are filler cells. ``group`` is a zarr group or an
    :class:`ArrayCache` of one. The caller must be the shard's only writer.

    ``together``: cells computed together (:mod:`geosweep.sweeps.together`), as ``(batch, rows)``
    pairs — a :class:`~geosweep.sweeps.together.CellBatch` and the rows of it in this shard — whose
    stacked values are written as they are (the same bytes and checksums as one output per cell).

    ``before_flags(checksums)``: called with the checksum of each cell written once its values are
    stored and before its flags are (the engine saves the cells' final carries there).

    ``from_store``: cell → (samples, snapshots) leading rows whose values are taken from the store,
    not from ``outputs`` (cells continued from a :func:`geosweep.sweeps.carries.thin` carry, whose
    trajectory holds NaN there).
    """
    outputs, parts = _unstacked(group, outputs, list(together or []), rows)
    if not outputs and not parts:
        return []
    given = list(outputs) + [batch.cells[i] for batch, idx in parts for i in np.asarray(idx).tolist()]
    region, at, ndim = _locate(group, given)
    done = np.asarray(group["done"][region]).astype(np.int8)
    todo = done[tuple(at.T)] != 1
    if not todo.any():
        return []
    todo_list = todo.tolist()
    cells = [c for c, t in zip(given, todo_list) if t]
    stacked_rows = _still_to_write(parts, todo_list, len(outputs))
    # the shard holds finished (or filler) cells, or rows taken from the store: keep its stored values
    keep = bool(done.any()) or bool(rows) or bool(from_store)
    block = _block_reader(region, ndim, keep)
    runs = [outputs[c] for c in cells[: len(cells) - sum(len(ix) for _, ix in stacked_rows)]]
    statuses = [r[1] for r in runs] + [s for b, ix in stacked_rows for s in b.status[ix].tolist()]
    sums = ShardChecksums(cells, statuses)
    cell_index = tuple(np.ascontiguousarray(at[todo].T, dtype=np.intp))
    taken = [(from_store or {}).get(c, (0, 0)) for c in cells[: len(runs)]]
    _write_values(group, block, region, rows, [r[0] for r in runs], cell_index, sums, stacked_rows, taken)
    now = time.time()
    checksums = sums.result()
    before_flags(checksums)
    flags = {  # each flag of every written cell, as the flag array's dtype takes it
        "status": np.array(statuses, dtype=np.int8),
        "wall_time": np.array(
            [float(r[2]) for r in runs] + [w for b, ix in stacked_rows for w in b.wall_time[ix].tolist()]
        ),
        "completed_at": now,
        "progress": 1.0,
        "checksum": np.array([checksums[c] for c in cells], dtype=np.int64),
    }
    blocks = []
    for name, value in flags.items():
        arr = group[name]
        data = block(arr)
        data[cell_index] = value
        blocks.append((arr, data))
    set_blocks(blocks, region)
    done[cell_index] = 1
    group["done"][region] = done  # the completion marker, last
    return cells


def _unstacked(
    group, outputs: dict[Cell, CellOutput], parts: list, rows: dict[str, int] | None
) -> tuple[dict[Cell, CellOutput], list]:
    """``(outputs, parts)`` as :func:`write_shard` writes them: the parts computed together kept
    stacked when they fit (every cell stores the same names, of the store's shapes, and no grown
    rows), else unstacked into one output per cell (the general path)."""
    if not parts:
        return outputs, parts
    common = None
    if outputs:
        first = next(iter(outputs.values()))[0].keys()
        common = set(first) if all(v[0].keys() == first for v in outputs.values()) else None
    if not (rows or (outputs and common is None) or not _stacks_fit(group, parts, common)):
        return outputs, parts
    outputs = dict(outputs)
    for batch, idx in parts:
        for i in np.asarray(idx).tolist():
            outputs[batch.cells[i]] = ({n: v[i] for n, v in batch.values.items()}, int(batch.status[i]),
                                       float(batch.wall_time[i]))  # fmt: skip
    return outputs, []


def _locate(group, given: list[Cell]) -> tuple[tuple[slice, ...], np.ndarray, int]:
    """``(region, at, ndim)``: the one shard's region holding every cell of ``given`` (else
    ValueError), the cells' indices inside it (n, ndim) and the sweep's number of dimensions."""
    shards = sweep_shards(group)
    shape = tuple(group["done"].shape)
    at = cell_block(given)  # (n, ndim): the cells' indices, checked and localised as arrays, not cell by cell
    in_shard = at // np.asarray(shards, dtype=np.int64)
    if (in_shard != in_shard[0]).any():
        raise ValueError("write_shard: cells of more than one shard")
    region = shard_region(tuple(int(i) for i in in_shard[0]), shards, shape)
    at -= np.asarray([r.start for r in region], dtype=np.int64)
    return region, at, len(shape)


def _still_to_write(parts: list, todo: list[bool], n_outputs: int) -> list[tuple[Any, np.ndarray]]:
    """Per part computed together: (batch, its rows still to write), ``todo`` listing the single
    outputs' cells first, then each part's."""
    out = []
    at_row = n_outputs
    for batch, idx in parts:
        idx = np.asarray(idx)
        mask = np.asarray(todo[at_row : at_row + len(idx)], dtype=bool)
        if mask.any():
            out.append((batch, idx[mask]))
        at_row += len(idx)
    return out


def _block_reader(region: tuple[slice, ...], ndim: int, keep: bool) -> Callable[[Any], np.ndarray]:
    """``arr → `` the shard's block of ``arr`` to fill: as stored (``keep``: finished cells' values
    stay) or all fill values (a fresh shard: nothing read)."""
    block_shape = tuple(r.stop - r.start for r in region)

    def block(arr) -> np.ndarray:
        if keep:
            return np.array(arr[region])
        return np.full(block_shape + tuple(arr.shape[ndim:]), arr.fill_value, dtype=arr.dtype)

    return block


def _write_values(
    group, block: Callable[[Any], np.ndarray], region: tuple[slice, ...], rows: dict[str, int] | None,
    cell_values: list[dict[str, Any]], cell_index: tuple, sums: ShardChecksums, stacked_rows: list,
    taken: list[tuple[int, int]] | None = None,
) -> None:  # fmt: skip
    """Every value variable's block of the shard filled with the cells' values and written (from the
    first differing or new row when ``rows``), its checksums taken in sorted name order. ``taken``:
    per cell of ``cell_values``, the (time, snapshot) leading rows taken from the stored block instead."""
    if cell_values:
        first = cell_values[0].keys()
        alike = all(v.keys() == first for v in cell_values)  # the common case: every cell has the same names
        names = set(first) if alike else set().union(*cell_values)
    else:
        alike, names = True, set(stacked_rows[0][0].values)
    taken = taken or []
    any_taken = any(t != (0, 0) for t in taken)
    if any_taken:  # the cells' own dicts, their values of taken rows replaced (with_stored_rows)
        cell_values = [dict(v) for v in cell_values]
    values: list[Any] = []  # (arr, block) or, for grown rows, (arr, block, stored block)
    for name in sorted(names):  # the checksums take the names in sorted order
        try:
            arr = group[name]
        except KeyError:  # a value this store was not created with (a newer diagnostic): not stored
            continue
        data = block(arr)
        stored = data.copy() if rows else None
        if any_taken:
            old = data if stored is None else stored  # the block as stored, before this write fills it
            with_stored_rows(arr, name, old, cell_values, cell_index, taken)
        stacked = [b.values[name][ix] for b, ix in stacked_rows]
        _fill_block(arr, name, data, cell_values, cell_index, sums, alike, stacked)
        values.append((arr, data, stored) if rows else (arr, data))
    if rows:
        _rows_from(values, region, rows)
    else:
        set_blocks(values, region)


def _rows_from(
    values: list[tuple[Any, np.ndarray, np.ndarray]], region: tuple[slice, ...], rows: dict[str, int]
) -> list:
    """Write each ``(arr, block, stored block)`` of a shard from the first of ``rows`` along its
    per-cell axes, or from the first row where the block differs (bitwise) from what is stored, if
    earlier: the rows before are left as stored, compared instead of rewritten (a grown store's
    recomputed samples). Arrays with no such axis are written whole. Returns ``(arr, block)``."""
    by_region: dict[tuple, list[tuple[Any, np.ndarray]]] = {}
    for arr, data, stored in values:
        dims = tuple(getattr(getattr(arr, "metadata", None), "dimension_names", None) or ())
        sub = list(region) + [slice(None)] * (data.ndim - len(region))
        for k in range(len(region), data.ndim):
            if k < len(dims) and rows.get(dims[k] or "", 0) > 0:
                start = min(rows[dims[k]], data.shape[k], _first_differing(data, stored, k))
                sub[k] = slice(start, None)
        local = tuple(slice(None) if k < len(region) else sub[k] for k in range(data.ndim))
        key = tuple((s.start, s.stop) for s in sub)
        by_region.setdefault(key, []).append((arr, data[local]))
    for key, blocks in by_region.items():
        set_blocks(blocks, tuple(slice(a, b) for a, b in key))
    return [(arr, data) for arr, data, _ in values]


def _first_differing(new: np.ndarray, old: np.ndarray, axis: int) -> int:
    """The first index along ``axis`` where ``new`` and ``old`` differ bitwise (their length if none)."""
    a, b = np.ascontiguousarray(new), np.ascontiguousarray(old)
    if a.dtype.kind in "fiub" and a.dtype.itemsize in (1, 2, 4, 8):  # bitwise (NaN payloads, -0.0 included)
        a, b = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    differs = np.asarray(a != b)
    along = differs.any(axis=tuple(k for k in range(differs.ndim) if k != axis)) if differs.ndim > 1 else differs
    hits = np.flatnonzero(along)
    return int(hits[0]) if hits.size else int(a.shape[axis])
