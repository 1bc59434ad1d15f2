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

from geosweep.sweeps import extension, together
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
    shards = sorted(p.name for p in (a / extension.DIRNAME).iterdir())
    assert shards and shards == sorted(p.name for p in (b / extension.DIRNAME).iterdir())
    for name in shards:
        index = tuple(int(i) for i in name[1:-4].split("_"))
        ca, cb = extension.load_shard(ra, index), extension.load_shard(rb, index)
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


@pytest.mark.parametrize("where", ["serial", "threads"])
def test_cells_computed_together_store_bitwise_what_cells_computed_alone_store(tmp_path, monkeypatch, where):
    def run(path):
        if where == "serial":
            return run_sweep(SPEC, path, serial=True)
        with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
            with Client(cluster) as client:
                return run_sweep(SPEC, path, client=client, slice_seconds=1e-4)

    joint = run(tmp_path / "together.zarr")
    monkeypatch.setattr(together, "TOGETHER_CELL_SECONDS", 0.0)  # every cell on its own (the path before)
    alone = run(tmp_path / "alone.zarr")
    assert joint.complete and alone.complete and joint.ran == alone.ran == 3 * 2 * 6 + 6  # rkmk45: one tol, no h
    _bitwise_same_stores(tmp_path / "together.zarr", tmp_path / "alone.zarr")
