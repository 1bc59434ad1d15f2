"""What a small run of short cells pays around its cells (issue 21, 10³ cells of 0.1 ms on 2 worker
threads): slices of cells computed together are not cut shorter than ``MIN_SLICE_SECONDS`` to give
every worker slices, workers that are threads of the driver's process get no round trip (their kernels
and the store are the driver's), a store's arrays are opened in one trip, and a store the run has just
created is not read back for cells done. Real LocalCluster, real zarr stores; the stores stay bitwise
those of a serial run."""

from __future__ import annotations

import numpy as np
import pytest
from distributed import Client, LocalCluster

from geosweep.sweeps import engine
from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import ArrayCache, StoreRef, ensure_store, shard_shape
from geosweep.sweeps.worklist import MIN_SLICE_SECONDS
from tests.sweep_util import assert_stores_bitwise_equal

SPEC = {
    "name": "small-run",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "cf4"],
    "h": [0.025],
    "T": 0.1,
    "dt_out": 0.05,
    "params": {"N": 3, "ic": "random", "seed": list(range(150))},
}


def _slices(plan, cells, shards, target, n_workers, cheap_cuts=True, min_slice_seconds=0.0):
    """The work list's slicing of ``cells`` (:func:`geosweep.sweeps.worklist.shard_slices`)."""
    from geosweep.sweeps.worklist import Slicing, shard_slices

    slicing = Slicing.of(target, n_workers, cheap_cuts, min_slice_seconds)
    return shard_slices(plan.grid, cells, plan.cost_array(), shards, slicing)


def test_slices_of_cells_computed_together_are_not_cut_below_the_minimum():
    plan = make_plan(SPEC)
    cells = list(plan.grid.cells())
    total = float(plan.cost_array().sum())
    shards = (1, 1, 50)  # 6 shards: fewer than 2 per worker for 4 workers, so shards are cut
    fine = _slices(plan, cells, shards, 10.0, 4)
    assert sum(len(s) for s in fine.values()) >= 16  # 4 per worker without a minimum
    coarse = _slices(plan, cells, shards, 10.0, 4, min_slice_seconds=MIN_SLICE_SECONDS)
    n = sum(len(s) for s in coarse.values())
    assert n == max(len(coarse), min(16, int(total / MIN_SLICE_SECONDS))), (n, total)
    assert sorted(c for group in coarse.values() for s in group for c in s) == sorted(cells)


def test_array_cache_opens_every_array_in_one_trip(tmp_path):
    plan = make_plan(SPEC)
    ref = StoreRef.of(tmp_path / "s.zarr")
    ensure_store(plan, ref)
    group = ref.open_group("r+")
    cache = ArrayCache(group).open_all()
    assert sorted(cache) == sorted(k for k, _ in group.arrays())
    assert all(cache[name].shape == group[name].shape for name in cache)


@pytest.fixture(scope="module")
def threads():
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as client:
            yield client


def test_a_small_run_on_worker_threads_takes_few_slices_and_no_round_trip(tmp_path, threads, monkeypatch):
    """300 short chain cells computed together (~0.03 s estimated): one slice per shard, no
    ``client.run`` (warming, the store's visibility) on workers that are threads of this process,
    and the store bitwise the serial one."""
    calls: list[str] = []
    real_run = threads.run

    def counting_run(fn, *args, **kwargs):
        calls.append(getattr(fn, "__name__", str(fn)))
        return real_run(fn, *args, **kwargs)

    monkeypatch.setattr(threads, "run", counting_run)
    plan = make_plan(SPEC)
    res = run_sweep(plan, tmp_path / "threads.zarr", client=threads)
    assert res.complete and res.ran == plan.grid.size
    n_shards = int(np.prod(np.ceil(np.array(plan.grid.shape) / np.array(shard_shape(plan)))))
    assert float(plan.cost_array().sum()) < 2 * MIN_SLICE_SECONDS
    assert res.slices == n_shards, (res.slices, n_shards)
    assert calls == []
    assert run_sweep(plan, tmp_path / "serial.zarr", serial=True).ran == plan.grid.size
    assert_stores_bitwise_equal(str(tmp_path / "threads.zarr"), str(tmp_path / "serial.zarr"))  # checksums too


def test_a_serial_run_does_not_read_back_the_store_it_just_created(tmp_path, monkeypatch):
    reads: list[str] = []
    real = engine.done_mask
    monkeypatch.setattr(engine, "done_mask", lambda ref, log=None: reads.append(ref.url) or real(ref, log))
    path = tmp_path / "s.zarr"
    first = run_sweep(SPEC, path, serial=True)
    assert first.complete and reads == []  # created by this run: nothing was done
    again = run_sweep(SPEC, path, serial=True)
    assert again.ran == 0 and again.skipped == first.ran and reads == [str(path)]  # an existing store is read
