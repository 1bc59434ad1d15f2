"""geosweep sweeps: spec → grid → slices → kernels → labelled arrays → zarr.

Runs on any ``distributed.Client`` (a ``LocalCluster`` by default); no Prefect here.
"""

from sweeps.spec import SpecError, SweepSpec, load_spec

__all__ = ["SpecError", "SweepSpec", "load_spec"]
