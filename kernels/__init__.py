"""geosweep kernels: Numba-compiled models and integrators.

Pure computation on contiguous float64 arrays: no Dask, Prefect, zarr or file I/O.
Everything here can be used on its own from a notebook or script.

Conventions
-----------
* Time, lengths, masses are in the units of each system (dimensionless for the sphere MD).
* Arrays of per-body vectors have shape ``(n, 3)``, C-contiguous float64.
* A failing integration stops with a status code from :mod:`geosweep.kernels.status`; kernels never
  clamp, renormalise silently or return NaN for steps they completed.
"""

if __name__ != "geosweep.kernels":  # the folder imported as a top-level ``kernels`` (the checkout on sys.path)
    raise ImportError(f"import geosweep.kernels, not {__name__}: the folder kernels/ is the package geosweep.kernels")

from geosweep.kernels.status import Status

__all__ = ["Status"]
