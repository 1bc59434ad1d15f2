"""Kept carries are one object per shard with a few entries per *group* of like cells, not ~9 per
cell (issue 21: a zip entry per cell and array cost 2 s of 4.6 s CPU in a 4000-cell serial run of
0.1 ms cells). Values round-trip bitwise, and objects of the older one-entry-per-array layout are
still read and merged. A short chain cell's carry leaves out the samples the store holds (issue 53
item 5: ≤ 1 kB per cell), and a store of whole carries still extends bitwise."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from geosweep.sweeps import carries as carry_objects
from geosweep.sweeps.store import StoreRef


def _carry(rng, n_out: int) -> dict[str, np.ndarray]:
    return {
        "S": rng.standard_normal(6),
        "out": rng.standard_normal((n_out, 6)),
        "time": np.array(rng.standard_normal()),  # 0-d
        "info": rng.integers(0, 9, 4).astype(np.int64),
    }


def _index(stem: str) -> tuple[int, ...]:
    """The shard index of a carries object's name (``s<i>_<j>…``)."""
    return tuple(int(i) for i in stem[1:].split("_"))


def _entries(ref, index) -> list[str]:
    fs, path = carry_objects._path(ref, index)
    with zipfile.ZipFile(io.BytesIO(fs.cat_file(path))) as z:
        return z.namelist()


def test_a_shards_carries_are_a_few_stacked_entries_and_round_trip_bitwise(tmp_path):
    ref = StoreRef.of(str(tmp_path / "s.zarr"))
    rng = np.random.default_rng(1)
    carries = {(i % 2, 0, i): _carry(rng, 11 if i % 2 else 21) for i in range(400)}
    carry_objects.save_shard(ref, (0, 0, 0), carries)
    assert len(_entries(ref, (0, 0, 0))) == 2 * (1 + 4)  # two groups (two shapes) × (cells + 4 arrays)
    back = carry_objects.load_shard(ref, (0, 0, 0))
    assert back.keys() == carries.keys()
    for cell, arrays in carries.items():
        assert list(back[cell]) == list(arrays)
        for k, v in arrays.items():
            assert back[cell][k].shape == v.shape and back[cell][k].dtype == v.dtype
            assert back[cell][k].tobytes() == v.tobytes()
    assert carry_objects.carried_cells(ref, (0, 0, 0)) == set(carries)
    carry_objects.save_shard(ref, (0, 0, 0), {(0, 0, 0): None, (1, 0, 401): _carry(rng, 11)})  # merge
    assert carry_objects.carried_cells(ref, (0, 0, 0)) == (set(carries) - {(0, 0, 0)}) | {(1, 0, 401)}


def test_an_object_of_the_older_layout_is_read_and_merged(tmp_path):
    ref = StoreRef.of(str(tmp_path / "s.zarr"))
    rng = np.random.default_rng(2)
    old = {(0, i): _carry(rng, 5) for i in range(3)}
    fs, path = carry_objects._path(ref, (0, 0))
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **{f"c0_{c[1]}.{k}": v for c, arrays in old.items() for k, v in arrays.items()})
    fs.pipe_file(path, buf.getvalue())
    assert carry_objects.carried_cells(ref, (0, 0)) == set(old)
    back = carry_objects.load_shard(ref, (0, 0))
    assert all(back[c][k].tobytes() == v.tobytes() for c, a in old.items() for k, v in a.items())
    new = _carry(rng, 5)
    carry_objects.save_shard(ref, (0, 0), {(0, 3): new})
    back = carry_objects.load_shard(ref, (0, 0))
    assert set(back) == {*old, (0, 3)} and back[(0, 3)]["out"].tobytes() == new["out"].tobytes()
    assert back[(0, 1)]["S"].tobytes() == old[(0, 1)]["S"].tobytes()


def test_a_run_of_cheap_cells_writes_fewer_carry_entries_than_cells(tmp_path):
    """The issue's ensemble (0.1 ms cells): the carries of 400 cells are a few dozen zip entries."""
    from geosweep.sweeps.engine import run_sweep

    spec = {
        "name": "carries",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": list(range(100))},
    }
    store = tmp_path / "c.zarr"
    assert run_sweep(spec, str(store), serial=True).ran == 400
    objects = sorted((store / carry_objects.DIRNAME).glob("*.npz"))
    ref = StoreRef.of(str(store))
    entries = sum(len(_entries(ref, _index(p.stem))) for p in objects)
    assert objects and entries < 100, entries  # was 9 per cell: 3600
    assert sum(len(carry_objects.carried_cells(ref, _index(p.stem))) for p in objects) == 400


def _chain_spec(name: str, seeds: int) -> dict:
    """Short 3-link chain cells (the issue's 10⁶-cell store, smaller): 2 × 2 methods × ``seeds``."""
    return {
        "name": name,
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": list(range(seeds))},
    }


def test_a_short_chain_cells_kept_carry_is_at_most_1_kB(tmp_path):
    """Issue 53 item 5: the carries of 2000 short chain cells hold no sample, envelope or snapshot
    the store has (thin, deflated): ≤ 1024 bytes per cell on disk (2.6 kB before)."""
    from geosweep.api import verify
    from geosweep.sweeps.engine import run_sweep

    store = tmp_path / "c.zarr"
    assert run_sweep(_chain_spec("thin", 500), str(store), serial=True).ran == 2000
    ref = StoreRef.of(str(store))
    assert carry_objects.carry_bytes(ref) / 2000 <= 1024, carry_objects.carry_bytes(ref) / 2000
    objects = sorted((store / carry_objects.DIRNAME).glob("*.npz"))
    carries = [c for p in objects for c in carry_objects.load_shard(ref, _index(p.stem)).values()]
    assert len(carries) == 2000 and all(carry_objects.is_thin(c) for c in carries)
    assert verify(str(store)).ok


def test_a_store_of_whole_carries_still_extends_bitwise(tmp_path, monkeypatch):
    """A store written before thin carries (each carry holds its samples) extends as before, its
    cells' new carries thin; the result is bitwise a direct run (short chains, and a dense-output
    adaptive method whose carry is the state before its last step)."""
    from geosweep import sweeps
    from geosweep.sweeps.engine import run_sweep
    from tests.sweep_util import assert_stores_bitwise_equal

    spec = {**_chain_spec("whole", 3), "integrators": ["rkmk4", "rkmk45"], "tol": 1e-6}
    old, direct = tmp_path / "old.zarr", tmp_path / "direct.zarr"
    with monkeypatch.context() as m:
        m.setattr(carry_objects, "thin", lambda carry, stacked=False: carry)
        run_sweep(spec, str(old), serial=True)
    ref = StoreRef.of(str(old))
    objects = sorted((old / carry_objects.DIRNAME).glob("*.npz"))
    before = [c for p in objects for c in carry_objects.load_shard(ref, _index(p.stem)).values()]
    assert before and not any(carry_objects.is_thin(c) for c in before)
    assert sweeps.extend(str(old), T=0.25, serial=True).complete
    run_sweep({**spec, "T": 0.25}, str(direct), serial=True)
    assert_stores_bitwise_equal(str(old), str(direct))
    after = [c for p in objects for c in carry_objects.load_shard(ref, _index(p.stem)).values()]
    assert after and all(carry_objects.is_thin(c) for c in after)
    assert sweeps.extend(str(old), T=0.4, serial=True).complete  # and on from the thin ones
    run_sweep({**spec, "T": 0.4}, str(tmp_path / "direct2.zarr"), serial=True)
    assert_stores_bitwise_equal(str(old), str(tmp_path / "direct2.zarr"))


def test_a_thin_carry_over_changed_stored_samples_is_not_used(tmp_path, caplog):
    """A thin carry continues the samples as stored: a cell whose stored samples no longer match its
    checksum is computed again from t = 0 (one warning line), the store then bitwise a direct run."""
    import zarr

    from geosweep import sweeps
    from geosweep.sweeps.engine import run_sweep
    from tests.sweep_util import assert_stores_bitwise_equal

    spec = _chain_spec("changed", 2)
    store, direct = tmp_path / "s.zarr", tmp_path / "direct.zarr"
    run_sweep(spec, str(store), serial=True)
    energy = zarr.open_group(str(store), mode="r+")["energy"]
    cell = (0,) * (energy.ndim - 1)
    energy[(*cell, 3)] = energy[(*cell, 3)] + 1.0  # a stored sample changed, its checksum not
    with caplog.at_level("WARNING", logger="geosweep"):
        assert sweeps.extend(str(store), T=0.2, serial=True).complete
    assert any("1 of 8 finished cells" in r.getMessage() for r in caplog.records)
    run_sweep({**spec, "T": 0.2}, str(direct), serial=True)
    assert_stores_bitwise_equal(str(store), str(direct))


def test_a_cell_continued_from_a_thin_carry_resumes_from_its_checkpoint_bitwise(tmp_path, monkeypatch):
    """An extension interrupted inside a cell continued from a thin carry (its checkpoint holds NaN
    where the store's rows are, and says so): the rerun resumes the cell from that checkpoint and
    takes those rows from the store, bitwise a direct run."""
    from geosweep import sweeps
    from geosweep.sweeps import checkpoints
    from geosweep.sweeps.engine import run_sweep
    from tests.sweep_util import assert_stores_bitwise_equal

    spec = {**_chain_spec("resumed", 1), "integrators": ["rkmk4", "rkmk45"], "tol": 1e-6, "checkpoint_every": 0.05}
    store, direct = tmp_path / "s.zarr", tmp_path / "direct.zarr"
    run_sweep(spec, str(store), serial=True)
    save, calls = checkpoints.save, []

    def save_then_stop(ref, cell, arrays, progress):
        save(ref, cell, arrays, progress)
        calls.append(cell)
        if len(calls) == 3:
            raise RuntimeError("stopped inside a cell")

    with monkeypatch.context() as m:
        m.setattr(checkpoints, "save", save_then_stop)
        with pytest.raises(RuntimeError, match="stopped inside a cell"):
            sweeps.extend(str(store), T=0.3, serial=True)
    saved = checkpoints.load(StoreRef.of(str(store)), calls[-1])  # the interrupted cell's checkpoint
    assert saved is not None and carry_objects.split(saved)[3] != (0, 0)  # rows from the store, recorded
    res = sweeps.extend(str(store), T=0.3, serial=True)
    assert res.complete and res.resumed > 0
    run_sweep({**spec, "T": 0.3}, str(direct), serial=True)
    assert_stores_bitwise_equal(str(store), str(direct))
