"""Helpers shared by the sweep tests (plain functions, no fixtures)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from geosweep.kernels.vocabulary import RUN_DEPENDENT

#: Variables that legitimately differ between two runs of the same cells (the one list).
RUN_STAMPS = RUN_DEPENDENT


def assert_stores_bitwise_equal(a: str, b: str) -> None:
    """Every physics variable of two stores identical bit for bit (NaN == NaN)."""
    da, db = xr.open_zarr(a), xr.open_zarr(b)
    assert set(da.data_vars) == set(db.data_vars)
    for name in da.data_vars:
        if name in RUN_STAMPS:
            continue
        x, y = da[name].values, db[name].values
        assert x.dtype == y.dtype, name
        if x.dtype.kind == "f":
            assert np.array_equal(x.view(np.int64), y.view(np.int64)) or np.array_equal(x, y, equal_nan=True), name
            assert np.array_equal(x, y, equal_nan=True), name
        else:
            assert np.array_equal(x, y), name
    for c in da.coords:
        assert np.array_equal(da[c].values, db[c].values), c
