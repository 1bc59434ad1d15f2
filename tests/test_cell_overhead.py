"""Per-cell overhead on the worker (issue 21 item 2), measured by counting real calls, not seconds.

A sweep of many cheap cells must not probe the store once per cell: the checkpoint folder is
listed once per slice and once per shard write (no per-cell ``checkpoints.load``/``delete``),
and a worker opens the store (which reads every array's metadata) once per run, not once per
task. The shard write's vectorised checksums are those of :func:`geosweep.sweeps.store.cell_checksum`.
Real stores, a real ``LocalCluster``.
"""

from __future__ import annotations

import sys

import numpy as np
from distributed import Client, LocalCluster

from geosweep.sweeps import checkpoints
from geosweep.sweeps import store as store_mod
from geosweep.sweeps.engine import LOCAL_WORKER, compute_slice, run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import (
    StoreRef,
    cell_checksum,
    ensure_store,
    group_by_shard,
    sweep_shards,
    verify,
    write_shard,
)
from tests.sweep_util import chain_ensemble

#: 64 cheap cells (about 0.1 ms each): 16 seeds × 2 integrators × 2 step sizes, two store shards
SPEC = chain_ensemble("cell-overhead", 16)
N_CELLS = 64


def _counting(monkeypatch, owner, name: str) -> list:
    """Wrap the real ``owner.name`` so that each call is recorded (the function still runs)."""
    calls: list = []
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(sys._getframe(1).f_code.co_name)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def test_a_serial_sweep_probes_no_checkpoint_per_cell(tmp_path, monkeypatch):
    loads = _counting(monkeypatch, checkpoints, "load")
    deletes = _counting(monkeypatch, checkpoints, "delete")
    listings = _counting(monkeypatch, checkpoints, "present")
    res = run_sweep(SPEC, tmp_path / "s.zarr", serial=True, slice_seconds=1e-4)
    assert res.complete and res.ran == N_CELLS and res.slices >= 8
    assert loads == [] and deletes == []  # no checkpoint exists: none is looked for or removed
    shards = len(
        group_by_shard(list(make_plan(SPEC).grid.cells()), sweep_shards(StoreRef.of(res.store).open_group("r")))
    )
    assert len(listings) <= res.slices + shards  # one listing per slice and per shard write


def test_a_worker_opens_the_store_once_per_run_not_per_task(tmp_path, monkeypatch, dask_path):
    opens = _counting(monkeypatch, StoreRef, "open_group")
    with LocalCluster(
        n_workers=2,
        processes=False,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
        **LOCAL_WORKER,
    ) as cluster:
        with Client(cluster) as client:
            res = run_sweep(SPEC, tmp_path / "w.zarr", client=client, slice_seconds=1e-4)
    assert res.complete and res.ran == N_CELLS and res.slices >= 8
    by_tasks = [f for f in opens if f in ("compute_slice", "write_runs", "run_arrays")]
    assert 1 <= len(by_tasks) <= 2, by_tasks  # one process here: one open (two if both threads raced)
    assert verify(StoreRef.of(res.store)) == {"damaged": [], "flags": []}


def test_shard_write_checksums_are_cell_checksums_also_for_padded_and_missing_values(tmp_path):
    plan = make_plan(SPEC)
    ref = StoreRef.of(tmp_path / "c.zarr")
    ensure_store(plan, ref)
    group = ref.open_group("r+")
    cells = next(iter(group_by_shard(list(plan.grid.cells()), sweep_shards(group)).values()))[:6]
    runs = compute_slice(plan, cells, ref)
    outputs = {r[0]: (dict(r[6]), r[1], r[2]) for r in runs}
    c0, c1 = cells[:2]
    del outputs[c0][0]["max_J_error"]  # a value one cell lacks: not in its checksum
    outputs[c1][0]["energy"] = outputs[c1][0]["energy"][:-3]  # a short value: padded with the fill value
    assert sorted(write_shard(store_mod.ArrayCache(group), outputs)) == sorted(cells)
    for cell, (values, status, _wall) in outputs.items():
        stored = {name: store_mod.stored_value(group[name], v) for name, v in values.items() if name in group}
        assert int(group["checksum"][cell]) == cell_checksum(stored, status), cell
    assert np.isnan(group["energy"][c1][-3:]).all()


def test_models_go_to_the_cluster_once_per_shard_not_one_task_per_model(tmp_path, dask_path):
    """16 models (one per seed) in 2 shards: no task per model — a task per model cost more than the
    sub-millisecond cells it serves (10⁴ cells of the issue's ensemble: 2500 tasks). Models this small
    ride inside the slices that need them (``geosweep.sweeps.bundles``): no model task at all."""
    from distributed import get_task_stream

    with LocalCluster(
        n_workers=2,
        processes=False,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
        **LOCAL_WORKER,
    ) as cluster:
        with Client(cluster) as client, get_task_stream(client) as ts:
            res = run_sweep(SPEC, tmp_path / "m.zarr", client=client, slice_seconds=1e-4)
    assert res.complete and res.ran == N_CELLS
    shards = len(
        group_by_shard(list(make_plan(SPEC).grid.cells()), sweep_shards(StoreRef.of(res.store).open_group("r")))
    )
    model_tasks = [r["key"] for r in ts.data if "-model" in str(r["key"])]
    slice_tasks = [r["key"] for r in ts.data if "-slice-" in str(r["key"])]
    assert shards == 2 and not model_tasks, model_tasks
    assert shards <= len(slice_tasks) < N_CELLS, slice_tasks


def test_a_cells_request_is_built_once_per_method_and_its_options_are_the_callers_own(tmp_path, monkeypatch):
    """The 64 cells have 4 (integrator, h) methods: 4 requests are built for a serial run, each
    cell gets the same values as a request built afresh, and a caller changing its options dict
    changes no other cell's."""
    from geosweep.kernels.registry import RunRequest

    plan = make_plan(SPEC)
    plan.grid._requests.clear()
    built = _counting(monkeypatch, plan.grid, "options")
    run_sweep(plan, str(tmp_path / "s.zarr"), serial=True)
    assert built.count("request") == 4
    for cell in plan.grid.cells():
        req, options = plan.request(cell)
        c = plan.grid.coords(cell)
        assert req == RunRequest(SPEC["T"], SPEC["dt_out"], h=float(c["h"]))
        assert options == plan.grid.options(c["integrator"])
        options["blowup"] = -1.0  # the caller's copy
        assert plan.request(cell)[1]["blowup"] != -1.0


def test_grouping_many_cells_by_shard_is_the_per_cell_definition():
    """:func:`group_by_shard` groups many cells with NumPy: the same groups, order and int tuples as
    :func:`shard_of` cell by cell (random shapes, shards and cell orders)."""
    import itertools
    import random

    from geosweep.sweeps.store.layout import shard_of

    rng = random.Random(21)
    for _ in range(100):
        d = rng.randint(1, 4)
        shape = [rng.randint(1, 25) for _ in range(d)]
        shards = tuple(rng.randint(1, 7) for _ in range(d))
        cells = list(itertools.product(*[range(n) for n in shape]))
        rng.shuffle(cells)
        cells = cells[: rng.randint(0, len(cells))]
        expected: dict = {}
        for c in cells:
            expected.setdefault(shard_of(c, shards), []).append(c)
        got = group_by_shard(cells, shards)
        assert list(got.items()) == list(expected.items())
        assert all(type(i) is int for k, v in got.items() for t in (k, *v) for i in t)


def test_a_slices_task_arguments_pickle_compactly():
    """A slice's cells travel as one int array and its models as one pickle (Dask would walk a list of
    cells item by item and send every model array as a buffer of its own); both arrive unchanged."""
    import numpy as np
    from distributed.protocol.pickle import dumps, loads

    from geosweep.sweeps import bundles
    from geosweep.sweeps.store.layout import cell_block

    plan = make_plan(SPEC)
    cells = list(plan.grid.cells())
    block = cell_block(cells)
    assert block.dtype == np.int64 and block.shape == (len(cells), len(cells[0]))
    models = bundles.Models({k: plan.models[k] for k in plan.combinations(cells)})
    buffers: list = []
    back = loads(dumps((models, block), buffer_callback=buffers.append), buffers=buffers)
    assert len(buffers) <= 1  # the cell block at most; the models' arrays travel in-band, together
    assert [tuple(int(i) for i in row) for row in back[1]] == cells
    for key, model in models.models.items():
        restored = back[0].models[key]
        assert np.array_equal(restored.y0, model.y0) and restored.n == model.n


def test_a_serial_cli_run_never_loads_distributed(tmp_path):
    """``geosweep run --serial`` (and its closing summary, read with Dask's threads) never imports
    ``distributed``: Dask imports it to look for a client when a scheduler is named by a string or a
    rechunk method is left to it (~0.25 s of a short run). A fresh interpreter, the real CLI."""
    import subprocess

    import yaml

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(chain_ensemble("serial-imports", 2)))
    code = (
        "import sys\nfrom geosweep.flows.cli import main\n"
        f"rc = main(['run', {str(spec)!r}, '--store', {str(tmp_path / 's.zarr')!r}, '--serial', '--quiet'])\n"
        "print('distributed loaded:', 'distributed' in sys.modules, 'rc:', rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "distributed loaded: False rc: 0" in out.stdout, out.stdout + out.stderr
    assert (tmp_path / "s.zarr").is_dir()
