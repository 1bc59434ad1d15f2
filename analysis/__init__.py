"""Analysis of geosweep results: ``import geosweep`` registers the ``ds.geosweep`` accessor.

    import xarray as xr, geosweep
    ds = xr.open_zarr("results/sphere-omega.zarr")
    ds.geosweep.ok()                       # failed / not-applicable cells masked, with a count
    ds.geosweep.drift(window=(1.0, 5.0))   # slope ± standard error of E − E0 per cell
    ds.geosweep.classify()                 # bounded vs drifting (criterion in the docstring)
    ds.geosweep.order()                    # observed order per integrator vs h
    ds.geosweep.work_precision(cost_var="wall_time")   # pandas table

``geosweep report STORE --out DIR`` (:mod:`geosweep.analysis.report`) writes figures and an index.
"""

from __future__ import annotations

if __name__ != "geosweep.analysis":  # the folder imported as a top-level ``analysis`` (the checkout on sys.path)
    raise ImportError(f"import geosweep.analysis, not {__name__}: analysis/ is the package geosweep.analysis")

from geosweep.analysis.accessor import CellsDroppedWarning, GeosweepAccessor, sweep_dims
from geosweep.analysis.fits import linear_fit, loglog_fit

__all__ = ["CellsDroppedWarning", "GeosweepAccessor", "linear_fit", "loglog_fit", "sweep_dims"]
