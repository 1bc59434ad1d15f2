"""geosweep sweeps: spec → plan (validated, models built once) → slices → kernels → labelled arrays → zarr.

Runs on any ``distributed.Client`` (a ``LocalCluster`` by default); no Prefect here.
"""

if __name__ != "geosweep.sweeps":  # the folder imported as a top-level ``sweeps`` (the checkout on sys.path)
    raise ImportError(f"import geosweep.sweeps, not {__name__}: the folder sweeps/ is the package geosweep.sweeps")

import importlib
from typing import TYPE_CHECKING

#: module (of this package) of each name it exports, imported on first use (PEP 562): importing one module
#: of the package (e.g. ``numba_env`` or ``credentials`` for the command line) does not import the others
_HOMES = {
    "Execution": "execution",
    "extend": "extension",
    "Plan": "plan",
    "RunOptions": "run_options",
    "make_plan": "plan",
    "SpecError": "spec",
    "SweepSpec": "spec",
    "load_spec": "spec",
}

__all__ = ["Execution", "Plan", "RunOptions", "SpecError", "SweepSpec", "extend", "load_spec", "make_plan"]

if TYPE_CHECKING:
    from geosweep.sweeps.execution import Execution
    from geosweep.sweeps.extension import extend
    from geosweep.sweeps.plan import Plan, make_plan
    from geosweep.sweeps.run_options import RunOptions
    from geosweep.sweeps.spec import SpecError, SweepSpec, load_spec


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
