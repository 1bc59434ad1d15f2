"""What a sweep will cost before it runs (``geosweep validate``): cells, core-seconds, wall time, store.

Every parameter combination is costed on its own model: a few steps of each integrator (and
each tolerance of an adaptive one) are timed on this machine on each combination (CPU time,
so a busy machine does not inflate them), so a sweep over the chain's ``N`` is costed per
``N``. Beyond :data:`PROBED_COMBINATIONS` combinations only the first is probed and the
family's cost model (``FamilyDef.cost_per_step``) carries it to the others. Adaptive cells take
their steps per unit time from the probe instead of a guess. Not-applicable cells (the fillers
of a mixed ``h``/``tol`` grid) cost nothing and are counted apart.

Wall time = compile (cold Numba cache only) + start-up and flow overhead + the longest worker's
share of the slices (longest first onto the least loaded worker) + writing the store. The
constants below were measured on the 2-core reference machine with ``geosweep demo``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geosweep import config
from geosweep.sweeps.cell_cost import Probes, cell_costs, cost_array, probe
from geosweep.sweeps.compact import per_value_text
from geosweep.sweeps.execution import runs_in_driver
from geosweep.sweeps.grid import Cell, slice_bounds, slice_target
from geosweep.sweeps.plan import Plan, make_plan
from geosweep.sweeps.store import shard_shape
from geosweep.sweeps.store_size import store_bytes, store_objects

#: the cost's and the store size's names given here too
__all__ = ["Estimate", "Probes", "cell_costs", "cost_array", "estimate", "makespan", "probe", "store_bytes"]

#: start-up outside the cells (s): imports and a warm kernel load, the local Dask cluster, the store
#: template; with Prefect also its temporary server (when no PREFECT_API_URL is set; it boots while the
#: kernels load, so only its tail counts) and the flow's tasks
OVERHEAD_SECONDS = {"dask": 3.0, "prefect": 5.0, "prefect_server": 2.0, "driver": 0.5}
#: per cell outside its integration (s): model hand-over, values and flags into the store
CELL_OVERHEAD_SECONDS = 0.0005  # measured 0.23 ms serial, 0.32 ms on 2 workers (bench_scale.py, 10⁴ cells)
#: the same for a cell computed together with others (:mod:`geosweep.sweeps.together`; measured 0.03 ms
#: serial and 0.02 ms on 2 worker threads, bench_scale.py, 10⁵ cells)
CELL_OVERHEAD_TOGETHER_SECONDS = 0.00005
#: per store shard (s): its write (one object per variable), its carries and its task hand-over
SHARD_OVERHEAD_SECONDS = 0.05
#: cores busy with kernels run this much slower than one alone (shared caches and memory bandwidth;
#: 1.83x on 2 cores for 16 sphere-MD cells, benchmarks/bench_sweep_throughput.py)
PARALLEL_EFFICIENCY = 0.9


@dataclass
class Estimate:
    """The cost of a sweep. Seconds are wall-clock on ``workers`` local cores unless named core-seconds."""

    cells: int
    runnable: int
    not_applicable: int
    core_seconds: float  # integration on one core, summed over the runnable cells
    compile_seconds: float  # what a cold Numba cache adds (in wall_seconds only when ``cold``)
    overhead_seconds: float  # start-up, flow, per-cell store writes
    cells_seconds: float  # the slices on the workers (longest worker)
    wall_seconds: float
    workers: int
    store_bytes: float
    store_objects: int
    probes: int
    by_axis: dict[str, dict[Any, float]] = field(default_factory=dict)  # core-seconds per swept value
    cold: bool = False  # the run compiles the kernels first
    in_driver: bool = False  # a few short cells: run in the driver's process without Dask (execution.runs_in_driver)

    def lines(self) -> list[str]:
        """Human-readable summary (what ``geosweep validate`` prints)."""
        out = [
            f"cells: {self.runnable} to run, {self.not_applicable} not applicable",
            f"work: ≈ {_num(self.core_seconds)} core-seconds of integration ({self.probes} integrator probes)",
            f"wall: ≈ {_num(self.wall_seconds)} s "
            + ("in this process (a few short cells: no Dask)" if self.in_driver else f"on {self.workers} worker(s)")
            + " = "
            + (f"compile {_num(self.compile_seconds)} s + " if self.cold else "")
            + f"start-up, flow and writes {_num(self.overhead_seconds)} s + cells {_num(self.cells_seconds)} s"
            + ("" if self.cold else f"; + {_num(self.compile_seconds)} s to compile where the Numba cache is cold"),
            f"store: ≈ {_bytes(self.store_bytes)} in {self.store_objects} objects",
        ]
        for axis, per in self.by_axis.items():  # bounded: a large axis by count, range and extremes
            out.append(per_value_text(f"core-seconds by {axis}", per, _num))
        return out


def _num(x: float) -> str:
    return f"{x:.2g}" if abs(x) < 10 else f"{x:.0f}"


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"  # pragma: no cover


# ---------------------------------------------------------------------------------------
# wall time
# ---------------------------------------------------------------------------------------
def makespan(costs: list[float], workers: int) -> float:
    """Time until the last of ``workers`` finishes ``costs`` taken longest first by the least loaded worker."""
    loads = [0.0] * max(workers, 1)
    for c in sorted(costs, reverse=True):
        i = loads.index(min(loads))
        loads[i] += c
    return max(loads)


def _together_cells(plan: Plan, planned: np.ndarray, mask: np.ndarray) -> int:
    """How many runnable cells a run computes together (:mod:`geosweep.sweeps.together`; ``planned``: the
    plan's cost of every cell, which decides it)."""
    from geosweep.sweeps.together import joint_mask

    return int((mask & joint_mask(plan, planned)).sum())


def estimate(
    source: Plan | str | os.PathLike | dict,
    workers: int | None = None,
    *,
    prefect: bool = True,
    temporary_server: bool | None = None,
    cold: bool = False,
    compile_seconds: float = 0.0,
    slice_seconds: float = 10.0,
    cores: int | None = None,
    probes: Probes | None = None,
    costs: Mapping[Cell, float] | None = None,
    log: Callable[[str], None] | None = None,
) -> Estimate:
    """Estimate a sweep run with ``workers`` local workers (default: all cores).

    ``prefect``: through the Prefect flow (``temporary_server``: on a temporary server, default
    when no ``PREFECT_API_URL`` is set); ``cold``: the run first compiles for ``compile_seconds``
    (reported either way); ``cores`` bounds the
    parallelism (default: this machine's). Runs the probes (a fraction of a second) unless given
    ``probes`` (of :func:`probe`) or ``costs`` (single-core seconds per runnable cell).
    """
    plan = make_plan(source)
    cores = cores or os.cpu_count() or 1
    workers = workers or cores
    parallel = min(workers, cores)
    grid = plan.grid
    if costs is None:
        probes = probe(plan) if probes is None else probes
        cost, mask = cost_array(plan, probes), grid.applicable_mask()
    else:  # single-core seconds per cell, e.g. measured
        cost, mask = _given_costs(grid.shape, costs)
    runnable = int(mask.sum())
    # slices as the run cuts them (by the grid's cost model, plan.cost), each costing its cells' estimate
    planned = plan.cost_array()
    try:
        in_driver = runs_in_driver(planned[mask])
    except ValueError:  # a bad GEOSWEEP_IN_DRIVER_BELOW: the run refuses it
        in_driver = False
    if in_driver:
        workers = parallel = 1
    cells_seconds = _cells_seconds(plan, cost, mask, planned, slice_seconds, workers, parallel)
    if temporary_server is None:
        temporary_server = not config.environ("PREFECT_API_URL")
    start_up = "driver" if in_driver else "dask"
    overhead = _overhead(plan, mask, planned, parallel, start_up, prefect, temporary_server)
    est = Estimate(
        cells=grid.size,
        runnable=runnable,
        not_applicable=grid.size - runnable,
        core_seconds=float(cost.sum()),
        compile_seconds=compile_seconds,
        overhead_seconds=overhead,
        cells_seconds=cells_seconds,
        wall_seconds=(compile_seconds if cold else 0.0) + overhead + cells_seconds,
        cold=cold,
        workers=workers,
        store_bytes=store_bytes(plan),
        store_objects=store_objects(plan),
        probes=len(probes or ()),
        by_axis=_by_axis(plan, cost),
        in_driver=in_driver,
    )
    if log:
        log(f"estimate of {plan.spec.name}: {est}")
    return est


def _given_costs(shape: tuple[int, ...], costs: Mapping[Cell, float]) -> tuple[np.ndarray, np.ndarray]:
    """The cost array and the runnable mask of single-core seconds given per cell."""
    cost, mask = np.zeros(shape), np.zeros(shape, dtype=bool)
    for c, s in costs.items():
        cost[c], mask[c] = s, True
    return cost, mask


def _cells_seconds(
    plan: Plan, cost: np.ndarray, mask: np.ndarray, planned: np.ndarray, slice_seconds: float, workers: int,
    parallel: int,
) -> float:  # fmt: skip
    """Wall seconds of the slices on ``parallel`` cores: cut as the run cuts them (by the plan's cost
    model ``planned``), each costing its cells' estimate ``cost``, slowed by the shared cores."""
    grid = plan.grid
    efficiency = PARALLEL_EFFICIENCY if parallel > 1 else 1.0
    sizing = grid.ordered_costs(planned, mask)
    bounds = slice_bounds(sizing, slice_target(sizing, slice_seconds, workers))
    del sizing
    ordered = grid.ordered_costs(cost, mask)
    slice_costs = [float(ordered[a:b].sum()) / efficiency for a, b in zip(bounds[:-1], bounds[1:])]
    return makespan(slice_costs, parallel)


def _overhead(
    plan: Plan, mask: np.ndarray, planned: np.ndarray, parallel: int, start_up: str, prefect: bool,
    temporary_server: bool,
) -> float:  # fmt: skip
    """Seconds outside the cells' integration: start-up (``start_up``: "driver" or "dask"; or the
    Prefect flow's, with its temporary server), every cell's and every shard's hand-over and write."""
    overhead = OVERHEAD_SECONDS[start_up]
    if prefect:
        overhead = OVERHEAD_SECONDS["prefect"] + (OVERHEAD_SECONDS["prefect_server"] if temporary_server else 0.0)
    runnable, joint = int(mask.sum()), _together_cells(plan, planned, mask)
    overhead += (CELL_OVERHEAD_SECONDS * (runnable - joint) + CELL_OVERHEAD_TOGETHER_SECONDS * joint) / parallel
    extents = shard_shape(plan)
    n_shards = int(np.prod([-(-e // s) for e, s in zip(plan.grid.shape, extents)], dtype=np.int64))
    return overhead + SHARD_OVERHEAD_SECONDS * n_shards / parallel


def _by_axis(plan: Plan, cost: np.ndarray) -> dict[str, dict[Any, float]]:
    """Core-seconds per value of each swept parameter axis (not-applicable cells cost 0)."""
    grid = plan.grid
    by_axis: dict[str, dict[Any, float]] = {}
    for a, axis in enumerate(grid.axes[grid.n_method_axes :], start=grid.n_method_axes):
        per = cost.sum(axis=tuple(i for i in range(cost.ndim) if i != a))
        by_axis[axis.name] = dict(zip(axis.values, per.tolist()))
    return by_axis
