"""``geosweep verify --repair`` on a cell whose values span several objects along its time axis.

Real runs, real zarr stores. An adaptive store keeps the row at T in an object of its own, so a
cell's ``energy`` is two objects per shard; garbage in the later one must be the object that repair
deletes (:func:`geosweep.sweeps.repair.drop_undecodable`), or the rerun cannot rewrite it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import zarr

from geosweep.flows.cli import main
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.store import StoreRef, verify
from tests.sweep_util import assert_stores_bitwise_equal

#: 2 integrators × 2 h × 1 tol of the 2-link chain: rkmk45 at h = 0.005 is a filler (done, never
#: run), so the shard of h = 0.005 keeps a finished cell and its rerun reads the shard back
SPEC = {
    "name": "repair-time-objects",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "rkmk45"],
    "h": [0.01, 0.005],
    "tol": [1e-6],
    "T": 0.5,
    "dt_out": 0.05,
    "params": {"N": 2},
}


def _objects(store: Path, name: str) -> dict[str, bytes]:
    return {
        p.relative_to(store / name / "c").as_posix(): p.read_bytes()
        for p in (store / name / "c").rglob("*")
        if p.is_file()
    }


def test_garbage_in_a_later_time_object_is_dropped_and_rewritten(tmp_path):
    clean, path = tmp_path / "clean.zarr", tmp_path / "s.zarr"
    run_sweep(SPEC, clean, serial=True)
    energy = zarr.open_group(str(clean), mode="r")["energy"]
    assert energy.shape[-1] == 11 and energy.chunks[-1] == 10  # the time axis spans two objects
    shutil.copytree(clean, path)
    before = _objects(path, "energy")
    later, first = "0/1/0/1", "0/1/0/0"  # shard h = 0.005: its row at T, its rows before T
    assert {later, first} <= set(before)
    (path / "energy" / "c" / later).write_bytes(b"garbage")
    assert verify(StoreRef.of(path)) == {"damaged": [(0, 1, 0)], "flags": []}

    assert main(["verify", str(path), "--repair"]) == 0
    after = _objects(path, "energy")
    assert later not in after  # the undecodable object went
    assert after == {k: v for k, v in before.items() if k != later}  # and only it: the decodable ones stay

    res = run_sweep(SPEC, path, serial=True)
    assert res.complete and res.ran == 1 and res.skipped == 2
    assert_stores_bitwise_equal(str(path), str(clean))
    assert _objects(path, "energy") == before  # the same bytes as the clean run, object for object
    assert verify(StoreRef.of(path)) == {"damaged": [], "flags": []}
    np.testing.assert_array_equal(
        zarr.open_group(str(path), mode="r")["checksum"][...], zarr.open_group(str(clean), mode="r")["checksum"][...]
    )
