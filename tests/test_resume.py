"""Kill a running sweep (SIGKILL to the whole process group) and resume it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import xarray as xr
import zarr

from geosweep.sweeps.engine import run_sweep
from tests.sweep_util import assert_stores_bitwise_equal

SPEC_TOML = """
name = "resume-test"
system = "lj_sphere"
integrators = ["explicit_vi", "rk4"]
h = [0.01, 0.005]
T = 2.0
dt_out = 0.1
[params]
omega = [0.0, 1.0, 2.0, 3.0, 3.25, 4.0]
"""


def _cli(spec, store):
    cmd = [sys.executable, "-m", "geosweep.flows.cli", "run", str(spec), "--store", str(store), "--no-prefect"]
    return cmd + ["--workers", "2", "--slice-seconds", "0.5"]


def _done(store) -> np.ndarray:
    try:
        return np.asarray(zarr.open_group(str(store), mode="r")["done"][...]) == 1
    except Exception:  # noqa: BLE001 - store not created yet
        return np.zeros(0, dtype=bool)


def _kill_between_shards(spec, store) -> bool:
    """Run the CLI on ``store`` and SIGKILL it once one of its two shards is written: True, or False if
    the run ended before a poll saw that (the two writes fell within one poll: possible on a busy machine)."""
    proc = subprocess.Popen(
        _cli(spec, store), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            done = _done(store)
            if done.size and 4 <= done.sum() <= done.size - 6:
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.02)
        raise AssertionError("sweep made no progress")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_killed_sweep_resumes_without_recomputing_finished_cells(tmp_path):
    spec = tmp_path / "resume.toml"
    spec.write_text(SPEC_TOML)
    for attempt in range(3):  # a run the poll could not stop between its shards is tried again, anew
        store = tmp_path / f"resume-{attempt}.zarr"
        if _kill_between_shards(spec, store):
            break
    else:
        raise AssertionError("the sweep finished before it could be interrupted, 3 times")
    time.sleep(0.5)
    ds = xr.open_zarr(store)
    finished = ds.done.values == 1
    assert 4 <= finished.sum() < finished.size
    stamps = ds.completed_at.values.copy()
    walls = ds.wall_time.values.copy()

    # cells whose values and checksum were written when the kill came, but not yet their done flag,
    # are verified by checksum on resume and kept (not recomputed) like the finished ones
    written = finished | np.isfinite(stamps)
    rerun = subprocess.run(_cli(spec, store), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    kept = re.search(r"(\d+)/(\d+) cells already complete", rerun.stderr)
    assert kept and finished.sum() <= int(kept[1]) <= written.sum() and int(kept[2]) == finished.size

    after = xr.open_zarr(store)
    assert bool((after.done == 1).all())
    # cells finished before the kill were not recomputed: their provenance stamps are unchanged
    np.testing.assert_array_equal(after.completed_at.values[finished], stamps[finished])
    np.testing.assert_array_equal(after.wall_time.values[finished], walls[finished])
    assert np.all(after.completed_at.values[~written] > np.nanmax(stamps))
    # and the final store equals an uninterrupted run
    reference = tmp_path / "reference.zarr"
    run_sweep(spec, reference, serial=True)
    assert_stores_bitwise_equal(store, reference)
