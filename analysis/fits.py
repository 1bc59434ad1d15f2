"""Vectorised least-squares fits used by the accessor (pure NumPy, NaN-aware).

Every function takes arrays whose *last* axis is the fitted one and fits each leading index
independently, ignoring non-finite points, so it can run inside ``xr.apply_ufunc`` on dask
chunks (``dask="parallelized"``) without loading a whole store.
"""

from __future__ import annotations

import numpy as np


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Least-squares line ``y ≈ a + b·x`` along the last axis, skipping non-finite points.

    ``x`` broadcasts against ``y``. Returns ``(b, se_b, a, rms, n)``: slope, its standard error
    ``sqrt(Σr²/(n−2) / Σ(x−x̄)²)`` (NaN if n < 3), intercept, the RMS of the residuals
    ``sqrt(Σr²/n)`` and the number of finite points used. Slope and intercept are NaN where
    fewer than two points (or only one distinct x) remain.
    """
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), np.shape(y))
    y = np.asarray(y, dtype=np.float64)
    w = np.isfinite(x) & np.isfinite(y)
    xw = np.where(w, x, 0.0)
    yw = np.where(w, y, 0.0)
    n = w.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        xbar = xw.sum(axis=-1) / n
        ybar = yw.sum(axis=-1) / n
        dx = np.where(w, x - xbar[..., None], 0.0)
        dy = np.where(w, y - ybar[..., None], 0.0)
        sxx = (dx * dx).sum(axis=-1)
        sxy = (dx * dy).sum(axis=-1)
        b = np.where((n >= 2) & (sxx > 0), sxy / sxx, np.nan)
        a = ybar - b * xbar
        r = np.where(w, dy - b[..., None] * dx, 0.0)
        ssr = (r * r).sum(axis=-1)
        se = np.where(n >= 3, np.sqrt(ssr / (n - 2) / sxx), np.nan)
        rms = np.where(n >= 2, np.sqrt(ssr / n), np.nan)
    return b, se, a, rms, n.astype(np.int64)


def loglog_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Least-squares slope of ``log10 y`` against ``log10 x`` along the last axis.

    Points with a non-finite or non-positive x or y are skipped. Returns ``(p, se_p, log10_C,
    n, used)`` for ``y ≈ C·x^p``; ``used`` is the boolean mask of the points that entered the
    fit (same shape as ``y``).
    """
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), np.shape(y))
    y = np.asarray(y, dtype=np.float64)
    used = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        lx = np.where(used, np.log10(np.where(used, x, 1.0)), np.nan)
        ly = np.where(used, np.log10(np.where(used, y, 1.0)), np.nan)
    p, se, a, _, n = linear_fit(lx, ly)
    return p, se, a, n, used
