"""Driver-side work is O(cells) with a small constant (issue 21 item 2): planning, costing, the
estimate and store creation hold arrays over the grid, never a Python object per cell.

The grid here has many cells and few models (a long ``h`` axis), so what grows with the cells is
the driver's own bookkeeping, which tracemalloc weighs against a few bytes per cell."""

from __future__ import annotations

import tracemalloc

import numpy as np

from geosweep.sweeps import estimate as est_mod
from geosweep.sweeps import store as store_mod
from geosweep.sweeps.plan import make_plan

#: bytes per cell the driver may allocate at its peak (cost arrays of 8 bytes, masks, an ordered copy)
BYTES_PER_CELL = 64
#: bytes per added cell store creation may grow by (a bool mask and an int8 flag array)
PER_CELL_INCREMENT = 16


def _spec(n_h: int, seeds: int) -> dict:
    """2 integrators × ``n_h`` step sizes (dt_out / k) × ``seeds`` chain models: 2·n_h·seeds cells."""
    return {
        "name": "driver-scale",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01 / k for k in range(1, n_h + 1)],
        "T": 0.01,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": list(range(seeds))},
    }


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_costing_and_estimate_allocate_no_per_cell_objects():
    plan = make_plan(_spec(500, 100))  # 10^5 cells, 100 models
    cells = plan.grid.size
    assert cells == 100_000
    probes = est_mod.probe(plan, budget=0.01)
    est_mod.estimate(plan, 2, prefect=False, cores=2, probes=probes)  # imports and first calls outside the count
    for what, fn in {
        "cost_array": plan.cost_array,
        "runnable": plan.grid.runnable,
        "estimate.cost_array": lambda: est_mod.cost_array(plan, probes),
        "objects_estimate": lambda: store_mod.objects_estimate(plan),
        "estimate": lambda: est_mod.estimate(plan, 2, prefect=False, cores=2, probes=probes),
    }.items():
        peak = _peak(fn)
        assert peak < BYTES_PER_CELL * cells, f"{what}: {peak / cells:.0f} bytes per cell"


def test_cost_array_is_plan_cost_cell_by_cell():
    """The arrays are the per-cell functions' values, bitwise (mixed h/tol grid with fillers)."""
    plan = make_plan(
        {
            "name": "mixed",
            "system": "pendulum_chain",
            "integrators": ["rkmk4", "rkmk45", "cf4"],
            "h": [0.01, 0.005],
            "tol": [1e-6, 1e-8],
            "T": 0.1,
            "dt_out": 0.01,
            "params": {"N": [3, 4], "ic": "random", "seed": [0, 1, 2]},
        }
    )
    grid = plan.grid
    costs = plan.cost_array()
    mask = grid.applicable_mask()
    for cell in grid.cells():
        assert costs[cell] == plan.cost(cell)
        assert mask[cell] == grid.applicable(cell)
    assert grid.runnable() == sum(grid.applicable(c) for c in grid.cells()) < grid.size
    done = np.zeros(grid.shape, dtype=bool)
    done[0, 0, 0, 0, 1] = True
    assert grid.pending(done) == [c for c in grid.cells() if grid.applicable(c) and not done[c]]
    probes = est_mod.probe(plan, budget=0.01)
    by_cell = est_mod.cell_costs(plan, probes)
    array = est_mod.cost_array(plan, probes)
    assert set(by_cell) == {c for c in grid.cells() if grid.applicable(c)}
    assert all(array[c] == v for c, v in by_cell.items())


def test_a_grid_without_swept_parameters():
    """No parameter axis (one model): the arrays, the estimate and the slices still hold."""
    spec = _spec(3, 1)
    spec["params"] = {"N": 3}
    plan = make_plan(spec)
    probes = est_mod.probe(plan, budget=0.01)
    est = est_mod.estimate(plan, 2, prefect=False, cores=2, probes=probes)
    assert (est.cells, est.runnable) == (6, 6) and est.core_seconds > 0
    assert all(plan.cost_array()[c] == plan.cost(c) for c in plan.grid.cells())


def test_store_creation_allocates_no_per_cell_objects(tmp_path):
    """Creating the store of a mixed grid (half of it not-applicable fillers, marked): the peak
    memory is the template's (a graph per shard), not a Python object per cell — 4× the cells add
    less than :data:`PER_CELL_INCREMENT` bytes per added cell."""
    peaks, sizes = [], []
    for seeds in (50, 200):  # 5·10^4 and 2·10^5 cells
        spec = _spec(250, seeds)
        spec.update(integrators=["rkmk4", "rkmk45"], tol=[1e-6, 1e-8])
        plan = make_plan(spec)
        if not peaks:
            store_mod.ensure_store(plan, store_mod.StoreRef.of(tmp_path / "warm.zarr"))  # imports outside
        ref = store_mod.StoreRef.of(tmp_path / f"s{seeds}.zarr")
        peaks.append(_peak(lambda: store_mod.ensure_store(plan, ref)))  # noqa: B023 - called at once
        sizes.append(plan.grid.size)
        status = store_mod.open_results(ref)["status"].values
        assert int((status == -2).sum()) == plan.grid.size - plan.grid.runnable() > 0
    per_added_cell = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    assert per_added_cell < PER_CELL_INCREMENT, f"{per_added_cell:.0f} bytes per added cell, peaks {peaks}"
