"""A finished store shard is written at once, not after the worker's next slice.

Workers of :data:`geosweep.sweeps.engine.LOCAL_WORKER` run one slice at a time (resource
``geosweep-slice``) and keep a spare thread: a shard's writer starts as soon as the shard's last
slice ends, while both workers are busy with the next shard. Real ``LocalCluster``, real store;
the task stream gives each task's start and stop.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster, get_task_stream

from geosweep.sweeps.engine import LOCAL_WORKER, SLICE_RESOURCE, run_sweep, slice_resources

#: 9 cells of ~0.3–1 s (RK4, 642 molecules): three store shards of three (one per epsilon), one
#: cell per slice, so two shards are written while another shard's slices run
SPEC = {
    "name": "shard-writes",
    "system": "lj_sphere",
    "integrators": ["rk4"],
    "h": [0.0025],
    "T": 2.0,
    "dt_out": 0.1,
    "params": {"omega": [0.0, 1.0, 2.0], "epsilon": [0.01, 0.011, 0.012]},
}
N_CELLS = 9


def _spans(stream: list[dict]) -> dict[str, tuple[float, float]]:
    out = {}
    for rec in stream:
        (comp,) = [s for s in rec["startstops"] if s["action"] == "compute"]
        out[rec["key"]] = (comp["start"], comp["stop"])
    return out


def _run(tmp_path, worker: dict) -> tuple[dict, dict]:
    """(writer key → (start, its shard's last slice stop), slice key → span) of one run on 2 workers."""
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **worker) as cluster, Client(cluster) as c:
        run_sweep(SPEC, tmp_path / "s.zarr", client=c, serial=False, slice_seconds=0.01)  # warm-up + compile
        with get_task_stream(c) as ts:
            res = run_sweep(SPEC, tmp_path / "t.zarr", client=c, slice_seconds=0.01)
        assert res.ran == N_CELLS and not res.errors
        spans = _spans(ts.data)
    slices = {k: v for k, v in spans.items() if "-slice-" in k}
    writers = {}
    for key, (start, _stop) in spans.items():
        m = re.search(r"-shard-(\d+)$", key)
        if m:
            last = max(stop for k, (_s, stop) in slices.items() if re.search(rf"-slice-{m.group(1)}-\d+$", k))
            writers[key] = (start, last)
    ds = xr.open_zarr(tmp_path / "t.zarr")
    assert int(ds["done"].sum()) == N_CELLS and (ds["status"] == 0).all()
    return writers, slices


def _delays(writers: dict) -> list[float]:
    """Writer start − its shard's last slice stop, in the order the shards were written, the last
    one left out (when it is written no slice is left to wait for)."""
    return [start - last for start, last in sorted(writers.values())][:-1]


def test_a_shards_writer_starts_when_its_slices_end(tmp_path):
    writers, slices = _run(tmp_path, LOCAL_WORKER)
    assert len(writers) == 3 and len(slices) == N_CELLS
    cell = np.median([stop - start for start, stop in slices.values()])
    assert cell > 0.15, f"cells too short ({cell:.2f} s) to tell a wait from none"
    first = min(writers.values())  # written while the next shards' slices run
    assert any(s < first[0] < e for s, e in slices.values()), "no slice ran beside the first write: nothing tested"
    for start, last in writers.values():
        assert start - last < 0.5 * cell, (start - last, cell)
    # shard by shard: both workers begin with the first shard's slices (its models are on every
    # worker, so no worker is tied to the shard whose models it happened to compute)
    first_two = sorted(slices, key=lambda k: slices[k][0])[:2]
    assert all(re.search(r"-slice-0-\d+$", k) for k in first_two), first_two


def test_one_task_per_thread_without_the_resource(tmp_path):
    """A cluster whose workers do not declare the resource gets slices without it (old behaviour)."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            assert slice_resources(c.scheduler_info(n_workers=-1)["workers"]) is None
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as c:
            assert slice_resources(c.scheduler_info(n_workers=-1)["workers"]) == {SLICE_RESOURCE: 1}


def test_an_adaptive_cluster_from_no_workers_runs_one_slice_per_worker(tmp_path):
    """With no worker yet the engine waits for the first one the adaptive cluster starts, then asks
    for the resource: no worker ever runs two slices at once (its second thread only writes)."""
    logs: list[str] = []
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        cluster.adapt(minimum=0, maximum=2, interval="100ms")
        with Client(cluster) as c, get_task_stream(c) as ts:
            res = run_sweep(SPEC, tmp_path / "a.zarr", client=c, slice_seconds=0.01, log=logs.append)
        stream = ts.data
    assert res.complete and res.ran == N_CELLS
    assert "waiting for a first Dask worker" in logs
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for rec in stream:
        if "-slice-" in rec["key"]:
            (comp,) = [x for x in rec["startstops"] if x["action"] == "compute"]
            by_worker.setdefault(rec["worker"], []).append((comp["start"], comp["stop"]))
    assert sum(len(v) for v in by_worker.values()) == N_CELLS
    for spans in by_worker.values():
        spans.sort()
        # the task stream's times are the worker's clock shifted by its estimated offset from the
        # scheduler's, re-estimated at every heartbeat: consecutive slices can seem to overlap by a few
        # ms (0.6 ms seen under load); two slices at once would overlap by a slice (~seconds)
        assert all(a[1] <= b[0] + 0.05 for a, b in zip(spans, spans[1:])), spans


@pytest.mark.slow
def test_without_a_spare_thread_the_writer_waits(tmp_path):
    """The control: with single-threaded workers (no resource) a shard written while others run waits
    about one slice for a worker thread. Whether a given run shows it depends on how Dask assigned the
    slices, so up to three runs (slow: timing-dependent)."""
    waited = []
    for attempt in range(3):
        (tmp_path / str(attempt)).mkdir()
        writers, slices = _run(tmp_path / str(attempt), {"threads_per_worker": 1})
        cell = np.median([stop - start for start, stop in slices.values()])
        waited.append((max(_delays(writers)), cell))
        if waited[-1][0] > 0.5 * cell:
            return
    raise AssertionError(f"no writer waited for a worker thread: (longest wait, cell) = {waited}")
