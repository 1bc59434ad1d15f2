"""``geosweep validate SPEC``: check a spec and estimate its cost."""

from __future__ import annotations

import argparse
import time

from geosweep.flows import firstrun
from geosweep.sweeps.compact import axis_text
from geosweep.sweeps.estimate import estimate
from geosweep.sweeps.plan import make_plan


def cmd_validate(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    first_run = firstrun.FirstRun(args.spec)
    cold = first_run.prepare()
    plan = make_plan(args.spec)
    first_run.warm(plan)
    if cold:
        first_run.mark_warm()
    compiled = time.perf_counter() - t0
    grid = plan.grid
    dims = ", ".join(f"{d}={n}" for d, n in zip(grid.dims, grid.shape))
    print(f"{args.spec}: valid. {grid.size} cells ({dims}); time samples {plan.spec.n_time}")
    print("axes: " + "; ".join(axis_text(axis.name, axis.values) for axis in grid.axes))
    est = estimate(
        plan,
        args.workers,
        prefect=not args.no_prefect,
        cold=False,  # compiled by now, here
        # measured here when this validate compiled; else the reference machine's figure
        compile_seconds=compiled if first_run.compiled else firstrun.COLD_SECONDS["family"],
        slice_seconds=args.slice_seconds,
    )
    for line in est.lines():
        print(line)
    if first_run.compiled:
        print(f"(this validate compiled the kernels, {compiled:.0f} s: runs on this machine skip it)")
    return 0
