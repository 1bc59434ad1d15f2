"""Helpers shared by the sweep tests (plain functions, no fixtures)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from geosweep.kernels.vocabulary import RUN_DEPENDENT

#: Variables that legitimately differ between two runs of the same cells (the one list).
RUN_STAMPS = RUN_DEPENDENT


def chain_ensemble(name: str, seeds: int, T: float = 0.1, dt_out: float | None = None) -> dict:
    """Issue 21's ensemble of cheap cells: 3-link chains from random initial conditions, ``seeds`` seeds ×
    2 integrators × 2 step sizes (about 0.1 ms a cell at T = 0.1); ``dt_out`` defaults to T / 10."""
    return {
        "name": name,
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": T,
        "dt_out": round(T / 10, 6) if dt_out is None else dt_out,
        "params": {"N": 3, "ic": "random", "seed": list(range(seeds))},
    }


def chain_pair(name: str, T: float = 0.5) -> dict:
    """A small chain sweep of like cells that ``extend`` continues: a fixed-step (``rkmk4``) and an
    adaptive dense-output (``rkmk45``) method, two values of g (one stacked group per method)."""
    return {
        "name": name,
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "rkmk45"],
        "h": [0.01],
        "tol": [1e-6],
        "T": T,
        "dt_out": 0.05,
        "params": {"N": [2], "g": [9.81, 9.5]},
    }


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
