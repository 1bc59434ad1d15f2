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
from geosweep.sweeps.store import layout

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


def test_store_creation_allocates_no_per_cell_objects(tmp_path, monkeypatch):
    """Creating the store of a mixed grid (half of it not-applicable fillers, marked): the peak
    memory is the template's (a graph per shard), not a Python object per cell — 4× the cells add
    less than :data:`PER_CELL_INCREMENT` bytes per added cell. (The cheap-cell floor of
    ``MIN_SHARD_SECONDS`` is off: it would give the smaller grid fewer shards, so a smaller graph.)"""
    monkeypatch.setattr(layout, "MIN_SHARD_SECONDS", 0.0)
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


def _counting(monkeypatch, owner, name: str) -> list:
    """Wrap the real ``owner.name`` so that each call is recorded (the function still runs)."""
    calls: list = []
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def test_validate_parses_the_spec_file_once(tmp_path, monkeypatch, capsys):
    """``geosweep validate`` reads the spec for the family it loads and for the plan: the text is
    parsed once (a 10⁶-cell spec's 250 000-seed list took seconds per parse)."""
    import tomllib

    from geosweep.flows.cli import main

    path = tmp_path / "s.toml"
    path.write_text(
        'name = "parse-once"\nsystem = "pendulum_chain"\nintegrators = ["rkmk4", "cf4"]\nh = [0.01]\n'
        'T = 0.01\ndt_out = 0.01\n[params]\nN = 3\nic = "random"\nseed = [0, 1, 2]\n'
    )
    parses = _counting(monkeypatch, tomllib, "loads")
    assert main(["validate", str(path), "--no-prefect"]) == 0
    assert "valid. 6 cells" in capsys.readouterr().out
    assert len(parses) == 1


def test_the_estimate_asks_the_cost_model_once_per_model_and_integrator(monkeypatch):
    """Planning and estimating a spec of many models: ``cost_per_step`` once per (model, integrator)
    for the whole estimate (:meth:`Plan.per_step` is kept on the plan), not once per use of it."""
    import dataclasses

    plan = make_plan(_spec(2, 300))
    calls: list = []
    real = plan.famdef.cost_per_step

    def counting(model, integrator):
        calls.append(integrator)
        return real(model, integrator)

    plan = plan.model_copy(update={"famdef": dataclasses.replace(plan.famdef, cost_per_step=counting)})
    probes = est_mod.probe(plan, budget=0.01)
    calls.clear()
    est_mod.estimate(plan, 2, prefect=False, cores=2, probes=probes)
    plan.cost_array()
    assert len(calls) <= 2 * 300 + 2 * len(probes)  # 2 integrators × 300 models (+ the probes' scale)


def test_a_chain_model_per_seed_draws_one_generator(monkeypatch):
    """``ic = "random"`` with unit masses: one random generator per model (its initial state), not a
    second one for masses it does not draw — the models are bitwise those of two generators."""
    from geosweep.kernels.chain.model import build_chain

    before = build_chain(3, ic="random", seed=7)
    made = _counting(monkeypatch, np.random, "default_rng")
    plan = make_plan(_spec(1, 50))
    assert len(made) == 50
    after = plan.models[(7,)]
    assert all(getattr(after, f).tobytes() == getattr(before, f).tobytes() for f in ("m", "L", "y0", "params"))


def test_models_share_their_equal_large_arrays():
    """Every LJ sphere model holds a 642 × 642 matrix that the parameters do not change: the plan keeps
    one, so a shard's model bundle is pickled (sent to the cluster) at about one model's size."""
    import pickle

    plan = make_plan(
        {"name": "share", "system": "lj_sphere", "integrators": ["rk4"], "h": [0.01], "T": 0.02,
         "dt_out": 0.01, "params": {"omega": [0.0, 0.5, 1.0, 1.5]}}
    )  # fmt: skip
    models = list(plan.models.values())
    assert models[0].M.nbytes > 10**6 and all(m.M is models[0].M for m in models)
    assert not np.array_equal(models[0].w0, models[1].w0) or models[0].params != models[1].params
    one = len(pickle.dumps(models[0]))
    assert len(pickle.dumps(dict(plan.models))) < 1.2 * one
