"""Thin Prefect flows over :mod:`sweeps`, deployments, and the ``geosweep`` CLI."""

if __name__ != "geosweep.flows":  # the folder imported as a top-level ``flows`` (the checkout on sys.path)
    raise ImportError(f"import geosweep.flows, not {__name__}: the folder flows/ is the package geosweep.flows")
