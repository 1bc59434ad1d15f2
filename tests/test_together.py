"""A slice's short cells computed together (geosweep.sweeps.together, issue 21): the store is bitwise the
store of the same cells computed one by one — every variable (checksums included, run stamps left out)
and every final carry — serially and on a real LocalCluster of threads; cells that cannot be computed
together (adaptive dense-output cells of a store with carries, the discrete gradients) run alone beside
them."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from distributed import Client, LocalCluster

from geosweep.sweeps import carries, together
from geosweep.sweeps.engine import LOCAL_WORKER, compute_slice, run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import StoreRef, ensure_store, verify
from geosweep.sweeps.together import CellBatch
from tests.sweep_util import RUN_STAMPS

SPEC = {
    "name": "together",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "cf4", "rkmk45", "dg_avf"],
    "h": [0.025, 0.01],
    "tol": [1e-6],
    "T": 0.2,
    "dt_out": 0.05,
    "snapshot_dt": 0.1,
    "params": {"N": 3, "ic": "random", "g": [0.0, 9.81], "seed": [0, 1, 2]},
}


def _bitwise_same_stores(a, b) -> None:
    ga, gb = zarr.open_group(str(a), mode="r"), zarr.open_group(str(b), mode="r")
    names = sorted(k for k, _ in ga.arrays())
    assert names == sorted(k for k, _ in gb.arrays())
    assert "checksum" in names and "energy" in names
    for name in names:
        if name in RUN_STAMPS:
            continue
        x, y = np.asarray(ga[name][...]), np.asarray(gb[name][...])
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    ra, rb = StoreRef.of(str(a)), StoreRef.of(str(b))
    shards = sorted(p.name for p in (a / carries.DIRNAME).iterdir())
    assert shards and shards == sorted(p.name for p in (b / carries.DIRNAME).iterdir())
    for name in shards:
        index = tuple(int(i) for i in name[1:-4].split("_"))
        ca, cb = carries.load_shard(ra, index), carries.load_shard(rb, index)
        assert set(ca) == set(cb) and ca
        for cell, arrays in ca.items():
            assert set(arrays) == set(cb[cell])
            for k, v in arrays.items():
                if k != "wall_time":
                    assert np.asarray(v).tobytes() == np.asarray(cb[cell][k]).tobytes(), (cell, k)
    assert verify(ra) == {"damaged": [], "flags": []}


def test_a_slice_computes_its_short_fresh_cells_together_and_the_others_alone(tmp_path):
    plan = make_plan(SPEC)
    ref = StoreRef.of(tmp_path / "s.zarr")
    ensure_store(plan, ref)
    cells = list(plan.grid.cells())
    items = compute_slice(plan, cells, ref, together=True)
    batches = [r for r in items if isinstance(r, CellBatch)]
    alone = [r for r in items if not isinstance(r, CellBatch)]
    integrator = {c: plan.grid.coords(c)["integrator"] for c in cells}
    assert {integrator[c] for b in batches for c in b.cells} == {"rkmk4", "cf4"}
    assert {integrator[r[0]] for r in alone} == {"rkmk45", "dg_avf"}
    assert sum(len(b) for b in batches) + len(alone) == len(cells)
    assert len(batches) == 4  # one call per integrator and step size (its models stacked)
    assert all(b.carries is not None and (b.wall_time > 0).all() for b in batches)


#: the quadrotors (001 §6): cells collected together with their derived values row by row; one integrator
#: with a reference solution, whose cells are computed alone
QUAD_SPEC = {
    "name": "together-quad",
    "system": "two_quadrotors",
    "integrators": ["quad_rkmk4", "quad_cf4", "quad_rk4_ambient"],
    "h": [0.005, 0.0025],
    "T": 0.02,
    "dt_out": 0.005,
    "params": {"attitude_mode": ["free_tumble", "code_const"], "L1": [0.5, 0.6]},
    "integrator_options": {"quad_rk4_ambient": {"global_error": True}},
}


@pytest.mark.parametrize(("spec", "where"), [(SPEC, "serial"), (SPEC, "threads"), (QUAD_SPEC, "serial")])
def test_cells_computed_together_store_bitwise_what_cells_computed_alone_store(tmp_path, monkeypatch, spec, where):
    def run(path):
        if where == "serial":
            return run_sweep(spec, path, serial=True)
        with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
            with Client(cluster) as client:
                return run_sweep(spec, path, client=client, slice_seconds=1e-4)

    joint = run(tmp_path / "together.zarr")
    monkeypatch.setattr(together, "TOGETHER_CELL_SECONDS", 0.0)  # every cell on its own (the path before)
    alone = run(tmp_path / "alone.zarr")
    cells = 3 * 2 * 6 + 6 if spec is SPEC else 3 * 2 * 4  # the chain's rkmk45: one tol, no h
    assert joint.complete and alone.complete and joint.ran == alone.ran == cells
    _bitwise_same_stores(tmp_path / "together.zarr", tmp_path / "alone.zarr")


def test_a_shard_write_of_cells_computed_together_skips_cells_already_done(tmp_path):
    """A retried write: the rows of cells the store already holds as done are not written again (their
    stored values and checksums stay); the others are written from the stacks."""
    plan = make_plan(SPEC)
    ref = StoreRef.of(tmp_path / "d.zarr")
    ensure_store(plan, ref)
    group = ref.open_group("r+")
    from geosweep.sweeps.engine import write_runs
    from geosweep.sweeps.store import group_by_shard, sweep_shards

    shard = next(iter(group_by_shard(list(plan.grid.cells()), sweep_shards(group)).values()))
    items = compute_slice(plan, shard, ref, together=True)
    batch = next(r for r in items if isinstance(r, CellBatch))
    first = batch.cells[0]
    write_runs(ref, [r for r in batch.runs() if r[0] == first])  # one cell written alone first
    before = {n: np.asarray(zarr.open_group(str(tmp_path / "d.zarr"))[n][first]) for n in ("energy", "checksum")}
    reports = write_runs(ref, items)
    ran = {r[0]: r[5] for r in reports}
    computed = {c for r in items if isinstance(r, CellBatch) for c in r.cells}
    computed |= {r[0] for r in items if not isinstance(r, CellBatch) and r[5]}  # not the not-applicable fillers
    assert ran[first] is False and {c for c, r in ran.items() if r} == computed - {first}
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")
    for n, v in before.items():
        assert np.asarray(g[n][first]).tobytes() == v.tobytes()
    assert all(int(g["done"][c]) == 1 for c in ran)
    assert verify(ref) == {"damaged": [], "flags": []}


def test_a_derived_value_without_a_stacked_form_is_computed_row_by_row_bitwise():
    from geosweep.kernels.chain import family as chain
    from geosweep.kernels.chain.model import build_chain
    from geosweep.kernels.core.observables import Derived
    from geosweep.kernels.registry import RunRequest

    models = [build_chain(3, g=0.0, ic="random", seed=s) for s in range(3)]
    request, options = RunRequest(T=0.1, dt_out=0.05, h=0.01), {}
    (stack,) = chain.start_many(models, "rkmk4", request, options)
    stack.advance()
    obs = next(o for o in chain.STORED_LIE if o.name == "L")
    plain = Derived(chain.MOMENTUM_ERROR, rank=0, fn=chain._momentum_error)  # no fn_many
    rows = plain.many(stack, models, "rkmk4", obs)
    for k, model in enumerate(models):
        traj = chain.start(model, "rkmk4", request, options)
        traj.advance()
        assert rows[k].tobytes() == chain._momentum_error(traj, model, "rkmk4", obs).tobytes()
        assert stack.trajs[k].wall_time == stack.wall_time[k] > 0


def test_the_quadrotors_short_cells_are_computed_together_except_those_with_a_reference(tmp_path):
    plan = make_plan(QUAD_SPEC)
    ref = StoreRef.of(tmp_path / "q.zarr")
    ensure_store(plan, ref)
    items = compute_slice(plan, list(plan.grid.cells()), ref, together=True)
    integrator = {c: plan.grid.coords(c)["integrator"] for c in plan.grid.cells()}
    joint = [b for b in items if isinstance(b, CellBatch)]
    assert sorted(len(b) for b in joint) == [4, 4, 4, 4]  # per integrator and h: the 4 models in one call
    assert {integrator[c] for b in joint for c in b.cells} == {"quad_rkmk4", "quad_cf4"}
    assert {integrator[r[0]] for r in items if not isinstance(r, CellBatch)} == {"quad_rk4_ambient"}
