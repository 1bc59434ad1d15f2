"""A finished store shard is written at once, not after the worker's next slice.

Workers of :data:`sweeps.engine.LOCAL_WORKER` run one slice at a time (resource
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

from sweeps.engine import LOCAL_WORKER, SLICE_RESOURCE, run_sweep, slice_resources

#: 8 cells of ~0.3–1 s (RK4, 642 molecules): two store shards of four, one cell per slice
SPEC = {
    "name": "shard-writes",
    "system": "lj_sphere",
    "integrators": ["rk4"],
    "h": [0.0025],
    "T": 2.0,
    "dt_out": 0.1,
    "params": {"omega": [0.0, 0.4, 0.8, 1.2, 1.6, 2.0, 2.4, 2.8]},
}


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
        assert res.ran == 8 and not res.errors
        spans = _spans(ts.data)
    slices = {k: v for k, v in spans.items() if "-slice-" in k}
    writers = {}
    for key, (start, _stop) in spans.items():
        m = re.search(r"-shard-(\d+)$", key)
        if m:
            last = max(stop for k, (_s, stop) in slices.items() if re.search(rf"-slice-{m.group(1)}-\d+$", k))
            writers[key] = (start, last)
    ds = xr.open_zarr(tmp_path / "t.zarr")
    assert int(ds["done"].sum()) == 8 and (ds["status"] == 0).all()
    return writers, slices


def test_a_shards_writer_starts_when_its_slices_end(tmp_path):
    writers, slices = _run(tmp_path, LOCAL_WORKER)
    assert len(writers) == 2 and len(slices) == 8
    cell = np.median([stop - start for start, stop in slices.values()])
    assert cell > 0.15, f"cells too short ({cell:.2f} s) to tell a wait from none"
    first = min(writers.values())  # the shard written while the other shard's slices still run
    busy = [k for k, (s, e) in slices.items() if s < first[0] < e]
    assert busy, "no slice was running when the first shard was written: nothing was tested"
    for start, last in writers.values():
        assert start - last < 0.5 * cell, (start - last, cell)


def test_one_task_per_thread_without_the_resource(tmp_path):
    """A cluster whose workers do not declare the resource gets slices without it (old behaviour)."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            assert slice_resources(c) is None
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as c:
            assert slice_resources(c) == {SLICE_RESOURCE: 1}


@pytest.mark.slow
def test_without_a_spare_thread_the_writer_waits(tmp_path):
    """The control: single-threaded workers (no resource) start a middle shard's writer only when a
    worker thread frees, about one slice after its shard's last slice ended (timing-dependent, so slow)."""
    writers, slices = _run(tmp_path, {"threads_per_worker": 1})
    cell = np.median([stop - start for start, stop in slices.values()])
    first = min(writers.values())
    assert first[0] - first[1] > 0.5 * cell, (first, cell)
