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
) -> list[dict[str, Any]]:  # fmt: skip
    """``cell_values`` with each cell's value of ``name`` holding the stored block's leading rows along
    its ``time`` (``taken[i][0]`` rows) or ``snapshot`` axis (``taken[i][1]``); other values as they are."""
    dims = tuple(getattr(getattr(arr, "metadata", None), "dimension_names", None) or ())
    nd = len(cell_index)
    per_cell = dims[nd:]
    if not any(d in ("time", "snapshot") for d in per_cell):
        return cell_values
    out = list(cell_values)
    for i, vals in enumerate(cell_values):
        if name not in vals or taken[i] == (0, 0):
            continue
        value = np.array(vals[name], dtype=arr.dtype)  # a copy, as _fill_block converts it
        old = stored[tuple(ix[i] for ix in cell_index)]
        if value.ndim != old.ndim:
            raise ValueError(f"{name}: a value of {value.ndim} axes for {old.ndim} stored ones")
        old = old[tuple(slice(0, n) for n in value.shape)]
        for axis, dim in enumerate(per_cell):
            k = taken[i][0] if dim == "time" else taken[i][1] if dim == "snapshot" else 0
            if k > 0:
                at = (slice(None),) * axis + (slice(0, min(k, value.shape[axis])),)
                value[at] = old[at]
        out[i] = {**vals, name: value}
    return out
