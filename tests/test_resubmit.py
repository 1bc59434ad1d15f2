"""A slice whose workers died is resubmitted as long as its cells' checkpoints advance (a hard walltime,
``scancel`` or a lost node on every attempt): the long cells finish, bitwise equal to a serial run. A slice
whose workers died without any checkpoint advancing is given up with one line (real ``LocalCluster``
worker processes SIGKILLed, real zarr stores)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster

from geosweep.sweeps import checkpoints
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.store import StoreRef
from tests.sweep_util import assert_stores_bitwise_equal


def _spec(checkpoint_every: float | None) -> dict:
    """Two cells of 80 000 steps (a few seconds each), 16 segments with ``checkpoint_every = 25``."""
    spec = {
        "name": "resubmit",
        "system": "lj_sphere",
        "integrators": ["explicit_vi"],
        "h": [0.005],
        "T": 400.0,
        "dt_out": 1.0,
        "params": {"level": 2, "omega": [3.25, 2.0]},
    }
    if checkpoint_every is not None:
        spec["checkpoint_every"] = checkpoint_every
    return spec


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("ref") / "ref.zarr"
    assert run_sweep(_spec(None), store, serial=True).complete
    return store


#: a worker dies twice per attempt (allowed-failures 1: Dask's KilledWorker after the second death; the
#: default 3 only makes the test longer), and the nanny's restarted worker may take a while to come back
CONFIG = {"distributed.scheduler.allowed-failures": 1, "distributed.deploy.lost-worker-timeout": "600s"}


def _worker_pids(cluster) -> list[int]:
    out = []
    for nanny in cluster.workers.values():
        proc = getattr(getattr(nanny, "process", None), "process", None)
        if proc is not None and proc.pid:
            out.append(proc.pid)
    return out


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_long_cell_survives_a_worker_death_after_every_checkpoint(tmp_path, reference):
    """The only worker is SIGKILLed each time a checkpoint advances, 6 times (3 attempts' worth of
    KilledWorker): the sweep completes, each cell continued from its checkpoints, and the store equals the
    serial run bitwise. Before: ``KilledWorker`` after the second death, the run incomplete."""
    store = tmp_path / "k.zarr"
    ref = StoreRef.of(store)
    lines: list[str] = []
    killed: list[int] = []
    stop = threading.Event()

    def killer(cluster) -> None:
        last: dict = {}
        while not stop.is_set() and len(killed) < 6:
            now = {c: f for c, f in checkpoints.progress(ref).items() if f < 1.0}
            if now and now != last and (pids := _worker_pids(cluster)):
                _kill(pids)
                killed.extend(pids)
                last = now
            time.sleep(0.05)

    with dask.config.set(CONFIG):
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            t = threading.Thread(target=killer, args=(cluster,))
            t.start()
            try:
                res = run_sweep(_spec(25.0), store, client=client, log=lines.append)
            finally:
                stop.set()
                t.join()
    assert len(killed) == 6, (killed, lines)
    assert res.complete, (res.errors, lines)
    assert sum("resubmitted (attempt" in line for line in lines) >= 2, lines
    assert not any("slice failed" in line for line in lines), lines
    assert_stores_bitwise_equal(str(reference), str(store))


def test_a_slice_whose_workers_died_without_progress_is_given_up_in_one_line(tmp_path):
    """No checkpoint within the cell (one segment): the worker killed mid-cell leaves nothing to resume
    from, so the slice is not resubmitted; one line says why, the run reports the error (exit 1 in the CLI)."""
    store = tmp_path / "n.zarr"
    lines: list[str] = []
    stop = threading.Event()
    killed: list[int] = []

    def killer(cluster, client) -> None:
        while not stop.is_set() and not killed:
            running = [k for keys in client.processing().values() for k in keys if "-slice-" in str(k)]
            if running and (pids := _worker_pids(cluster)):
                time.sleep(1.0)  # inside the cell's single segment
                _kill(pids)
                killed.extend(pids)
            time.sleep(0.05)

    with dask.config.set({**CONFIG, "distributed.scheduler.allowed-failures": 0}):
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            t = threading.Thread(target=killer, args=(cluster, client))
            t.start()
            try:
                res = run_sweep(_spec(None), store, client=client, log=lines.append)
            finally:
                stop.set()
                t.join()
    assert killed and not res.complete
    assert len(res.errors) == 1, res.errors
    assert "a slice of 1 cell(s) lost its worker 1 time(s) and none of its checkpoints advanced" in res.errors[0]
    assert "0 % → 0 %" in res.errors[0] and "a rerun resumes" in res.errors[0]
    # the other cell's slice only waited on the killed worker: resubmitted, and it ran
    assert sum("waited on 1 worker(s) that died: resubmitted (attempt 2)" in line for line in lines) == 1, lines
    assert res.ran == 1 and not any("checkpoints advanced (" in line for line in lines), lines
