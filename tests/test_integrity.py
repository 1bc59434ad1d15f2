"""Finished cells carry a checksum: damaged values or flags are found, and a resume recomputes
exactly those cells (real zarr stores, chunks damaged on disk)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.store import StoreRef, verify
from tests.sweep_util import assert_stores_bitwise_equal

SPEC = {
    "name": "integrity",
    "system": "torus",
    "integrators": ["v2_newmark"],
    "h": [0.002],
    "T": 0.2,
    "dt_out": 0.02,
    "params": {"N_p": [16, 24], "v0": [0.5, 1.0]},
}


@pytest.fixture(autouse=True)
def one_cell_per_shard(monkeypatch):
    """One cell per shard object here, so that damaging one file damages exactly one cell (with
    shards of several cells every cell of a damaged shard is found and recomputed the same way)."""
    from geosweep.sweeps.store import layout

    monkeypatch.setattr(layout, "SHARD_CELLS", 1)
    monkeypatch.setattr(layout, "MIN_SHARD_SECONDS", 0.0)


def _chunk_files(store: Path, var: str) -> list[Path]:
    return sorted(p for p in (store / var).rglob("*") if p.is_file() and p.name != "zarr.json")


def test_checksums_find_damage_and_resume_recomputes_exactly_it(tmp_path):
    ref_store = tmp_path / "ref.zarr"
    assert run_sweep(SPEC, ref_store, serial=True).complete
    assert verify(StoreRef.of(ref_store)) == {"damaged": [], "flags": []}

    store = tmp_path / "s.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    ref = StoreRef.of(store)
    energy = _chunk_files(store, "energy")
    energy[1].unlink()  # a lost value chunk
    final = _chunk_files(store, "final_state")
    final[2].write_bytes(b"\\x00garbage")  # a corrupted one
    damaged = verify(ref)["damaged"]
    assert len(damaged) == 2
    from geosweep.flows.cli import main

    assert main(["verify", str(store)]) == 1  # reports, changes nothing
    assert verify(ref)["damaged"] == damaged
    assert main(["verify", str(store), "--repair"]) == 0
    res = run_sweep(SPEC, store, serial=True)
    assert res.ran == 2 and verify(ref)["damaged"] == []
    assert_stores_bitwise_equal(str(ref_store), str(store))


def test_damaged_done_chunk_is_rebuilt_not_fatal(tmp_path):
    store = tmp_path / "d.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    done = _chunk_files(store, "done")
    done[0].write_bytes(b"\\xffnot zstd")
    res = run_sweep(SPEC, store, serial=True)  # no crash: the cell whose flag is unreadable runs again
    assert res.complete and res.ran == 1
    assert (np.asarray(zarr.open_group(str(store), mode="r")["done"][...]) == 1).all()
