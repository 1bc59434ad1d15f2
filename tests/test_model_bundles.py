"""A shard's models reach the cluster without a large graph (issue 21): a shard of 8 ``lj_sphere``
models (3.3 MB each pickled) used to be one 26 MB task, and distributed warned "Sending large
graph" on the CLI's stderr. Large models are built on the worker; the results stay bitwise."""

from __future__ import annotations

import warnings

from distributed import Client, LocalCluster, get_task_stream

from geosweep.sweeps import bundles
from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep, warm_part
from geosweep.sweeps.plan import make_plan
from tests.sweep_util import assert_stores_bitwise_equal

#: 16 cells of 642 molecules, a few steps each: two store shards of 8 models
BIG = """
name = "big-models"
system = "lj_sphere"
integrators = ["rk4"]
h = [0.0025]
T = 0.01
dt_out = 0.005
[params]
omega = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0]
"""


def _slices(plan, cells, shards, target, n_workers, cheap_cuts=True, min_slice_seconds=0.0):
    """The work list's slicing of ``cells`` (:func:`geosweep.sweeps.worklist.shard_slices`)."""
    from geosweep.sweeps.worklist import Slicing, shard_slices

    slicing = Slicing.of(target, n_workers, cheap_cuts, min_slice_seconds)
    return shard_slices(plan.grid, cells, plan.cost_array(), shards, slicing)


def test_large_models_are_built_on_the_worker_bitwise(tmp_path):
    spec = tmp_path / "big.toml"
    spec.write_text(BIG)
    plan = make_plan(str(spec))
    assert bundles.model_bytes(plan) * 8 > 10 * 2**20  # a shard's models as one task: a "large graph"
    built = bundles.build_bundle(plan.part(models={}), list(plan.models))
    assert built.keys() == plan.models.keys()
    run_sweep(plan, str(tmp_path / "serial.zarr"), serial=True)
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as client, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_sweep(plan, str(tmp_path / "dist.zarr"), client=client)
    assert result.complete and result.ran == 16
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert not large, large
    assert_stores_bitwise_equal(str(tmp_path / "serial.zarr"), str(tmp_path / "dist.zarr"))


def test_small_models_still_travel_in_their_task():
    """A pendulum chain pickles to a few hundred bytes: 4000 of a shard stay under the limit."""
    plan = make_plan(
        {
            "name": "small",
            "system": "pendulum_chain",
            "integrators": ["rkmk4"],
            "h": [0.01],
            "T": 0.1,
            "dt_out": 0.1,
            "params": {"N": 3, "ic": "random", "seed": list(range(4))},
        }
    )
    assert bundles.model_bytes(plan) * 4000 <= bundles.MAX_SHIPPED_BYTES


def _chain_plan(seeds: int):
    return make_plan(
        {
            "name": "inline",
            "system": "pendulum_chain",
            "integrators": ["rkmk4", "cf4"],
            "h": [0.01],
            "T": 0.05,
            "dt_out": 0.05,
            "params": {"N": 3, "ic": "random", "seed": list(range(seeds))},
        }
    )


def test_small_models_travel_inside_their_slices_bitwise(tmp_path, dask_path):
    """Models that pickle small ride in the slices that need them: no model task to wait for or copy
    (the workers then take slices in priority order with nothing tying a shard to a worker), and the
    store is bitwise the serial one."""
    plan = _chain_plan(40)
    assert bundles.inline_models(bundles.model_bytes(plan), {0: list(plan.grid.cells())}, plan)
    run_sweep(plan, str(tmp_path / "serial.zarr"), serial=True)
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as client, get_task_stream(client) as ts:
            result = run_sweep(plan, str(tmp_path / "dist.zarr"), client=client, slice_seconds=1e-4)
    keys = [rec["key"] for rec in ts.data]
    assert result.complete and result.ran == 80
    assert any("-slice-" in k for k in keys)
    assert not [k for k in keys if "-models-" in k], keys
    assert_stores_bitwise_equal(str(tmp_path / "serial.zarr"), str(tmp_path / "dist.zarr"))


def test_a_shards_models_are_one_object_to_dask():
    """A slice's models are one opaque :class:`bundles.Models`: Dask pickles it once instead of walking
    a dict and pickling each model on its own (0.15 ms a model: seconds of driver time at 10⁵ seeds)."""
    from dask._task_spec import parse_input

    plan = _chain_plan(4)
    models = bundles.Models(dict(plan.models))
    assert parse_input(models) is models
    assert parse_input(dict(plan.models)) is not plan.models  # a plain dict is walked
    assert bundles.unwrap(models) == plan.models and bundles.unwrap(plan.models) is plan.models


def test_workers_warm_from_one_cell_per_model_and_integrator():
    """``warm_part``: a family warming without models gets none; otherwise one cell per (parameter
    combination, integrator) and those cells' models — never the whole plan for every worker."""
    chain = _chain_plan(50)
    part, cells = warm_part(chain, list(chain.grid.cells()))
    assert part.models == {} and cells == []
    s2 = make_plan(
        {
            "name": "warm",
            "system": "spring_pendula",
            "integrators": ["explicit_vi", "rk4"],
            "h": [0.01, 0.005],
            "T": 0.02,
            "dt_out": 0.01,
            "params": {"g": [9.0, 9.5, 10.0]},
        }
    )
    every = list(s2.grid.cells())
    part, cells = warm_part(s2, every)
    assert len(every) == 12 and len(cells) == 6  # 3 models × 2 integrators (not × 2 step sizes)
    assert {(s2.grid.combination(c), s2.grid.coords(c)["integrator"]) for c in cells} == {
        (s2.grid.combination(c), s2.grid.coords(c)["integrator"]) for c in every
    }
    assert part.models.keys() == s2.models.keys()


def test_shards_enough_for_the_workers_are_not_split():
    """With at least 2 shards per worker a shard is one slice (its results never travel from slices to
    a separate writer task), except the last wave; with fewer, shards are split so every worker gets work."""
    from geosweep.sweeps.store import shard_shape

    plan = _chain_plan(1500)
    cells = list(plan.grid.cells())
    shards = shard_shape(plan)
    by_shard = _slices(plan, cells, shards, 10.0, 1)
    assert len(by_shard) >= 2
    assert all(len(slices) == 1 for slices in by_shard.values())
    many_workers = _slices(plan, cells, shards, 10.0, len(by_shard))
    assert sum(len(slices) for slices in many_workers.values()) >= 4 * len(by_shard)


def test_the_last_shards_a_run_takes_are_cut_finer():
    """Issue 21: with whole shards as slices, the workers of a run end unevenly (measured on 1000 cells of
    10 ms on 2 workers: one idle for a quarter of a shard). The shards come in the order a run takes
    them, the costliest first, and with 4 shards per worker or more the last ``n_workers`` of them are
    cut in ``TAIL_PIECES`` slices."""
    from geosweep.sweeps.worklist import TAIL_PIECES

    plan = _chain_plan(1500)
    cells = list(plan.grid.cells())
    shards = (2, 1, 100)  # 15 shards of 200 cells
    cost = plan.cost_array()
    for n_workers in (2, 3):
        by_shard = _slices(plan, cells, shards, 10.0, n_workers)
        order = list(by_shard)
        assert len(order) >= 2 * n_workers
        totals = [sum(cost[c] for s in by_shard[sh] for c in s) for sh in order]
        assert totals == sorted(totals, reverse=True)  # the costliest first
        assert [len(by_shard[sh]) for sh in order[:-n_workers]] == [1] * (len(order) - n_workers)
        assert all(len(by_shard[sh]) == TAIL_PIECES for sh in order[-n_workers:])
        got = sorted(c for slices in by_shard.values() for s in slices for c in s)
        assert got == sorted(cells)  # every cell once
    # fewer than 4 shards per worker: the last wave is a large part of the run, its shards stay whole
    # (cut, their values would travel to a writer task: 10⁴ cells of 0.1 ms on 2 worker processes, 4
    # shards, ran 1.6× slower)
    assert all(len(slices) == 1 for slices in _slices(plan, cells, shards, 10.0, 4).values())


def test_on_worker_processes_short_cells_keep_the_last_shards_whole():
    """``cheap_cuts=False`` (short cells on worker processes: a cut shard's values would travel between
    processes to its writer, 2·10⁴ cells of 0.1 ms ran 7.5–8.8 s cut against 6.0–6.3 s whole): every
    shard is one slice, in the same order."""
    plan = _chain_plan(1500)
    cells = list(plan.grid.cells())
    shards = (2, 1, 100)
    cut = _slices(plan, cells, shards, 10.0, 2)
    whole = _slices(plan, cells, shards, 10.0, 2, cheap_cuts=False)
    assert list(whole) == list(cut) and any(len(s) > 1 for s in cut.values())
    assert all(len(slices) == 1 for slices in whole.values())
    assert sorted(c for slices in whole.values() for s in slices for c in s) == sorted(cells)


def test_on_worker_processes_few_shards_are_split_only_so_far_that_every_worker_has_a_slice():
    """``cheap_cuts=False`` with fewer shards than 2 per worker: a shard is cut only as far as every worker
    needs a slice (``n_workers`` slices, not ``4 × n_workers``), since each cut sends values between
    processes (10³ cells of 0.1 ms in 2 shards on 2 worker processes: 0.85–1.05 s in 10 slices,
    0.55–0.67 s in 2). Threads (``cheap_cuts=True``) still get 4 slices per worker."""
    plan = _chain_plan(1500)  # grid (2 integrators, 1 h, 1500 seeds)
    cells = list(plan.grid.cells())
    shards = (2, 1, 750)  # 2 shards of equal cost
    for n_workers, slices in ((1, 2), (2, 2), (4, 4)):
        by_shard = _slices(plan, cells, shards, 10.0, n_workers, cheap_cuts=False)
        assert len(by_shard) == 2 and sum(len(s) for s in by_shard.values()) == slices, (n_workers, by_shard)
        assert sorted(c for group in by_shard.values() for s in group for c in s) == sorted(cells)
    assert sum(len(s) for s in _slices(plan, cells, shards, 10.0, 2).values()) >= 8


def test_many_small_models_load_without_churning_the_collector():
    """A slice's inline models (2 500 chain models of random initial states) are unpickled on the worker
    under :func:`geosweep.sweeps.gc_policy.fewer_collections`: with the default threshold the load ran
    ~50 collector passes, full ones among them (0.10 s instead of 0.02 s in a worker process). The
    models come back equal."""
    import gc
    import pickle

    import numpy as np

    plan = make_plan(
        {"name": "many-models", "system": "pendulum_chain", "integrators": ["rkmk4"], "h": [0.025], "T": 0.1,
         "dt_out": 0.05, "params": {"N": 3, "ic": "random", "seed": list(range(2500))}}
    )  # fmt: skip
    blob = pickle.dumps(bundles.Models(dict(plan.models)))
    passes = [0]

    def count(phase: str, info: dict) -> None:
        passes[0] += phase == "start"

    gc.collect()
    gc.callbacks.append(count)
    try:
        loaded = pickle.loads(blob)
    finally:
        gc.callbacks.remove(count)
    assert passes[0] <= 3, passes[0]
    assert loaded.models.keys() == plan.models.keys()
    key = next(iter(plan.models))
    np.testing.assert_array_equal(loaded.models[key].y0, plan.models[key].y0)
