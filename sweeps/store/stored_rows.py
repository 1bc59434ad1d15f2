"""The leading rows of a grown cell's values taken from the store (:func:`with_stored_rows`): a cell
continued from a thin carry (:func:`geosweep.sweeps.carries.thin`) holds NaN where the carry's samples
were; the shard's writer (:func:`geosweep.sweeps.store.write_shard`) takes those rows of the stored
block instead, before it fills the block and takes the cells' checksums."""

from __future__ import annotations

from typing import Any

import numpy as np


def with_stored_rows(
    arr, name: str, stored: np.ndarray, cell_values: list[dict[str, Any]], cell_index: tuple,
    taken: list[tuple[int, int]],
) -> None:  # fmt: skip
    """Put in each cell's value of ``name`` (``cell_values[i]``, replaced in the dict) the stored
    block's leading rows along its ``time`` (``taken[i][0]`` rows) or ``snapshot`` axis
    (``taken[i][1]``); values without those axes stay. Cells with equal rows taken and values of one
    shape are done as one stacked array."""
    dims = tuple(getattr(getattr(arr, "metadata", None), "dimension_names", None) or ())
    per_cell = dims[len(cell_index) :]
    if not any(d in ("time", "snapshot") for d in per_cell):
        return
    groups: dict[tuple[int, int], list[int]] = {}
    for i, vals in enumerate(cell_values):
        if name in vals and taken[i] != (0, 0):
            groups.setdefault(taken[i], []).append(i)
    for rows, members in groups.items():
        try:  # one shape: np.stack's array in one call (a copy, converted as _fill_block converts it)
            values = np.array([cell_values[i][name] for i in members], dtype=arr.dtype)
        except ValueError:
            values = None
        if values is None or values.ndim != 1 + len(per_cell):  # values of other shapes: cell by cell
            for i in members:
                _one(arr, name, stored, cell_values[i], tuple(ix[i] for ix in cell_index), per_cell, rows)
            continue
        old = stored[tuple(np.asarray(ix)[members] for ix in cell_index)]
        old = old[(slice(None), *(slice(0, n) for n in values.shape[1:]))]
        for axis, dim in enumerate(per_cell):
            k = rows[0] if dim == "time" else rows[1] if dim == "snapshot" else 0
            if k > 0:
                at = (slice(None),) * (axis + 1) + (slice(0, k),)
                values[at] = old[at]
        for j, i in enumerate(members):
            cell_values[i][name] = values[j]


def _one(
    arr, name: str, stored: np.ndarray, vals: dict[str, Any], at: tuple, per_cell: tuple, rows: tuple[int, int]
) -> None:
    """:func:`with_stored_rows` of one cell (``at``: its index in the block)."""
    value = np.array(vals[name], dtype=arr.dtype)
    old = stored[at]
    if value.ndim != old.ndim:
        raise ValueError(f"{name}: a value of {value.ndim} axes for {old.ndim} stored ones")
    old = old[tuple(slice(0, n) for n in value.shape)]
    for axis, dim in enumerate(per_cell):
        k = rows[0] if dim == "time" else rows[1] if dim == "snapshot" else 0
        if k > 0:
            sel = (slice(None),) * axis + (slice(0, k),)
            value[sel] = old[sel]
    vals[name] = value
