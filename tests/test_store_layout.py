"""Store format 3: one zarr chunk per shard, so readers get one dask chunk per shard; format 2 still works.

Real zarr stores, real runs. The format-2 fixture (``tests/data/format2_store.tar.gz``) was written
by geosweep 490afe8 (the last format-2 revision) from :data:`SPEC`, 16 cells in 2 shards of
one-cell inner chunks.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.lease import Lease
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import (
    FORMAT_VERSION,
    MIN_SHARD_SECONDS,
    MIN_SHARDS,
    TARGET_SHARDS,
    StoreRef,
    done_mask,
    mark_for_rerun,
    shard_shape,
    short_cell_seconds,
    verify,
)
from tests.sweep_util import assert_stores_bitwise_equal

FIXTURE = Path(__file__).parent / "data" / "format2_store.tar.gz"
#: the fixture's spec: 4 seeds × 2 integrators × 2 h of the 3-link chain, ~0.1 ms per cell
SPEC = {
    "name": "format2-fixture",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "cf4"],
    "h": [0.01, 0.005],
    "T": 0.1,
    "dt_out": 0.01,
    "params": {"N": 3, "ic": "random", "seed": [0, 1, 2, 3]},
}
STAMPS = ("wall_time", "completed_at")


def _objects(store: Path, name: str) -> int:
    return sum(1 for p in (store / name / "c").rglob("*") if p.is_file())


def _format2_store(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    path = tmp_path / "store"
    assert zarr.open_group(str(path), mode="r").attrs["geosweep_format"] == 2
    return path


@pytest.fixture(scope="module")
def new_store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fmt3") / "s.zarr"
    res = run_sweep(SPEC, path, serial=True)
    assert res.complete and res.ran == 16
    return path


def test_open_zarr_gives_one_dask_chunk_per_shard(new_store):
    ds = xr.open_zarr(new_store)
    assert ds.attrs["geosweep_format"] == FORMAT_VERSION == 3
    shards = shard_shape(make_plan(SPEC))
    n_shards = int(np.prod([-(-n // s) for n, s in zip(ds["done"].shape, shards)]))
    assert n_shards == 2
    for name, var in ds.data_vars.items():
        assert var.data.npartitions == n_shards, name  # not one chunk per cell (16)
        assert var.data.chunks[: len(shards)] == tuple((s,) * (n // s) for s, n in zip(shards, var.shape)), name
        assert _objects(new_store, name) <= n_shards, name  # (a chunk of fill values only is not stored)
    assert _objects(new_store, "energy") == n_shards  # one object per variable per shard


def _n_shards(plan) -> int:
    return int(np.prod([-(-n // s) for n, s in zip(plan.grid.shape, shard_shape(plan))]))


def test_large_stores_get_larger_shards_not_more_objects():
    """10⁴ cells of a few ms: about TARGET_SHARDS shards of more than 64 cells (format 2: 157 shards of 64)."""
    spec = dict(SPEC, name="big", T=10.0, params={"N": 3, "ic": "random", "seed": list(range(2500))})
    plan = make_plan(spec)
    assert int(np.prod(shard_shape(plan))) > 64
    assert TARGET_SHARDS <= _n_shards(plan) <= 1.1 * TARGET_SHARDS


@pytest.mark.parametrize("seeds", [500, 2500])
def test_cheap_cells_share_shards_of_at_least_min_shard_seconds(seeds):
    """0.1 ms cells (the issue's ensemble, 2000 and 10⁴ cells): a shard write (one object per variable)
    is paid once per MIN_SHARD_SECONDS of work, not every 64 cells (then: 32 and 65 shard writes);
    still at least MIN_SHARDS shards, so finished shards reach the store before the end."""
    plan = make_plan(dict(SPEC, name="cheap", params={"N": 3, "ic": "random", "seed": list(range(seeds))}))
    cells = int(np.prod(shard_shape(plan)))
    assert cells * short_cell_seconds(plan) >= MIN_SHARD_SECONDS or cells >= plan.grid.size // MIN_SHARDS
    assert MIN_SHARDS <= _n_shards(plan) <= 4


def test_format2_store_reads_verifies_and_resumes_bitwise(tmp_path, new_store, capsys):
    from geosweep.flows.cli import main

    old = _format2_store(tmp_path)
    assert_stores_bitwise_equal(str(old), str(new_store))  # same values, old layout vs new
    assert verify(StoreRef.of(old)) == {"damaged": [], "flags": []}
    assert main(["verify", str(old)]) == 0 and main(["status", str(old)]) == 0
    assert "cells complete: 16/16" in capsys.readouterr().out
    before = xr.open_zarr(old).load()
    cell = (1, 0, 2)
    with Lease(StoreRef.of(old)) as lease:
        mark_for_rerun(lease.ref, [cell])
    assert int(done_mask(StoreRef.of(old)).sum()) == 15
    res = run_sweep(SPEC, old, serial=True)
    assert res.complete and res.ran == 1 and res.skipped == 15
    after = xr.open_zarr(old).load()
    group = zarr.open_group(str(old), mode="r")
    assert group.attrs["geosweep_format"] == 2 and group["energy"].shards == (2, 2, 2, 11)  # its own layout kept
    for name in after.data_vars:
        if name in STAMPS:
            continue
        np.testing.assert_array_equal(after[name].values, before[name].values, err_msg=name)
    stamp = after["completed_at"].values
    others = np.ones(stamp.shape, dtype=bool)
    others[cell] = False
    np.testing.assert_array_equal(stamp[others], before["completed_at"].values[others])  # never rewritten
    assert stamp[cell] > before["completed_at"].values[cell]
    assert verify(StoreRef.of(old)) == {"damaged": [], "flags": []}


def test_one_damaged_cell_of_a_new_store_is_repaired(tmp_path, new_store, capsys):
    """A changed value of one cell: verify names exactly it, --repair marks it, the rerun restores it."""
    from geosweep.flows.cli import main

    path = tmp_path / "s.zarr"
    shutil.copytree(new_store, path)
    cell = (0, 1, 3)
    energy = zarr.open_group(str(path), mode="r+")["energy"]
    good = np.array(energy[cell])
    energy[cell + (4,)] = good[4] + 1.0
    assert verify(StoreRef.of(path)) == {"damaged": [cell], "flags": []}
    assert main(["verify", str(path), "--repair"]) == 0
    assert "1 damaged cell(s)" in capsys.readouterr().out
    assert int(done_mask(StoreRef.of(path)).sum()) == 15
    res = run_sweep(SPEC, path, serial=True)
    assert res.ran == 1 and res.skipped == 15
    np.testing.assert_array_equal(zarr.open_group(str(path), mode="r")["energy"][cell], good)
    assert_stores_bitwise_equal(str(path), str(new_store))
    assert main(["verify", str(path)]) == 0


def test_an_undecodable_shard_of_a_new_store_is_recomputed(tmp_path, new_store):
    """Garbage in one shard object of one variable: its cells (and only they) are recomputed."""
    path = tmp_path / "s.zarr"
    shutil.copytree(new_store, path)
    (chunk,) = [p for p in (path / "energy" / "c").rglob("*") if p.is_file() and "/1/" in p.as_posix()[-12:]]
    chunk.write_bytes(b"garbage")
    found = verify(StoreRef.of(path))
    assert sorted(found["damaged"]) == sorted(c for c in np.ndindex(2, 2, 4) if c[2] >= 2)
    with Lease(StoreRef.of(path)) as lease:
        mark_for_rerun(lease.ref, found["damaged"])
    res = run_sweep(SPEC, path, serial=True)
    assert res.ran == 8 and res.skipped == 8
    assert_stores_bitwise_equal(str(path), str(new_store))
    assert verify(StoreRef.of(path)) == {"damaged": [], "flags": []}


def test_a_format2_store_converts_to_the_new_layout_bitwise(tmp_path, new_store):
    from geosweep.sweeps.convert import main

    old = _format2_store(tmp_path)
    target = tmp_path / "new.zarr"
    assert main([str(old), str(target)]) == 0
    assert zarr.open_group(str(target), mode="r").attrs["geosweep_format"] == FORMAT_VERSION
    assert xr.open_zarr(target)["energy"].data.npartitions == 2  # one chunk per shard
    assert_stores_bitwise_equal(str(target), str(old))
    a, b = xr.open_zarr(target), xr.open_zarr(old)
    for name in ("completed_at", "wall_time", "checksum"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
    assert verify(StoreRef.of(target)) == {"damaged": [], "flags": []}
    res = run_sweep(SPEC, target, serial=True)  # the same spec: nothing left to run
    assert res.complete and res.ran == 0 and res.skipped == 16


def test_the_converter_works_from_a_fresh_process_and_refuses_in_one_line(tmp_path):
    """``python -m geosweep.sweeps.convert`` in a new process (no family registered yet: before,
    ``KeyError: 'pendulum_chain'``) converts the shipped format-2 store bitwise; a missing source, a plain
    file, a zarr store that is no geosweep store or an existing target: one line, exit 2, nothing written."""
    import subprocess
    import sys

    old = _format2_store(tmp_path)

    def convert(src, dst) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "geosweep.sweeps.convert", str(src), str(dst)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    p = convert(old, tmp_path / "new.zarr")
    assert p.returncode == 0 and p.stderr == "", p.stderr[-3000:]
    assert_stores_bitwise_equal(str(tmp_path / "new.zarr"), str(old))
    (tmp_path / "plain").write_text("x")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    for src, dst, words in [
        (tmp_path / "missing.zarr", tmp_path / "a.zarr", "not a store"),
        (tmp_path / "plain", tmp_path / "b.zarr", "is a file"),
        (tmp_path / "other.zarr", tmp_path / "c.zarr", "not a geosweep store"),
        (old, tmp_path / "new.zarr", "already exists"),
    ]:
        p = convert(src, dst)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and words in lines[0], p.stderr[-3000:]
        assert lines[0].startswith("geosweep: ") and p.stdout == ""
        assert dst.name == "new.zarr" or not dst.exists()
