"""Least-squares fits used by the accessor: SciPy's ``linregress`` per series, NaN-aware.

Every function takes arrays whose *last* axis is the fitted one and fits each leading index
independently, ignoring non-finite points, so it can run inside ``xr.apply_ufunc`` on dask
chunks (``dask="parallelized"``) without loading a whole store.

Why not ``xarray.DataArray.polyfit(cov=True)``: with ``skipna`` it scales the covariance by the
full length of the axis, not by the finite points, so after a failure (NaN samples) its standard
errors are too small (xarray 2026.9: 0.021 instead of 0.088 for 10 finite points of 20, the
series of ``tests/test_report_families.py::test_fit_standard_error_ignores_nan_samples``).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import linregress


def _one_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, int]:
    """(slope, its standard error, intercept, RMS residual, n) of one series' finite points."""
    w = np.isfinite(x) & np.isfinite(y)
    n = int(w.sum())
    if n < 2 or np.ptp(x[w]) == 0:
        return np.nan, np.nan, np.nan, np.nan, n
    fit = linregress(x[w], y[w])
    r = y[w] - (fit.intercept + fit.slope * x[w])
    se = fit.stderr if n >= 3 else np.nan  # two points fit exactly: no error estimate
    return fit.slope, se, fit.intercept, float(np.sqrt(np.mean(r * r))), n


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Least-squares line ``y ≈ a + b·x`` along the last axis, skipping non-finite points.

    ``x`` broadcasts against ``y``. Returns ``(b, se_b, a, rms, n)``: slope, its standard error
    (``scipy.stats.linregress``; NaN if n < 3), intercept, the RMS of the residuals
    ``sqrt(Σr²/n)`` and the number of finite points used. Slope and intercept are NaN where
    fewer than two points (or only one distinct x) remain.
    """
    y = np.asarray(y, dtype=np.float64)
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), y.shape)
    lead = y.shape[:-1]
    out = np.empty((5, *lead), dtype=np.float64)
    for idx in np.ndindex(lead):
        out[(slice(None), *idx)] = _one_line(x[idx], y[idx])
    return out[0], out[1], out[2], out[3], out[4].astype(np.int64)


def loglog_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Least-squares slope of ``log10 y`` against ``log10 x`` along the last axis.

    Points with a non-finite or non-positive x or y are skipped. Returns ``(p, se_p, log10_C,
    n, used)`` for ``y ≈ C·x^p``; ``used`` is the boolean mask of the points that entered the
    fit (same shape as ``y``).
    """
    y = np.asarray(y, dtype=np.float64)
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), y.shape)
    used = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx = np.log10(np.where(used, x, 1.0), where=used, out=np.full(y.shape, np.nan))
    ly = np.log10(np.where(used, y, 1.0), where=used, out=np.full(y.shape, np.nan))
    p, se, a, _, n = linear_fit(lx, ly)
    return p, se, a, n, used
