"""geosweep sweeps: spec → plan (validated, models built once) → slices → kernels → labelled arrays → zarr.

Runs on any ``distributed.Client`` (a ``LocalCluster`` by default); no Prefect here.
"""

if __name__ != "geosweep.sweeps":  # the folder imported as a top-level ``sweeps`` (the checkout on sys.path)
    raise ImportError(f"import geosweep.sweeps, not {__name__}: the folder sweeps/ is the package geosweep.sweeps")

from geosweep.sweeps.execution import Execution
from geosweep.sweeps.extension import extend
from geosweep.sweeps.plan import Plan, make_plan
from geosweep.sweeps.run_options import RunOptions
from geosweep.sweeps.spec import SpecError, SweepSpec, load_spec

__all__ = ["Execution", "Plan", "RunOptions", "SpecError", "SweepSpec", "extend", "load_spec", "make_plan"]
