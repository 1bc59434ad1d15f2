"""A parallel run of short cells into a new store computes its first slices while the store is
created (``geosweep.sweeps.early``, issue 21: the creation was 0.3–0.4 s with an idle worker core at
the start of every such run). No worker writes before the store exists; a failed creation stops the
run with its error, writing nothing, and a run whose cells checkpoint, a serial run or a resumed one
creates (or opens) its store first as before."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster, get_task_stream

from geosweep.sweeps import early
from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.lease import StoreWriteError
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import StoreRef
from tests.sweep_util import assert_stores_bitwise_equal, chain_ensemble

#: the early wave is Dask's: these small runs would stay in the driver under the users' default
pytestmark = pytest.mark.usefixtures("dask_path")

#: 48 short cells in several shards (3-link chains, 12 seeds × 2 integators × 2 h)
SPEC = chain_ensemble("early", 12, T=0.2, dt_out=0.05)
#: seconds the test holds the store's creation back
HOLD = 1.5


@pytest.fixture
def cluster():
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as c, Client(c) as client:
        yield client


def _slow_creation(monkeypatch, fail: BaseException | None = None) -> dict[str, float]:
    """Hold the store's creation back by :data:`HOLD` s (then raise ``fail``); returns when it ended."""
    real = early.ensure_store
    when: dict[str, float] = {}

    def slow(plan, ref, log=None, grow=False):
        time.sleep(HOLD)
        if fail is not None:
            when["end"] = time.time()
            raise fail
        out = real(plan, ref, log, grow=grow)
        when["end"] = time.time()
        return out

    monkeypatch.setattr(early, "ensure_store", slow)
    return when


def _task_starts(ts) -> dict[str, float]:
    starts: dict[str, float] = {}
    for task in ts.data:
        for ss in task["startstops"]:
            if ss["action"] == "compute":
                starts.setdefault(task["key"], ss["start"])
    return starts


def test_the_first_slices_compute_while_the_store_is_created_and_none_writes_before(tmp_path, monkeypatch, cluster):
    plan = make_plan(SPEC)  # 2 shards on 2 worker threads: the early wave is all of it
    when = _slow_creation(monkeypatch)
    with get_task_stream(cluster) as ts:
        result = run_sweep(plan, str(tmp_path / "dist.zarr"), client=cluster, slice_seconds=1e-3)
    assert result.complete and result.ran == plan.grid.runnable()
    starts = _task_starts(ts)
    slices = [t for k, t in starts.items() if "-slice-" in k]
    writers = [t for k, t in starts.items() if "-shard-" in k]
    assert slices and writers
    assert min(slices) < when["end"] - HOLD / 2  # computing long before the store existed
    assert min(writers) >= when["end"]  # no writer before it
    run_sweep(plan, str(tmp_path / "serial.zarr"), serial=True)
    assert_stores_bitwise_equal(str(tmp_path / "dist.zarr"), str(tmp_path / "serial.zarr"))


def test_no_early_wave_on_worker_processes_when_it_would_be_most_of_the_run(tmp_path, monkeypatch):
    """On worker processes, with fewer than ``MIN_SHARDS_PER_WORKER`` shards per worker, the early wave
    would be (nearly) the whole run and every shard of it would send its values to a writer task in
    another process (measured slower): the slices wait for the store instead. (Threads: the test above.)"""
    plan = make_plan(SPEC)  # 2 shards on 2 workers
    when = _slow_creation(monkeypatch)  # the store is created in this, the driver's, process
    with (
        LocalCluster(n_workers=2, processes=True, dashboard_address=None, **LOCAL_WORKER) as procs,
        Client(procs) as client,
        get_task_stream(client) as ts,
    ):
        result = run_sweep(plan, str(tmp_path / "dist.zarr"), client=client)
    assert result.complete and result.ran == plan.grid.runnable()
    starts = _task_starts(ts)
    slices = [t for k, t in starts.items() if "-slice-" in k]
    assert slices and min(slices) >= when["end"]  # nothing computed before the store existed
    run_sweep(plan, str(tmp_path / "serial.zarr"), serial=True)
    assert_stores_bitwise_equal(str(tmp_path / "dist.zarr"), str(tmp_path / "serial.zarr"))


def test_a_failed_creation_stops_the_run_with_its_error_and_writes_nothing(tmp_path, monkeypatch, cluster):
    plan = make_plan(SPEC)
    _slow_creation(monkeypatch, StoreWriteError("store refused: disk full (a test)"))
    store = tmp_path / "s.zarr"
    with pytest.raises(StoreWriteError, match="disk full"):
        run_sweep(plan, str(store), client=cluster)
    assert not store.exists()  # nothing written, and the lease is given up:
    assert not Path(f"{store}.lease").exists()
    monkeypatch.undo()
    assert run_sweep(plan, str(store), client=cluster).complete  # a rerun runs


def test_only_new_stores_of_short_cells_without_checkpoints_are_created_meanwhile(tmp_path):
    plan = make_plan(SPEC)
    ref = StoreRef.of(tmp_path / "s.zarr")
    parallel = Execution()
    assert early.MAX_CELL_SECONDS >= float(plan.cost_array().max())
    made = early.start(plan, ref, parallel, False, print)
    assert made is not None
    made.wait()  # the store exists now
    assert early.start(plan, ref, parallel, False, print) is None  # an existing store: opened first
    other = StoreRef.of(tmp_path / "t.zarr")
    assert early.start(plan, other, Execution(serial=True), False, print) is None
    assert early.start(plan, other, parallel, True, print) is None  # growing
    checkpointed = make_plan({**SPEC, "checkpoint_every": 0.1})
    assert early.start(checkpointed, other, parallel, False, print) is None
    long_cells = make_plan({**SPEC, "T": 20000.0, "dt_out": 5000.0})
    assert float(long_cells.cost_array().max()) > early.MAX_CELL_SECONDS
    assert early.start(long_cells, other, parallel, False, print) is None
    assert not Path(other.url).exists()


def test_one_slice_shards_of_longer_cells_are_written_beside_the_next_slice(tmp_path, monkeypatch, cluster):
    """Cells that hardly hold the GIL (estimated ≥ 0.2 ms): a shard of one slice gets a writer task of its
    own, which runs on the worker's spare thread beside the next slice (10³ cells of 10 ms on 2 threads:
    6.24–6.52 → 6.10–6.32 s). Short cells compute and write their shard in one task: a writer beside the
    next slice would contend with it for the GIL. The store exists beforehand (no early wave)."""
    from geosweep.sweeps.store import ensure_store, layout

    monkeypatch.setattr(layout, "SHARD_CELLS", 16)  # 64 cells in 4 shards: one slice each on 2 workers
    monkeypatch.setattr(layout, "MIN_SHARD_SECONDS", 0.0)
    for T, apart in ((2.0, True), (0.1, False)):  # estimated 0.37 ms and 0.02 ms a cell
        plan = make_plan(chain_ensemble(f"apart-{apart}", 16, T=T, dt_out=0.05))
        path = str(tmp_path / f"{apart}.zarr")
        ensure_store(plan, StoreRef.of(path))
        with get_task_stream(cluster) as ts:
            result = run_sweep(plan, path, client=cluster)
        assert result.complete and result.ran == 64
        keys = list(_task_starts(ts))
        assert len([k for k in keys if "-slice-" in k]) == 4
        assert len([k for k in keys if "-shard-" in k]) == (4 if apart else 0), keys
