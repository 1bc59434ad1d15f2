"""How a store is cut into objects.

A store is one xarray Dataset: the sweep axes (``integrator``, ``h``, swept parameters) followed by
per-cell dimensions (``time``, ``component``, ``body`` …). Every variable is split into *shards* —
blocks of neighbouring cells along the sweep axes (:func:`shard_shape`: 64 cells in small stores,
growing with the store to about :data:`TARGET_SHARDS` shards, bounded by bytes and by the work an
interruption can lose, larger for cheap cells: at least :data:`MIN_SHARD_SECONDS` of work). A shard
is one zarr chunk, so one object per variable per shard, and ``xr.open_zarr`` gives dask chunks of
exactly one shard. Along the per-cell axes a chunk holds the whole cell, except in a sweep with an
adaptive integrator, where the last row of ``time``/``snapshot`` (the value at T) is an object of
its own (:func:`cell_chunks`). Store format 2 split each shard object into one-cell inner chunks of
the zarr sharding codec, and stores written with one cell per chunk have no shards; both are still
read, resumed, verified and repaired, each cell of the latter being its own shard
(:func:`sweep_shards` reads the layout of an open store).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geosweep.sweeps.grid import Cell

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan

#: the run flags every store holds per cell besides its values (see :mod:`geosweep.sweeps.store.schema`)
SWEEP_FLAGS = ("status", "wall_time", "completed_at", "progress", "checksum", "done")


#: Cells per shard of a small store (below ``SHARD_CELLS × TARGET_SHARDS`` cells; a monkeypatched 1
#: gives one cell per object in small test stores).
SHARD_CELLS = 64
#: Shards per variable a large store aims at: reading a variable of the whole store is this many
#: object reads (each ~cells/TARGET_SHARDS cells).
TARGET_SHARDS = 64
#: Most cells per shard (any store size).
MAX_SHARD_CELLS = 4096
#: Most bytes of one variable's shard (uncompressed): bounds the memory of a shard write.
SHARD_BYTES = 32 * 2**20
#: Most estimated single-core seconds of short cells per shard: what an interruption before the
#: shard write can lose (cells of :data:`KEEP_SECONDS` or more are kept as complete checkpoints
#: until their shard is written, so they count as this much).
SHARD_SECONDS = 128.0
#: Fewest estimated single-core seconds of work per shard where cells are cheap: a shard write costs
#: some tens of ms (one object per variable), which sub-millisecond cells in shards of
#: :data:`SHARD_CELLS` paid again every few ms of work — such cells share larger shards (measured in
#: benchmarks/README.md, "Cluster-scale stores"; up to :data:`MAX_SHARD_CELLS` and 1/:data:`MIN_SHARDS`
#: of the grid). Tests that want one cell per object set it to 0 along with ``SHARD_CELLS``.
MIN_SHARD_SECONDS = 0.05
#: (as ``geosweep.sweeps.engine.KEEP_SECONDS``) a finished cell this long survives an interruption as a checkpoint
KEEP_SECONDS = 2.0


def cell_bytes(plan: Plan) -> dict[str, int]:
    """Uncompressed bytes per cell of each stored variable (values and run flags)."""
    sizes = plan.sizes
    out = {}
    for d in plan.famdef.diagnostics(plan.first_model):
        out[d.name] = int(np.prod([sizes[x] for x in d.dims], dtype=np.int64)) * np.dtype(d.dtype).itemsize
    for name in SWEEP_FLAGS:
        out[name] = 8
    return out


#: Fewest shards a store is split into (when it has enough cells): a shard becomes visible in
#: the store only once all its cells are done, so even small sweeps show completed cells before
#: the end (long cells show theirs as complete checkpoints meanwhile).
MIN_SHARDS = 2


def short_cell_seconds(plan: Plan, samples: int = 256) -> float:
    """Mean estimated seconds of a cell (each counted as at most :data:`KEEP_SECONDS`), over up to
    ``samples`` cells spread over the grid."""
    size = plan.grid.size
    step = max(1, size // samples)
    shape = plan.grid.shape
    cost = plan.cost
    if len(plan.models) == int(np.prod(plan.grid.combination_shape)):  # a whole plan: its per-step costs
        per_step, nm = plan.per_step(), plan.grid.n_method_axes  # (plan.per_step is kept: no cost call per cell)

        def cost(cell: Cell) -> float:
            return plan.grid.cost(cell, lambda _name: float(per_step[(cell[0], *cell[nm:])]))

    costs = [min(cost(tuple(int(i) for i in np.unravel_index(k, shape))), KEEP_SECONDS) for k in range(0, size, step)]
    return float(np.mean(costs)) if costs else 0.0


def shard_cells(plan: Plan) -> int:
    """Most cells of one shard: :data:`SHARD_CELLS`, or ``cells / TARGET_SHARDS`` in a large store
    (at most :data:`MAX_SHARD_CELLS`), bounded by :data:`SHARD_SECONDS` of short-cell work, at least
    :data:`MIN_SHARD_SECONDS` of work (cheap cells), bounded by :data:`SHARD_BYTES` per variable and by
    1/:data:`MIN_SHARDS` of the grid."""
    size = plan.grid.size
    per_cell = max(cell_bytes(plan).values())
    target = min(MAX_SHARD_CELLS, max(SHARD_CELLS, -(-size // TARGET_SHARDS)))
    seconds = short_cell_seconds(plan)
    if seconds > 0:
        if target > SHARD_CELLS:  # a large store: keep the work lost to an interruption bounded
            target = max(SHARD_CELLS, min(target, int(SHARD_SECONDS / seconds)))
        target = max(target, min(MAX_SHARD_CELLS, math.ceil(MIN_SHARD_SECONDS / seconds)))  # cheap cells
    return max(1, min(target, SHARD_BYTES // max(per_cell, 1), size // MIN_SHARDS))


def shard_shape(plan: Plan) -> tuple[int, ...]:
    """Shard extents along the sweep axes: up to :func:`shard_cells` cells, taken from the first
    axes (integrator, step size …) outward. Each shard is one zarr chunk (format 3)."""
    budget = shard_cells(plan)
    out = []
    n = 1
    for extent in plan.grid.shape:
        take = max(1, min(extent, budget // n))
        out.append(take)
        n *= take
    return tuple(out)


def objects_estimate(plan: Plan) -> dict[str, float]:
    """Objects and bytes (uncompressed upper bound) of the finished store of ``plan``.

    ``objects`` counts shard objects plus metadata (a ``zarr.json`` per array and the group,
    the consolidated copy); ``per_cell`` divides by the runnable cells."""
    shards = shard_shape(plan)
    n_shards = int(np.prod([-(-e // s) for e, s in zip(plan.grid.shape, shards)], dtype=np.int64))
    per_cell = cell_bytes(plan)
    n_vars = len(per_cell)
    n_coords = len(plan.grid.dims) + len(plan.sizes) + 6
    objects = n_vars * n_shards + n_vars + n_coords * 2 + 1
    cells = plan.grid.size
    runnable = plan.grid.runnable()
    return {
        "objects": float(objects),
        "bytes": float(sum(per_cell.values()) * cells),
        "shards": float(n_shards),
        "cells_per_shard": float(np.prod(shards)),
        "per_cell": objects / max(runnable, 1),
    }


#: per-cell axes whose last row is the state at T
LAST_AT_T = ("time", "snapshot")


def cell_chunks(dims: tuple[str, ...], cell_shape: tuple[int, ...], last_apart: bool) -> tuple[int, ...]:
    """Chunk extents along a variable's per-cell ``dims``: the whole cell, except that with
    ``last_apart`` (a sweep with an adaptive integrator) the last row of ``time``/``snapshot`` — the
    value at T — is an object of its own. An adaptive run with dense output clips its last step to
    land on T; a run to a later T steps across T and interpolates there, so growing the store to a
    later T (:mod:`geosweep.sweeps.extension`) changes the rows inside that step — the last one only
    when the steps are shorter than the output interval — and the objects of the earlier rows stay."""
    return tuple(max(n - 1, 1) if last_apart and d in LAST_AT_T else n for d, n in zip(dims, cell_shape))


def sweep_shards(group) -> tuple[int, ...]:
    """Shard extents along the sweep axes of an open store (1, 1, … for a store without shards)."""
    arr = group["done"]  # sweep dims only
    return tuple(int(n) for n in (getattr(arr, "shards", None) or arr.chunks))


def shard_of(cell: Cell, shards: tuple[int, ...]) -> tuple[int, ...]:
    """Index of the shard holding ``cell``."""
    return tuple(int(c) // s for c, s in zip(cell, shards))


def shard_region(index: tuple[int, ...], shards: tuple[int, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """The sweep-axis slices of shard ``index`` (edge shards are cut at the array's shape)."""
    return tuple(slice(i * s, min((i + 1) * s, n)) for i, s, n in zip(index, shards, shape))


def cell_block(cells: Sequence[Cell]) -> np.ndarray:
    """``cells`` as one ``(n, ndim)`` int64 array: a slice's task argument (Dask looks for futures in every
    item of a list argument — 2·10⁴ cells: 80 000 items walked — and pickles each tuple; an array it
    passes through as one buffer), a carries object's cell index, a grouping's input."""
    return np.asarray(cells, dtype=np.int64).reshape(len(cells), -1)


def group_by_shard(cells: list[Cell], shards: tuple[int, ...]) -> dict[tuple[int, ...], list[Cell]]:
    """``cells`` grouped by shard, in order of first appearance (shards and cells as tuples of ints).
    Many cells are grouped with NumPy: per cell in Python this cost ~9 µs of a 0.1 ms cell's run."""
    if len(cells) < 64:
        out: dict[tuple[int, ...], list[Cell]] = {}
        for cell in cells:
            out.setdefault(shard_of(cell, shards), []).append(tuple(int(i) for i in cell))
        return out
    arr = cell_block(cells)
    keys, first, inverse = np.unique(arr // np.asarray(shards, dtype=np.int64), axis=0, return_index=True,
                                     return_inverse=True)  # fmt: skip
    members: list[list[Cell]] = [[] for _ in range(len(keys))]
    for cell, g in zip(map(tuple, arr.tolist()), inverse.reshape(-1).tolist()):
        members[g].append(cell)
    return {tuple(keys[g].tolist()): members[g] for g in np.argsort(first, kind="stable").tolist()}


def shape_of(region: tuple[slice, ...]) -> tuple[int, ...]:
    """Extents of a region of slices."""
    return tuple(r.stop - r.start for r in region)
