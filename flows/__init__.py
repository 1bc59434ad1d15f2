"""Thin Prefect flows over :mod:`sweeps`, deployments, and the ``geosweep`` CLI."""
